package store_test

import (
	"context"
	"strings"
	"testing"

	"dataservice/store"
	"dataservice/store/model"
)

// membershipDoc: alice is listed by a role directly; bob reaches a role through the
// group chain g_leaf → g_mid → g_top; carol only through a disabled role; dave is a
// direct member of role_admin, erin reaches it through a group; frank is in a
// disabled group.
const membershipDoc = `
- {classname: _user, keyname: alice}
- {classname: _user, keyname: bob}
- {classname: _user, keyname: carol}
- {classname: _user, keyname: dave}
- {classname: _user, keyname: erin}
- {classname: _user, keyname: frank}
- {classname: _user, keyname: nobody}
- {classname: _group, keyname: g_leaf, users: [bob]}
- {classname: _group, keyname: g_mid, subgroups: [g_leaf]}
- {classname: _group, keyname: g_top, subgroups: g_mid}
- {classname: _group, keyname: admins, users: [erin]}
- {classname: _group, keyname: g_off, users: [frank], is_enabled: false}
- {classname: _role, keyname: r_direct, users: [alice], permissions: [p_a]}
- {classname: _role, keyname: r_chain, subgroups: [g_top], permissions: "p_b, p_c"}
- {classname: _role, keyname: r_off, users: [carol, alice], permissions: [p_off], is_enabled: false}
- {classname: _role, keyname: r_frank, subgroups: [g_off], permissions: [p_f]}
- {classname: _role, keyname: role_admin, users: [admin, dave], subgroups: [admins]}
`

func TestUserAuth(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, membershipDoc, store.LoadOptions{})
	ctx := context.Background()
	tests := []struct {
		login string
		all   bool
		perms string
	}{
		{"alice", false, "p_a"},
		{"bob", false, "p_b,p_c"},
		{"carol", false, ""},
		{"frank", false, ""},
		{"nobody", false, ""},
		{"dave", true, ""},
		{"erin", true, ""},
		{"admin", true, ""},
	}
	for _, tt := range tests {
		name := tt.login + " holds " + tt.perms
		switch {
		case tt.all:
			name = tt.login + " holds every permission"
		case tt.perms == "":
			name = tt.login + " holds nothing"
		}
		t.Run(name, func(t *testing.T) {
			a, err := db.UserAuth(ctx, tt.login)
			if err != nil {
				t.Fatalf("UserAuth: %v", err)
			}
			if got, want := a.All, tt.all; got != want {
				t.Fatalf("all: got %v, want %v", got, want)
			}
			if got, want := strings.Join(a.Perms, ","), tt.perms; got != want {
				t.Fatalf("perms: got %q, want %q", got, want)
			}
			if got, want := a.Author(), "user:"+tt.login; got != want {
				t.Fatalf("author: got %q, want %q", got, want)
			}
			if got, want := a.User, tt.login; got != want {
				t.Fatalf("user: got %q, want %q", got, want)
			}
			if got, want := a.UserID, instance(t, db, "_user", tt.login).ID; got != want {
				t.Fatalf("user id: got %d, want %d", got, want)
			}
			if got, want := a.Has("p_anything"), tt.all; got != want {
				t.Fatalf("Has(p_anything): got %v, want %v", got, want)
			}
			for _, p := range strings.Split(tt.perms, ",") {
				if p != "" && !a.Has(p) {
					t.Fatalf("Has(%s): got false, want true", p)
				}
			}
		})
	}
	t.Run("unknown login is not found", func(t *testing.T) {
		_, err := db.UserAuth(ctx, "ghost")
		if got, want := store.ErrorCode(err), model.ENotFound; got != want {
			t.Fatalf("error code: got %q (%v), want %q", got, want, err)
		}
	})
	t.Run("a role change applies to the next resolution", func(t *testing.T) {
		mustLoad(t, db, `{classname: _role, keyname: r_chain, permissions: [p_z]}`, store.LoadOptions{})
		a, err := db.UserAuth(ctx, "bob")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Join(a.Perms, ","), "p_z"; got != want {
			t.Fatalf("perms: got %q, want %q", got, want)
		}
	})
	t.Run("a cycle of subgroups terminates", func(t *testing.T) {
		mustLoad(t, db, `
- {classname: _group, keyname: c1, users: [alice], subgroups: [c2]}
- {classname: _group, keyname: c2, subgroups: [c1]}
- {classname: _role, keyname: r_cycle, subgroups: [c2], permissions: [p_cycle]}
`, store.LoadOptions{})
		a, err := db.UserAuth(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Join(a.Perms, ","), "p_a,p_cycle"; got != want {
			t.Fatalf("perms: got %q, want %q", got, want)
		}
	})
}

