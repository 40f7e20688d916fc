package store

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"dataservice/store/model"
)

// Revision is one recorded change of an object; Before and After are the object as
// JSON (secrets masked), empty for a create's before and a delete's after.
type Revision struct {
	ID        int64
	Classname string
	Keyname   string
	Action    string
	Before    string
	After     string
	Author    string
	CreatedAt string
	// Delta: Before and After hold only the parts the change changed (an instance
	// update); else each is the whole object, or "" for none (revision_delta.go).
	Delta bool
}

// Revisions returns the newest limit revisions of an object, newest first.
func (db *DB) Revisions(ctx context.Context, cls, key string, limit int) ([]Revision, error) {
	rows, err := prepared{db}.queryContext(ctx, `SELECT id, action, COALESCE(before, ''), COALESCE(after, ''), author, created_at, delta
		FROM revisions WHERE classname = ? AND keyname = ? ORDER BY id DESC LIMIT ?`, cls, key, limit)
	if err != nil {
		return nil, fmt.Errorf("read revisions of %s %s: %w", cls, key, err)
	}
	defer rows.Close()
	var out []Revision
	for rows.Next() {
		var r Revision
		if err := rows.Scan(&r.ID, &r.Action, &r.Before, &r.After, &r.Author, &r.CreatedAt, &r.Delta); err != nil {
			return nil, fmt.Errorf("read revisions of %s %s: %w", cls, key, err)
		}
		r.Classname, r.Keyname = cls, key
		out = append(out, r)
	}
	return out, rows.Err()
}

// Reference is an instance whose `schema` field points at another instance.
type Reference struct {
	Classname, Keyname, Displayname, Field string
}

// ReferencedBy lists up to limit instances whose `schema` fields targeting cls hold key.
func (db *DB) ReferencedBy(ctx context.Context, cls, key string, limit int) ([]Reference, error) {
	fields, err := db.referenceFields(ctx, cls)
	if err != nil {
		return nil, err
	}
	var out []Reference
	for _, cf := range fields {
		if len(out) >= limit {
			break
		}
		// contains is a cheap filter before the exact test on the (scalar or list) value.
		q, err := prepared{db}.queryContext(ctx, `SELECT keyname, displayname FROM instances
			WHERE classname = ? AND `+db.dia.contains("data", "?")+`
			AND `+db.dia.jsonHolds("instances.data", "?", "?")+`
			ORDER BY id LIMIT ?`, cf[0], jsonString(key), "$."+cf[1], key, limit-len(out))
		if err != nil {
			return nil, fmt.Errorf("find references to %s: %w", cls, err)
		}
		for q.Next() {
			r := Reference{Classname: cf[0], Field: cf[1]}
			if err := q.Scan(&r.Keyname, &r.Displayname); err != nil {
				q.Close()
				return nil, fmt.Errorf("find references to %s: %w", cls, err)
			}
			out = append(out, r)
		}
		q.Close()
	}
	return out, nil
}

// ReferenceCount is how many instances of Classname refer to one instance through
// their reference field Field.
type ReferenceCount struct {
	Classname, Field string
	Count            int
}

// ReferenceCounts counts, per class and reference field targeting cls, the instances
// that hold key (every one, unlike ReferencedBy's list); fields nothing refers through
// are left out.
func (db *DB) ReferenceCounts(ctx context.Context, cls, key string) ([]ReferenceCount, error) {
	fields, err := db.referenceFields(ctx, cls)
	if err != nil {
		return nil, err
	}
	var out []ReferenceCount
	for _, cf := range fields {
		rc := ReferenceCount{Classname: cf[0], Field: cf[1]}
		err := prepared{db}.queryRowContext(ctx, `SELECT count(*) FROM instances
			WHERE classname = ? AND `+db.dia.contains("data", "?")+`
			AND `+db.dia.jsonHolds("instances.data", "?", "?"), cf[0], jsonString(key), "$."+cf[1], key).Scan(&rc.Count)
		if err != nil {
			return nil, fmt.Errorf("count references to %s: %w", cls, err)
		}
		if rc.Count > 0 {
			out = append(out, rc)
		}
	}
	return out, nil
}

// referenceFields are the (class, field) pairs whose `schema` fields target cls, in
// class and field order.
func (db *DB) referenceFields(ctx context.Context, cls string) ([][2]string, error) {
	all, err := db.allReferenceFields(ctx)
	if err != nil {
		return nil, fmt.Errorf("find references to %s: %w", cls, err)
	}
	var fields [][2]string
	for _, f := range all {
		if f[2] == cls {
			fields = append(fields, [2]string{f[0], f[1]})
		}
	}
	return fields, nil
}

// allReferenceFields lists every `schema` field as (class, field, target class), in
// class and field order. Every detail page asks, so the list is cached with the
// schemas: at the schema generation, which every change of a field moves.
func (db *DB) allReferenceFields(ctx context.Context) ([][3]string, error) {
	gen, err := db.generation(ctx)
	if err != nil {
		return nil, err
	}
	db.mu.RLock()
	all, local := db.refFields, db.local
	fresh := all != nil && db.refFieldsGen == gen && db.refFieldsLocal == local
	db.mu.RUnlock()
	if fresh {
		return all, nil
	}
	rows, err := prepared{db}.queryContext(ctx, "SELECT classname, keyname, dataformat_ext FROM schema_fields WHERE dataformat = 'schema' ORDER BY classname, sort_order, id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	all = [][3]string{}
	for rows.Next() {
		var c, f, ext string
		if err := rows.Scan(&c, &f, &ext); err != nil {
			return nil, err
		}
		if w := strings.Fields(ext); len(w) > 0 && model.ValidFieldName(f) {
			all = append(all, [3]string{c, f, w[0]})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	db.mu.Lock()
	// Kept only when no local change dropped the schema cache while this read ran.
	if db.local == local {
		db.refFields, db.refFieldsGen, db.refFieldsLocal = all, gen, local
	}
	db.mu.Unlock()
	return all, nil
}

// PermissionOrigin says where one of a user's permissions comes from.
type PermissionOrigin struct {
	Permission string
	Role       string
	// Via is the group through which the user is in the role; empty for a direct member.
	Via string
}

// PermissionOrigins explains UserAuth: every (permission, role, group) that grants a
// permission to login. all is true when the user holds every permission (the login
// admin, or a member of role_admin); origins then still list what the roles name.
func (db *DB) PermissionOrigins(ctx context.Context, login string) (all bool, origins []PermissionOrigin, err error) {
	m, err := db.readMembership(ctx)
	if err != nil {
		return false, nil, err
	}
	groups := m.groupsOf(login)
	all = login == "admin"
	for _, r := range m.rolesOf(login) {
		var vias []string
		for _, u := range m.roleUsers[r] {
			if u == login {
				vias = append(vias, "")
				break
			}
		}
		for _, g := range m.roleSubs[r] {
			if groups[g] {
				vias = append(vias, g)
			}
		}
		if r == RoleAdmin {
			all = true
		}
		for _, p := range m.rolePerms[r] {
			for _, v := range vias {
				origins = append(origins, PermissionOrigin{Permission: p, Role: r, Via: v})
			}
		}
	}
	sort.Slice(origins, func(i, j int) bool {
		a, b := origins[i], origins[j]
		if a.Permission != b.Permission {
			return a.Permission < b.Permission
		}
		if a.Role != b.Role {
			return a.Role < b.Role
		}
		return a.Via < b.Via
	})
	return all, origins, nil
}
