package model_test

import (
	"slices"
	"testing"

	"dataservice/store/model"
)

// The access rules are pure functions of an Auth and a schema: no database.
func TestCanWriteAndCanRead(t *testing.T) {
	user := func(perms ...string) *model.Auth { return &model.Auth{Kind: model.AuthUser, Name: "u", Perms: perms} }
	data := &model.Schema{Keyname: "server"}
	own := &model.Schema{Keyname: "secretive", PCreate: "p_own_create", PRead: "p_own_read", PAdmin: "p_own_admin"}
	builtin := &model.Schema{Keyname: "_schema"}
	keys := &model.Schema{Keyname: "_apikey"}
	cases := []struct {
		name  string
		auth  *model.Auth
		s     *model.Schema
		op    model.Action
		write bool
		read  bool
	}{
		{"no auth acts with every permission", nil, builtin, model.ActionDelete, true, true},
		{"p_data_create writes a data class", user("p_data_create"), data, model.ActionCreate, true, false},
		{"p_data_create does not update", user("p_data_create"), data, model.ActionUpdate, false, false},
		{"p_data_admin writes and reads data", user("p_data_admin"), data, model.ActionDelete, true, true},
		{"a schema's own permission replaces p_data_*", user("p_data_create", "p_data_read"), own, model.ActionCreate, false, false},
		{"the schema's own permissions grant it", user("p_own_create", "p_own_read"), own, model.ActionCreate, true, true},
		{"the schema's p_admin grants all of it", user("p_own_admin"), own, model.ActionDelete, true, true},
		{"p_data_admin does not reach a built-in class", user("p_data_admin"), builtin, model.ActionCreate, false, true},
		{"a built-in class needs its table permission", user("p_schema_import"), builtin, model.ActionUpdate, true, false},
		{"p_data_admin does not read keys", user("p_data_admin"), keys, model.ActionCreate, false, false},
		{"a denied permission is not held", &model.Auth{Kind: model.AuthUser, All: true, Deny: []string{"p_data_admin", "p_data_delete"}}, data, model.ActionDelete, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := model.CanWrite(c.auth, c.s, c.op); got != c.write {
				t.Errorf("CanWrite = %v, want %v", got, c.write)
			}
			if got := model.CanRead(c.auth, c.s); got != c.read {
				t.Errorf("CanRead = %v, want %v", got, c.read)
			}
		})
	}
	if err := model.AuthorizeWrite(user(), data, model.ActionUpdate); !model.HasCode(err, model.EForbidden) {
		t.Fatalf("AuthorizeWrite without permission: err = %v, want forbidden", err)
	}
	if got, want := model.ClassPermission("_user"), "p_user_import"; got != want {
		t.Fatalf("ClassPermission(_user) = %q, want %q", got, want)
	}
}

// Grant containment: what an object confers beyond what the writer holds.
func TestGrantedBeyond(t *testing.T) {
	auth := &model.Auth{Kind: model.AuthUser, Perms: []string{"p_a"}}
	g := model.Granted{Perms: map[string]bool{"p_a": true, "p_c": true, "p_b": true}}
	if got, want := g.Beyond(auth), []string{"p_b", "p_c"}; !slices.Equal(got, want) {
		t.Fatalf("Beyond = %v, want %v", got, want)
	}
	if got := (model.Granted{All: true}).Beyond(auth); !slices.Equal(got, []string{"every permission"}) {
		t.Fatalf("Beyond of all = %v, want [every permission]", got)
	}
	if got := (model.Granted{All: true}).Beyond(model.SystemAuth()); got != nil {
		t.Fatalf("Beyond of all for the system = %v, want none", got)
	}
	if !model.IsGrantClass("_role") || model.IsGrantClass("server") {
		t.Fatalf("IsGrantClass: _role must confer permissions, server must not")
	}
}

// Clone is a copy to edit: changing it leaves the original as it was.
func TestSchemaClone(t *testing.T) {
	s := &model.Schema{Keyname: "server", Options: map[string]any{"icon": "x"}}
	s.AddField(&model.Field{Keyname: "port", Dataformat: "int", Options: map[string]any{}})
	c := s.Clone()
	c.Options["icon"] = "y"
	c.Field("port").Dataformat = "string"
	c.AddField(&model.Field{Keyname: "name"})
	if s.Options["icon"] != "x" || s.Field("port").Dataformat != "int" || s.Field("name") != nil || len(s.Fields) != 1 {
		t.Fatalf("editing the clone changed the original: %+v", s)
	}
	if c.Field("name") == nil || len(c.Fields) != 2 {
		t.Fatalf("clone lost its new field: %+v", c)
	}
}
