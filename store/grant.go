package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"dataservice/internal/clip"
	"dataservice/store/model"
)

// containGrant is grant containment: whoever writes a _user, _group, _role or _apikey
// may only produce permissions it holds itself. The stored object (old) must not
// confer more than the writer holds (so the password, enabled flag, keyname or
// memberships of a more powerful account cannot be changed), nor may the new state
// (next; nil for a delete).
func (tx *Tx) containGrant(ctx context.Context, auth *model.Auth, s *model.Schema, old, next *Instance) error {
	if auth == nil || auth.HasAll() || !model.IsGrantClass(s.Keyname) {
		return nil
	}
	m, err := readMembershipFrom(ctx, tx)
	if err != nil {
		return err
	}
	// The refusal names no permission: the ones beyond the writer may be another
	// principal's, which a writer who may not read users, roles or keys must not learn.
	for i, in := range []*Instance{old, next} {
		if in == nil {
			continue
		}
		g, err := tx.grantOf(ctx, m, s.Keyname, in)
		if err != nil {
			return err
		}
		if extra := g.Beyond(auth); len(extra) > 0 {
			what := "would grant permissions you do not hold"
			if i == 0 {
				what = "confers permissions you do not hold"
			}
			return model.Errorf(model.EForbidden, "permission denied: %s %s %s", s.Keyname, clip.Text(in.Keyname), what)
		}
	}
	return nil
}

// grantOf is what the object in of class cls confers on whoever it reaches.
func (tx *Tx) grantOf(ctx context.Context, m *membership, cls string, in *Instance) (model.Granted, error) {
	g := model.Granted{Perms: map[string]bool{}}
	addRole := func(r string) {
		if r == RoleAdmin {
			g.All = true
		}
		for _, p := range m.rolePerms[r] {
			g.Perms[p] = true
		}
	}
	switch cls {
	case "_role":
		// Its new permission list: what its users and groups receive.
		if in.Keyname == RoleAdmin {
			g.All = true
		}
		for _, p := range stringList(in.Data["permissions"]) {
			g.Perms[p] = true
		}
	case "_group":
		// What its members receive: the roles listing it or a group it is in.
		in := map[string]bool{in.Keyname: true}
		for changed := true; changed; {
			changed = false
			for grp, subs := range m.groupSubs {
				if in[grp] {
					continue
				}
				for _, sg := range subs {
					if in[sg] {
						in[grp], changed = true, true
						break
					}
				}
			}
		}
		for r, subs := range m.roleSubs {
			for _, sg := range subs {
				if in[sg] {
					addRole(r)
					break
				}
			}
		}
	case "_user":
		if in.Keyname == "admin" {
			g.All = true
		}
		for _, r := range m.rolesOf(in.Keyname) {
			addRole(r)
		}
	case "_apikey":
		all, perms, _, err := tx.db.keyPermissionsWith(m, stringList(in.Data["permissions"]))
		if err != nil {
			return g, err
		}
		g.All = all
		for _, p := range perms {
			g.Perms[p] = true
		}
		// The key acts as its user for task ownership: naming a user is reaching it.
		if login, _ := in.Data["user"].(string); login != "" {
			ug, err := tx.grantOf(ctx, m, "_user", &Instance{Keyname: login})
			if err != nil {
				return g, err
			}
			g.All = g.All || ug.All
			for p := range ug.Perms {
				g.Perms[p] = true
			}
		}
	}
	return g, nil
}

// checkRenameReach refuses a cascading rename of in (of schema s) that would rewrite
// instances of a schema auth may not update: the references it holds are data the
// caller cannot change.
func (tx *Tx) checkRenameReach(ctx context.Context, auth *model.Auth, s *model.Schema, in *Instance) error {
	if auth == nil || auth.HasAll() {
		return nil
	}
	refs, err := tx.referencingFields(ctx, s.Keyname)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		rs, err := tx.Schema(ctx, ref[0])
		if err != nil {
			return err
		}
		if model.CanWrite(auth, rs, model.ActionUpdate) {
			continue
		}
		holdsIn := func(dia *dialect) string { return dia.jsonHolds("instances.data", "'$.' || ?", "?") }
		holds := holdsIn(tx.db.dia)
		if err := tx.whereFromSnapshot(ctx, ref[0], holdsIn, ref[1], in.Keyname); err != nil {
			return err
		}
		var one int
		err = tx.queryRowContext(ctx, `SELECT 1 FROM instances WHERE classname = ? AND `+holds+` LIMIT 1`,
			ref[0], ref[1], in.Keyname).Scan(&one)
		if err == nil {
			return model.Errorf(model.EForbidden, "permission denied: renaming %s %s would rewrite references in %s, which you may not update",
				s.Keyname, in.Keyname, ref[0])
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("check rename of %s %s: %w", s.Keyname, in.Keyname, err)
		}
	}
	return nil
}
