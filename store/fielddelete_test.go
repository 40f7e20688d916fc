package store_test

import (
	"context"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
)

// Deleting a field definition removes its values from every instance of the class in
// the same transaction: a search no longer finds them, and a field defined again under
// the same name starts empty instead of reading the old values back.
func TestDeletedFieldValuesAreRemoved(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, serverSchema, store.LoadOptions{})
	mustLoad(t, db, `
- {classname: server, keyname: s1, hostname: h1, tags: [zebra-tag, other]}
- {classname: server, keyname: s2, hostname: h2}
- {classname: site, keyname: paris, city: zebra-tag}
`, store.LoadOptions{})
	sch := schema(t, db, "server")
	if _, n, err := db.SearchInstances(context.Background(), sch, "zebra-tag", 0, 10); err != nil || n != 1 {
		t.Fatalf("search before the delete: %d matches, %v; want 1", n, err)
	}
	mustLoad(t, db, `{classname: _schema, keyname: server, tags: {_action: delete}}`, store.LoadOptions{})

	if got, want := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'server' AND data -> 'tags' IS NOT NULL"), 0; got != want {
		t.Fatalf("server rows still holding tags: got %d, want %d", got, want)
	}
	if got, want := queryString(t, db, "SELECT data ->> 'hostname' FROM instances WHERE classname = 'server' AND keyname = 's1'"), "h1"; got != want {
		t.Fatalf("hostname of s1: got %s, want %s", got, want)
	}
	if got, want := queryString(t, db, "SELECT data ->> 'city' FROM instances WHERE classname = 'site' AND keyname = 'paris'"), "zebra-tag"; got != want {
		t.Fatalf("another class's value: got %s, want %s", got, want)
	}
	sch = schema(t, db, "server")
	if _, n, err := db.SearchInstances(context.Background(), sch, "zebra-tag", 0, 10); err != nil || n != 0 {
		t.Fatalf("search after the delete: %d matches, %v; want 0", n, err)
	}

	mustLoad(t, db, `{classname: _schema, keyname: server, tags: {dataformat: string, cardinal_max: 0}}`, store.LoadOptions{})
	if v, ok := instance(t, db, "server", "s1").Data["tags"]; ok {
		t.Fatalf("field defined again reads the old value back: %s", fmtValue(v))
	}
}

// The direct deletion used by start-up migrations removes the values too, and is
// rolled back with its transaction.
func TestDeleteFieldDirectRemovesValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newTestDB(t)
	mustLoad(t, db, serverSchema, store.LoadOptions{})
	mustLoad(t, db, `{classname: server, keyname: s1, hostname: h1}`, store.LoadOptions{})
	err := testkit.Migrator(t, db).Migrate(context.Background(), func(tx *store.Migration) error {
		if err := tx.DeleteField(ctx, "server", "hostname"); err != nil {
			return err
		}
		return model.Errorf(model.EInvalid, "roll back")
	})
	if err == nil {
		t.Fatal("transaction did not fail")
	}
	if got, want := queryString(t, db, "SELECT data ->> 'hostname' FROM instances WHERE keyname = 's1'"), "h1"; got != want {
		t.Fatalf("hostname after a rolled-back delete: got %s, want %s", got, want)
	}
	if err := testkit.Migrator(t, db).Migrate(context.Background(), func(tx *store.Migration) error { return tx.DeleteField(ctx, "server", "hostname") }); err != nil {
		t.Fatalf("delete field: %v", err)
	}
	if got, want := queryString(t, db, "SELECT data ->> 'hostname' FROM instances WHERE keyname = 's1'"), "<null>"; got != want {
		t.Fatalf("hostname after the delete: got %s, want %s", got, want)
	}
}
