package store_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
)

// The store lists the instances it updates for the search index itself (layout 20: no
// trigger does), once per transaction, staged entries made stale: an update through
// the apply path, an API key's last use, a statement run as written in a migration,
// each listed with its transaction's commit and not before; a rolled-back update lists
// nothing; an UPDATE outside the store lists nothing unless it lists its rows itself
// (docs/operations.md), while its INSERT and DELETE are listed by the triggers.
func TestStoreListsItsUpdates(t *testing.T) {
	testkit.SQLiteOnly(t, "the list of rows to index is SQLite's; PostgreSQL's engine maintains pg_trgm")
	t.Parallel()
	ctx := context.Background()
	db := newTestDB(t)
	mustLoad(t, db, `
- {classname: _schema, keyname: note, text: {dataformat: string}}
- {classname: note, keyname: n1, text: alpha}
- {classname: note, keyname: n2, text: beta}
- {classname: _apikey, keyname: k1, secret: "x", permissions: []}
`, store.LoadOptions{System: true})
	if _, err := db.CatchUpSearch(ctx); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name = 'instances_search_update'"); n != 0 {
		t.Fatalf("layout 20 keeps the update trigger (%d)", n)
	}
	listed := func() []int64 {
		t.Helper()
		rows, err := db.Reader().QueryContext(ctx, "SELECT id FROM instances_search_dirty ORDER BY id")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		return ids
	}
	id := func(cls, key string) int64 {
		return int64(queryInt(t, db, "SELECT id FROM instances WHERE classname = ? AND keyname = ?", cls, key))
	}
	expect := func(round string, want ...int64) {
		t.Helper()
		got := listed()
		if len(got) != len(want) {
			t.Fatalf("%s: listed %v, want %v", round, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: listed %v, want %v", round, got, want)
			}
		}
		testkit.CheckSearchIndex(t, db.Path(), round)
	}
	note, err := db.Schema(ctx, "note")
	if err != nil {
		t.Fatal(err)
	}
	n1 := id("note", "n1")
	update := func(tx *store.Tx, text string) {
		t.Helper()
		old, err := tx.Instance(ctx, "note", "n1")
		if err != nil {
			t.Fatal(err)
		}
		next := *old
		next.Data = map[string]any{"text": text}
		if _, err := tx.Apply(ctx, store.Write{Schema: note, Old: old, New: &next, Action: model.ActionUpdate}, store.ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Rolled back: nothing listed.
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	update(tx, "rolled-back")
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	expect("rolled back")

	// Two updates of one row in a transaction: listed once, at its commit.
	tx, err = db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	update(tx, "gamma")
	update(tx, "delta")
	if got := listed(); len(got) != 0 {
		t.Fatalf("listed before the commit: %v", got)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	expect("updated twice", n1)
	if ids, _ := listIDs(t, db, note, store.ListQuery{Search: "delta", Limit: 10}); len(ids) != 1 || ids[0] != n1 {
		t.Fatalf("search of the update finds %v", ids)
	}

	// Staged, then written again: its entry stale (staged 2), found by its new text only.
	if _, err := db.StageSearch(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err = db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	update(tx, "epsilon")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, db, "SELECT staged FROM instances_search_dirty WHERE id = ?", n1); n != 2 {
		t.Fatalf("a staged row written again has staged %d, want 2", n)
	}
	expect("staged, then updated", n1)
	if ids, _ := listIDs(t, db, note, store.ListQuery{Search: "delta", Limit: 10}); len(ids) != 0 {
		t.Fatalf("the stale staged entry is found: %v", ids)
	}
	if _, err := db.CatchUpSearch(ctx); err != nil {
		t.Fatal(err)
	}

	// An API key's last use.
	k1 := id("_apikey", "k1")
	if err := db.TouchAPIKey(ctx, k1, time.Now()); err != nil {
		t.Fatal(err)
	}
	expect("last use", k1)
	if _, err := db.CatchUpSearch(ctx); err != nil {
		t.Fatal(err)
	}

	// A statement as written, in a migration; the next transaction on the writer runs
	// no leftover trigger (the store's update lists once, by its own statement).
	testkit.Exec(t, db, "UPDATE instances SET displayname = 'migrated' WHERE classname = 'note' AND keyname = 'n2'")
	n2 := id("note", "n2")
	expect("migration statement", n2)
	if _, err := db.CatchUpSearch(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err = db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	update(tx, "zeta")
	if n := queryIntTx(t, tx, "SELECT count(*) FROM temp.sqlite_master WHERE type = 'trigger'"); n != 0 {
		t.Fatalf("%d temporary triggers left on the writer", n)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	expect("after a migration", n1)
	if _, err := db.CatchUpSearch(ctx); err != nil {
		t.Fatal(err)
	}

	// Outside the store: an UPDATE is not listed (it must list itself), an INSERT and a
	// DELETE are (the triggers).
	raw, err := sql.Open("sqlite", "file:"+db.Path()+"?_pragma=busy_timeout(15000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec("UPDATE instances SET displayname = 'outside' WHERE id = ?", n2); err != nil {
		t.Fatal(err)
	}
	if got := listed(); len(got) != 0 {
		t.Fatalf("an UPDATE outside the store is listed: %v (the documented contract says it lists itself)", got)
	}
	if _, err := raw.Exec(`INSERT INTO instances_search_dirty(id) VALUES(?) ON CONFLICT(id) DO UPDATE SET staged = 2 WHERE staged = 1`, n2); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec("DELETE FROM instances WHERE id = ?", n1); err != nil {
		t.Fatal(err)
	}
	expect("outside the store", n1, n2)
}
