package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// TestPrefetch: an instance a request will read is read with the request's first
// instance read (its credentials) and then answered from there, as a read at the
// request's start: a change by another process in between is not seen (as with a
// request that arrived a moment earlier), a write committed by this process in
// between is, and the row answers once.
func TestPrefetch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newTestDB(t)
	mustLoad(t, db, `
- {classname: _schema, keyname: item, note: {dataformat: string}}
- {classname: item, keyname: a, note: one}
- {classname: _user, keyname: reader}
`, store.LoadOptions{})
	driver := "sqlite"
	if db.Engine() == "postgres" {
		driver = "pgx"
	}
	other, err := sql.Open(driver, db.Path()) // another process's connection
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	exec := func(query string, args ...any) {
		t.Helper()
		if _, err := other.Exec(query, args...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
	set := func(note string) {
		t.Helper()
		data, err := json.Marshal(map[string]string{"note": note})
		if err != nil {
			t.Fatal(err)
		}
		// $1 is a parameter on both engines (SQLite reads it as a named one).
		exec("UPDATE instances SET data = $1 WHERE classname = 'item' AND keyname = 'a'", string(data))
	}
	note := func(ctx context.Context, key string) string {
		t.Helper()
		in, err := db.Instance(ctx, "item", key)
		if err != nil {
			return store.ErrorMessage(err)
		}
		return in.Data["note"].(string)
	}
	start := func(key string) context.Context {
		t.Helper()
		ctx := db.RequestScope(ctx)
		db.Prefetch(ctx, "item", key)
		if _, err := db.Instance(ctx, "_user", "reader"); err != nil { // the credentials' read
			t.Fatal(err)
		}
		return ctx
	}

	t.Run("answered as at the request's start, once", func(t *testing.T) {
		set("one")
		req := start("a")
		set("two")
		if got, want := note(req, "a"), "one"; got != want {
			t.Fatalf("prefetched read: got %q, want %q (the row as the request started)", got, want)
		}
		if got, want := note(req, "a"), "two"; got != want {
			t.Fatalf("second read: got %q, want %q (read again)", got, want)
		}
	})
	t.Run("read again after a commit of this process", func(t *testing.T) {
		set("one")
		req := start("a")
		set("two")
		mustLoad(t, db, `{classname: item, keyname: b, note: other}`, store.LoadOptions{})
		if got, want := note(req, "a"), "two"; got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
	t.Run("a missing instance is not found", func(t *testing.T) {
		req := start("c")
		exec(`INSERT INTO instances(id, classname, keyname, displayname, is_enabled, data, created_at, updated_at)
			VALUES(` + testkit.NextInstanceIDSQL + `, 'item', 'c', '', 1, '{}', '', '')`)
		if got, want := note(req, "c"), `item "c" not found`; got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
	t.Run("read with a console session", func(t *testing.T) {
		user, err := db.Instance(ctx, "_user", "reader")
		if err != nil {
			t.Fatal(err)
		}
		token, _, err := db.CreateSession(ctx, user.ID, "reader", "", db.ConsoleSessionLimits(ctx))
		if err != nil {
			t.Fatal(err)
		}
		set("one")
		req := db.RequestScope(ctx)
		db.Prefetch(req, "item", "a")
		if _, u, err := db.SessionUser(req, token); err != nil || u == nil || u.Keyname != "reader" {
			t.Fatalf("session: %v %v", u, err)
		}
		set("two")
		if got, want := note(req, "a"), "one"; got != want {
			t.Fatalf("got %q, want %q (read with the session)", got, want)
		}
		// A name no instance has, PostgreSQL refuses as a parameter, is not read ahead:
		// the session still reads.
		for _, key := range []string{"a\x00b", "\xff\xfe"} {
			req := db.RequestScope(ctx)
			db.Prefetch(req, "item", key)
			if _, _, err := db.SessionUser(req, token); err != nil {
				t.Fatalf("session with %q wanted: %v", key, err)
			}
			if _, err := db.Instance(req, "item", key); !store.IsNotFound(err) {
				t.Fatalf("item %q: %v, want not found", key, err)
			}
		}
	})
	t.Run("other reads in between leave it", func(t *testing.T) {
		set("one")
		req := start("a")
		set("two")
		if _, err := db.Instance(req, "_user", "reader"); err != nil {
			t.Fatal(err)
		}
		if got, want := note(req, "a"), "one"; got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
}
