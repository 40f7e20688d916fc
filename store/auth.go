package store

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"dataservice/store/model"
)

func setList(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// RoleAdmin is the role whose members hold every permission, like the login admin.
const RoleAdmin = "role_admin"

// membership is the role/group graph read once per resolution.
type membership struct {
	groupUsers map[string][]string // group -> direct users
	groupSubs  map[string][]string // group -> subgroups
	roleUsers  map[string][]string
	roleSubs   map[string][]string
	rolePerms  map[string][]string
}

// readMembership builds the role graph from the cached `_group` and `_role`
// instances (ClassInstances), their enabled ones, as readMembershipFrom reads them.
func (db *DB) readMembership(ctx context.Context) (*membership, error) {
	m := newMembership()
	for _, cls := range []string{"_group", "_role"} {
		list, err := db.ClassInstances(ctx, cls)
		if err != nil {
			return nil, fmt.Errorf("read roles: %w", err)
		}
		for _, in := range list {
			if in.IsEnabled {
				m.add(cls, in.Keyname, in.Data)
			}
		}
	}
	return m, nil
}

func newMembership() *membership {
	return &membership{groupUsers: map[string][]string{}, groupSubs: map[string][]string{},
		roleUsers: map[string][]string{}, roleSubs: map[string][]string{}, rolePerms: map[string][]string{}}
}

// add adds a group's or role's data to the graph.
func (m *membership) add(cls, key string, data map[string]any) {
	if cls == "_group" {
		m.groupUsers[key] = stringList(data["users"])
		m.groupSubs[key] = stringList(data["subgroups"])
		return
	}
	m.roleUsers[key] = stringList(data["users"])
	m.roleSubs[key] = stringList(data["subgroups"])
	m.rolePerms[key] = stringList(data["permissions"])
}

func readMembershipFrom(ctx context.Context, q querier) (*membership, error) {
	m := newMembership()
	rows, err := q.queryContext(ctx, `SELECT classname, keyname, data FROM instances
		WHERE classname IN ('_group', '_role') AND is_enabled = 1`)
	if err != nil {
		return nil, fmt.Errorf("read roles: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var cls, key, raw string
		if err := rows.Scan(&cls, &key, &raw); err != nil {
			return nil, fmt.Errorf("read roles: %w", err)
		}
		data, err := model.DecodeData(raw)
		if err != nil {
			return nil, err
		}
		m.add(cls, key, data)
	}
	return m, rows.Err()
}

func stringList(v any) []string {
	switch x := v.(type) {
	case []any:
		out := make([]string, 0, len(x))
		for _, it := range x {
			if s, ok := model.ScalarText(it); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	case nil:
		return nil
	}
	if s, ok := model.ScalarText(v); ok && s != "" {
		return []string{s}
	}
	return nil
}

// groupsOf returns every group login belongs to, directly or through subgroups.
func (m *membership) groupsOf(login string) map[string]bool {
	in := map[string]bool{}
	for g, users := range m.groupUsers {
		for _, u := range users {
			if u == login {
				in[g] = true
			}
		}
	}
	// A member of a subgroup is a member of the groups listing it: climb until stable.
	for changed := true; changed; {
		changed = false
		for g, subs := range m.groupSubs {
			if in[g] {
				continue
			}
			for _, s := range subs {
				if in[s] {
					in[g] = true
					changed = true
					break
				}
			}
		}
	}
	return in
}

// rolesOf returns the enabled roles that list login or one of its groups.
func (m *membership) rolesOf(login string) []string {
	groups := m.groupsOf(login)
	var roles []string
	for r := range m.rolePerms {
		member := false
		for _, u := range m.roleUsers[r] {
			member = member || u == login
		}
		for _, g := range m.roleSubs[r] {
			member = member || groups[g]
		}
		if member {
			roles = append(roles, r)
		}
	}
	sort.Strings(roles)
	return roles
}

// UserAuth returns the authorisation context of an enabled user: the union of the
// permissions of its roles; the login admin and members of role_admin hold all.
func (db *DB) UserAuth(ctx context.Context, login string) (*model.Auth, error) {
	inst, err := db.Instance(ctx, "_user", login)
	if err != nil {
		return nil, err
	}
	return db.UserAuthOf(ctx, inst)
}

// UserAuthOf is UserAuth of a user instance the caller has just read (a console
// session's user), without reading it again. The caller checks that it is enabled.
func (db *DB) UserAuthOf(ctx context.Context, inst *Instance) (*model.Auth, error) {
	login := inst.Keyname
	a := &model.Auth{Kind: model.AuthUser, Name: login, User: login, UserID: inst.ID}
	if login == "admin" {
		a.All = true
		return a, nil
	}
	m, err := db.readMembership(ctx)
	if err != nil {
		return nil, err
	}
	perms := map[string]bool{}
	for _, r := range m.rolesOf(login) {
		if r == RoleAdmin {
			a.All = true
		}
		for _, p := range m.rolePerms[r] {
			perms[p] = true
		}
	}
	a.Perms = setList(perms)
	return a, nil
}

// KeyPermissions resolves an API key's permission list: plain names add, `role:NAME`
// adds the role's permissions (role_admin: all), `!name` removes (after all adds).
func (db *DB) KeyPermissions(ctx context.Context, list []string) (all bool, perms, deny []string, err error) {
	var m *membership
	for _, p := range list {
		if strings.HasPrefix(strings.TrimSpace(p), "role:") {
			if m, err = db.readMembership(ctx); err != nil {
				return false, nil, nil, err
			}
			break
		}
	}
	return db.keyPermissionsWith(m, list)
}

// keyPermissionsWith is KeyPermissions over a membership graph already read (nil when
// the list names no role).
func (db *DB) keyPermissionsWith(m *membership, list []string) (all bool, perms, deny []string, err error) {
	add, del := map[string]bool{}, map[string]bool{}
	for _, p := range list {
		p = strings.TrimSpace(p)
		switch {
		case p == "":
		case strings.HasPrefix(p, "!"):
			del[strings.TrimSpace(p[1:])] = true
		case strings.HasPrefix(p, "role:"):
			role := strings.TrimSpace(p[len("role:"):])
			if role == RoleAdmin {
				all = true
				continue
			}
			if m == nil {
				continue
			}
			for _, rp := range m.rolePerms[role] {
				add[rp] = true
			}
		default:
			add[p] = true
		}
	}
	for p := range del {
		delete(add, p)
	}
	return all, setList(add), setList(del), nil
}

// KeyAuth returns the authorisation context of an API key by keyname, without
// checking its secret or client address: the key must exist, be enabled and not be
// past its expires date. The user is set when the key names an enabled user.
func (db *DB) KeyAuth(ctx context.Context, keyname string) (*model.Auth, *Instance, error) {
	in, err := db.Instance(ctx, "_apikey", keyname)
	if err != nil {
		return nil, nil, err
	}
	if !in.IsEnabled {
		return nil, in, model.Errorf(model.EUnauthorized, "API key disabled")
	}
	if exp, _ := in.Data["expires"].(string); exp != "" && db.Now().UTC().Format("2006-01-02") > exp {
		return nil, in, model.Errorf(model.EUnauthorized, "API key expired")
	}
	a := &model.Auth{Kind: model.AuthAPIKey, Name: keyname, KeyID: in.ID}
	a.All, a.Perms, a.Deny, err = db.KeyPermissions(ctx, stringList(in.Data["permissions"]))
	if err != nil {
		return nil, in, err
	}
	a.ReadOnly, _ = in.Data["is_readonly"].(bool)
	if login, _ := in.Data["user"].(string); login != "" {
		if u, err := db.Instance(ctx, "_user", login); err == nil && u.IsEnabled {
			a.User, a.UserID = login, u.ID
		}
	}
	return a, in, nil
}

// Refresh re-reads a stored authorisation context (a task's submitter) so a task
// acts with the rights its submitter holds now: a disabled user or key fails.
func (db *DB) Refresh(ctx context.Context, a *model.Auth) (*model.Auth, error) {
	switch a.Kind {
	case model.AuthUser:
		u, err := db.Instance(ctx, "_user", a.Name)
		// A user deleted and created again with the login is another user (ids are
		// never reused); contexts stored without the id can only follow the login.
		if err != nil || (a.UserID != 0 && u.ID != a.UserID) {
			return nil, model.Errorf(model.EForbidden, "user %s no longer exists", a.Name)
		}
		if !u.IsEnabled {
			return nil, model.Errorf(model.EForbidden, "user %s is disabled", a.Name)
		}
		return db.UserAuth(ctx, a.Name)
	case model.AuthAPIKey:
		// The key itself (by id, through a rename), not whichever key holds its name
		// now: a key revoked and created again is another key. Contexts stored before
		// the id was recorded can only follow the name.
		name := a.Name
		if a.KeyID != 0 {
			in, err := db.InstanceByID(ctx, "_apikey", a.KeyID)
			if err != nil {
				return nil, model.Errorf(model.EForbidden, "API key %s is no longer valid", a.Name)
			}
			name = in.Keyname
		}
		k, _, err := db.KeyAuth(ctx, name)
		if err != nil || (a.KeyID != 0 && k.KeyID != a.KeyID) {
			return nil, model.Errorf(model.EForbidden, "API key %s is no longer valid", a.Name)
		}
		return k, nil
	}
	return a, nil
}

// TouchAPIKey sets an API key's last_used without a revision (it is not an edit).
func (db *DB) TouchAPIKey(ctx context.Context, id int64, t time.Time) error {
	return db.WithTx(ctx, func(tx *Tx) error {
		_, err := tx.execContext(ctx, `UPDATE instances SET data = `+tx.db.dia.jsonSet("data", "'$.last_used'", "?")+`
			WHERE id = ? AND classname = '_apikey'`, t.UTC().Format("2006-01-02T15:04:05"), id)
		tx.listForSearch(id)
		return err
	})
}