func TestKeyPermissions(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, membershipDoc, store.LoadOptions{})
	tests := []struct {
		name        string
		list        []string
		all         bool
		perms, deny string
	}{
		{"plain names are granted", []string{"p_x", "p_a"}, false, "p_a,p_x", ""},
		{"blank entries are ignored and names trimmed", []string{" p_x ", "", "  "}, false, "p_x", ""},
		{"!name removes a plain name", []string{"p_x", "!p_x", "p_y"}, false, "p_y", "p_x"},
		{"!name removes whatever its position", []string{"! p_x", "p_x"}, false, "", "p_x"},
		{"role:NAME adds the role's permissions", []string{"role:r_chain", "p_x"}, false, "p_b,p_c,p_x", ""},
		{"!name removes a role's permission", []string{"role:r_chain", "!p_b"}, false, "p_c", "p_b"},
		{"role:role_admin grants every permission", []string{"role:role_admin"}, true, "", ""},
		{"role:role_admin with !name keeps the denial", []string{"role:role_admin", "!p_conf_admin"}, true, "", "p_conf_admin"},
		{"unknown role adds nothing", []string{"role:ghost"}, false, "", ""},
		{"disabled role adds nothing", []string{"role:r_off"}, false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			all, perms, deny, err := db.KeyPermissions(context.Background(), tt.list)
			if err != nil {
				t.Fatalf("KeyPermissions: %v", err)
			}
			if got, want := all, tt.all; got != want {
				t.Fatalf("all: got %v, want %v", got, want)
			}
			if got, want := strings.Join(perms, ","), tt.perms; got != want {
				t.Fatalf("perms: got %q, want %q", got, want)
			}
			if got, want := strings.Join(deny, ","), tt.deny; got != want {
				t.Fatalf("deny: got %q, want %q", got, want)
			}
			a := &model.Auth{Kind: "apikey", Name: "k", All: all, Perms: perms, Deny: deny}
			for _, p := range deny {
				if a.Has(p) {
					t.Fatalf("Has(%s) on a denied permission: got true, want false", p)
				}
			}
			if got, want := a.HasAll(), tt.all && tt.deny == ""; got != want {
				t.Fatalf("HasAll: got %v, want %v", got, want)
			}
		})
	}
}

func TestAuthBasics(t *testing.T) {
	t.Parallel()
	var none *model.Auth
	if none.Has("p_data_access") || none.HasAll() {
		t.Fatal("nil Auth holds a permission")
	}
	if got, want := none.Author(), "system"; got != want {
		t.Fatalf("nil author: got %q, want %q", got, want)
	}
	sys := model.SystemAuth()
	if !sys.Has("p_anything") || !sys.HasAll() {
		t.Fatal("SystemAuth lacks a permission")
	}
	if got, want := sys.Author(), "system"; got != want {
		t.Fatalf("system author: got %q, want %q", got, want)
	}
	key := &model.Auth{Kind: "apikey", Name: "k1", Perms: []string{"p_a"}}
	if got, want := key.Author(), "apikey:k1"; got != want {
		t.Fatalf("key author: got %q, want %q", got, want)
	}
	if !key.Has("p_a") || key.Has("p_b") || key.HasAll() {
		t.Fatalf("key permissions: Has(p_a)=%v Has(p_b)=%v HasAll=%v", key.Has("p_a"), key.Has("p_b"), key.HasAll())
	}
}
