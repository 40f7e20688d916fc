package store_test

import (
	"context"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// TestClassCacheSeesWrites: the cached classes (roles, groups, home entries,
// dataviews) are served from memory while nothing changes them, and a change is seen
// at the next read whoever made it: this handle, another handle on the same database
// (another process or node), or a migration's own SQL.
func TestClassCacheSeesWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db1 := newTestDB(t)
	mustLoad(t, db1, `
- {classname: _user, keyname: u1, password: pass-u1-long}
- {classname: _group, keyname: g1, users: [u1]}
- {classname: _role, keyname: r1, permissions: [p_data_access, p_data_read], subgroups: [g1]}
`, store.LoadOptions{})
	can := func(perm string) bool {
		t.Helper()
		a, err := db1.UserAuth(ctx, "u1")
		if err != nil {
			t.Fatal(err)
		}
		return a.Has(perm)
	}
	if !can("p_data_read") {
		t.Fatal("u1 lacks the permission its group's role grants")
	}
	first, err := db1.ClassInstances(ctx, "_role")
	if err != nil || len(first) == 0 {
		t.Fatalf("roles: %v %d", err, len(first))
	}
	if again, _ := db1.ClassInstances(ctx, "_role"); &again[0] != &first[0] {
		t.Fatal("unchanged roles are not served from memory")
	}

	// This handle's write.
	mustLoad(t, db1, "- {classname: _role, keyname: r1, permissions: [p_data_access, p_data_read, p_data_export]}", store.LoadOptions{})
	if !can("p_data_export") {
		t.Fatal("a permission granted through this handle is not seen")
	}

	// Another handle's write: the group loses its member.
	db2, err := store.Open(ctx, db1.Path(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	mustLoad(t, db2, "- {classname: _group, keyname: g1, users: []}", store.LoadOptions{})
	if can("p_data_read") {
		t.Fatal("a membership another handle removed still grants its role's permissions")
	}

	// A migration's own SQL.
	mustLoad(t, db1, "- {classname: _group, keyname: g1, users: [u1]}", store.LoadOptions{})
	if !can("p_data_read") {
		t.Fatal("the member added back is not seen")
	}
	if err := testkit.Migrator(t, db1).Migrate(ctx, func(m *store.Migration) error {
		return m.Exec(ctx, "UPDATE instances SET is_enabled = 0 WHERE classname = '_role' AND keyname = 'r1'")
	}); err != nil {
		t.Fatal(err)
	}
	if can("p_data_read") {
		t.Fatal("a role a migration disabled still grants its permissions")
	}

	// Home entries: another handle disables one.
	homes, err := db1.ClassInstances(ctx, "_home")
	if err != nil || len(homes) == 0 {
		t.Fatalf("home entries: %v %d", err, len(homes))
	}
	key := homes[0].Keyname
	mustLoad(t, db2, "- {classname: _home, keyname: "+key+", is_enabled: false}", store.LoadOptions{})
	homes, _ = db1.ClassInstances(ctx, "_home")
	for _, h := range homes {
		if h.Keyname == key && h.IsEnabled {
			t.Fatalf("home entry %s disabled by another handle is still enabled here", key)
		}
	}
}
