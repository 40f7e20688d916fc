package model

import (
	"sort"
)

// Permissions the access checks name.
const (
	PermDataAdmin     = "p_data_admin"
	PermDataRead      = "p_data_read"
	PermKeynameRename = "p_keyname_rename"
)

// classPermissions is the permission a write to a built-in class needs. Built-in
// classes are not data: p_data_admin and p_data_create/update/delete never reach
// them. Every other class is governed by its schema's p_* fields and the p_data_*
// permissions. docs/permissions.md shows this table; a test checks they agree.
var classPermissions = map[string]string{
	"_schema":     "p_schema_import",
	"_permission": "p_permission_import",
	"_user":       "p_user_import",
	"_group":      "p_user_import",
	"_role":       "p_user_import",
	"_home":       "p_home_import",
	"_apikey":     "p_apikey_admin",
	"_pipeline":   "p_pipeline_admin",
	"_schedule":   "p_pipeline_admin",
	"_eventrule":  "p_event_admin",
	"_dataview":   "p_schema_import",
	"_enumerate":  "p_schema_import",
}

// ownReadClasses are the built-in classes whose reads need their write permission
// too: API keys and event rules (a webhook's URL and its signing secret).
var ownReadClasses = map[string]bool{"_apikey": true, "_eventrule": true}

// ClassPermissions returns a copy of the table of built-in classes and the permission
// a write to each needs.
func ClassPermissions() map[string]string {
	out := make(map[string]string, len(classPermissions))
	for k, v := range classPermissions {
		out[k] = v
	}
	return out
}

// classPermission is the permission a load needs for a built-in class, or "".
func ClassPermission(cls string) string { return classPermissions[cls] }

// dataPermission is the permission a write of kind op (ActionCreate, ActionUpdate, ActionDelete)
// to an instance of s needs.
func dataPermission(s *Schema, op Action) string {
	var own string
	switch op {
	case ActionCreate:
		own = s.PCreate
	case ActionUpdate:
		own = s.PUpdate
	case ActionDelete:
		own = s.PDelete
	}
	if own != "" {
		return own
	}
	return "p_data_" + string(op)
}

// CanWrite reports whether auth may make a write of kind op to instances of s.
func CanWrite(auth *Auth, s *Schema, op Action) bool {
	if auth == nil {
		return true
	}
	if p := ClassPermission(s.Keyname); p != "" {
		return auth.Has(p)
	}
	if auth.Has(PermDataAdmin) || (s.PAdmin != "" && auth.Has(s.PAdmin)) {
		return true
	}
	return auth.Has(dataPermission(s, op))
}

// CanRead reports whether auth may read instances of s: the schema's p_read, else
// p_data_read (p_data_admin and the schema's p_admin also grant it).
func CanRead(auth *Auth, s *Schema) bool {
	if auth == nil {
		return true
	}
	if ownReadClasses[s.Keyname] {
		// Keys and event rules hold credentials, not data: p_data_admin does not reach them.
		return auth.Has(classPermissions[s.Keyname])
	}
	if auth.Has(PermDataAdmin) || (s.PAdmin != "" && auth.Has(s.PAdmin)) {
		return true
	}
	if s.PRead != "" {
		return auth.Has(s.PRead)
	}
	return auth.Has(PermDataRead)
}

// CanRename reports whether auth may change keynames (a cascading rename).
func CanRename(auth *Auth) bool { return auth == nil || auth.Has(PermKeynameRename) }

// WritePermission names the permission a write of kind op to instances of s needs:
// the built-in class's, else the schema's own for op or p_data_<op> (p_data_admin and
// the schema's p_admin would do too; the message names the one for the operation).
func WritePermission(s *Schema, op Action) string {
	if p := ClassPermission(s.Keyname); p != "" {
		return p
	}
	return dataPermission(s, op)
}

// ReadPermission names the permission reading instances of s needs (as CanRead).
func ReadPermission(s *Schema) string {
	if ownReadClasses[s.Keyname] {
		return classPermissions[s.Keyname]
	}
	if s.PRead != "" {
		return s.PRead
	}
	return PermDataRead
}

// AuthorizeWrite is the one permission decision of the apply path: nil when auth may
// make a write of kind op to instances of s, else the forbidden error.
func AuthorizeWrite(auth *Auth, s *Schema, op Action) error {
	if !CanWrite(auth, s, op) {
		return Errorf(EForbidden, "permission denied: %s of %s needs %s", op, s.Keyname, WritePermission(s, op))
	}
	return nil
}

// grantClasses are the classes whose instances confer permissions on someone.
var grantClasses = map[string]bool{"_user": true, "_group": true, "_role": true, "_apikey": true}

// Granted is a set of permissions an object confers: all, or the listed ones.
type Granted struct {
	All   bool
	Perms map[string]bool
}

// Beyond lists the permissions g confers that auth does not hold ("every permission"
// when g is all and auth is not).
func (g Granted) Beyond(auth *Auth) []string {
	if g.All {
		if auth.HasAll() {
			return nil
		}
		return []string{"every permission"}
	}
	var out []string
	for p := range g.Perms {
		if !auth.Has(p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// IsGrantClass reports whether instances of cls confer permissions on someone.
func IsGrantClass(cls string) bool { return grantClasses[cls] }
