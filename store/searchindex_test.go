package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
)

// checkSearchIndex is testkit.CheckSearchIndex on db's file: the index is exact for
// every row not listed for indexing (the catch-up has not run: no write indexes what
// it writes). On PostgreSQL the engine maintains the trigram index in every write
// (there is no list of rows to index nor an index of the store's own to compare): it
// checks that the index exists and is valid; the searches' results are compared with
// a scan by compareSearch.
func checkSearchIndex(t *testing.T, db *store.DB, round string) {
	t.Helper()
	if db.IsFile() {
		testkit.CheckSearchIndex(t, db.Path(), round)
		return
	}
	if n := queryInt(t, db, `SELECT count(*) FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
		WHERE c.relname = 'instances_search' AND x.indisvalid AND x.indisready`); n != 1 {
		t.Fatalf("%s: %d valid indexes instances_search, want 1", round, n)
	}
}

// compareSearch checks n random searches of each class against LIKE while the index
// lags behind the last writes, then brings the index up to date (CatchUpSearch),
// checks it equals a rebuilt one, and checks n more searches.
func compareSearch(t *testing.T, db *store.DB, r *rand.Rand, stored []string, round string, n int) {
	t.Helper()
	compareSearchNow(t, db, r, stored, round+" (index behind)", n)
	if _, err := db.CatchUpSearch(context.Background()); err != nil {
		t.Fatal(err)
	}
	if db.IsFile() {
		testkit.CheckSearchIndexCaughtUp(t, db.Path(), round+" (caught up)")
	}
	compareSearchNow(t, db, r, stored, round+" (caught up)", n)
}

// compareSearchNow checks n random searches of each class against LIKE.
func compareSearchNow(t *testing.T, db *store.DB, r *rand.Rand, stored []string, round string, n int) {
	t.Helper()
	ctx := context.Background()
	for _, cls := range []string{"note", "vault"} {
		s, err := db.Schema(ctx, cls)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			var search string
			if src := []rune(stored[r.IntN(len(stored))]); i%2 == 0 && len(src) > 0 {
				a := r.IntN(len(src))
				search = string(src[a : a+1+r.IntN(len(src)-a)])
			} else {
				search = randText(r, 1+r.IntN(6))
			}
			want := likeIDs(t, db, cls, search, cls == "note")
			got, res := listIDs(t, db, s, store.ListQuery{Search: search, Limit: 1000, ExactCount: true})
			if !slices.Equal(got, want) || res.Count != len(want) {
				t.Fatalf("%s: %s search %q: got %v (count %d), LIKE gives %v", round, cls, search, got, res.Count, want)
			}
		}
	}
}

// Every way the store writes instances keeps the search index equal to one rebuilt
// from the rows, and searches equal to LIKE: loads (create, merge, update, delete,
// disable), Apply with a cascading rename, a field's deletion, statements run in a
// store transaction, a rolled-back transaction, a dry-run load, and SQL run outside
// the store (searched by reading the listed rows until the catch-up indexes them).
func TestSearchIndexEveryWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newTestDB(t)
	path := store.AddressOf(db)
	mustLoad(t, db, `
- {classname: _schema, keyname: note, text: {dataformat: string}, more: {dataformat: string, cardinal_max: 0}, gone: {dataformat: string}, ref: {dataformat: schema, dataformat_ext: note}}
- {classname: _schema, keyname: vault, text: {dataformat: string}, pw: {dataformat: secret}}
`, store.LoadOptions{System: true})
	r := rand.New(rand.NewPCG(16, 2))
	var stored []string
	entry := func(i int, cls string) map[string]any {
		e := map[string]any{"classname": cls, "keyname": fmt.Sprintf("k%d-%s", i, strings.ReplaceAll(randText(r, 4), " ", "-")),
			"displayname": randText(r, r.IntN(8)), "text": randText(r, r.IntN(12))}
		if cls == "note" {
			e["more"] = []any{randText(r, 5), randText(r, 3)}
			e["gone"] = "Gone-" + randText(r, 4)
		} else if i%40 == 0 {
			e["pw"] = randText(r, 6)
		}
		stored = append(stored, e["keyname"].(string), e["displayname"].(string), e["text"].(string))
		return e
	}
	var docs []map[string]any
	for i := range 240 {
		cls := "note"
		if i%3 == 0 {
			cls = "vault"
		}
		docs = append(docs, entry(i, cls))
	}
	loadJSON := func(v any, opts store.LoadOptions) {
		t.Helper()
		opts.System = true
		body, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		mustLoad(t, db, string(body), opts)
	}
	loadJSON(docs, store.LoadOptions{})
	checkSearchIndex(t, db, "load")
	compareSearch(t, db, r, stored, "load", 60)

	// Merges, updates, deletes and disables by load, in one batch and in small ones.
	var batch []map[string]any
	for i := 1; i < 240; i += 5 {
		e := map[string]any{"classname": docs[i]["classname"], "keyname": docs[i]["keyname"]}
		switch i % 4 {
		case 0:
			e["text"] = randText(r, 9)
			stored = append(stored, e["text"].(string))
		case 1:
			e["_action"], e["displayname"] = "update", randText(r, 7)
			stored = append(stored, e["displayname"].(string))
		case 2:
			e["_action"] = "delete"
		case 3:
			e["_action"] = "disable"
		}
		batch = append(batch, e)
	}
	loadJSON(batch, store.LoadOptions{BatchSize: 7})
	checkSearchIndex(t, db, "load updates")
	compareSearch(t, db, r, stored, "load updates", 60)

	// Apply: creates and cascading renames (the references to a renamed note change).
	note, err := db.Schema(ctx, "note")
	if err != nil {
		t.Fatal(err)
	}
	target := docs[4]["keyname"].(string)
	loadJSON([]map[string]any{{"classname": "note", "keyname": docs[7]["keyname"], "ref": target}}, store.LoadOptions{})
	old, err := db.Instance(ctx, "note", target)
	if err != nil {
		t.Fatal(err)
	}
	renamed := *old
	renamed.Keyname = "renamed-" + strings.Map(func(c rune) rune { // no JSON escapes (searched in data too), no spaces
		if c == '"' || c == '\\' || unicode.IsSpace(c) || unicode.IsControl(c) {
			return 'q'
		}
		return c
	}, randText(r, 5))
	stored = append(stored, renamed.Keyname)
	if _, err := db.Apply(ctx, store.Write{Schema: note, Old: old, New: &renamed, Action: model.ActionUpdate}, store.ApplyOptions{}); err != nil {
		t.Fatalf("rename: %v", err)
	}
	checkSearchIndex(t, db, "rename")
	compareSearch(t, db, r, stored, "rename", 60)
	if ids, _ := listIDs(t, db, note, store.ListQuery{Search: renamed.Keyname[:10], Limit: 10}); len(ids) != 2 {
		t.Fatalf("search of the new name %q finds %v, want the renamed note and the note referencing it", renamed.Keyname, ids)
	}

	// A field's deletion rewrites the data of every instance of the class.
	if err := testkit.Migrator(t, db).Migrate(ctx, func(tx *store.Migration) error { return tx.DeleteField(ctx, "note", "gone") }); err != nil {
		t.Fatal(err)
	}
	checkSearchIndex(t, db, "field delete")
	if ids, _ := listIDs(t, db, note, store.ListQuery{Search: "gone-", Limit: 10}); len(ids) != 0 {
		t.Fatalf("a deleted field's values are still found: %v", ids)
	}
	compareSearch(t, db, r, stored, "field delete", 60)

	// Statements run in a store transaction; a rolled-back one; a dry-run load.
	for i := 0; i < 240; i += 7 {
		data, err := json.Marshal(map[string]any{"text": randText(r, 6)})
		if err != nil {
			t.Fatal(err)
		}
		exec(t, db, "UPDATE instances SET displayname = ?, data = ? WHERE classname = ? AND keyname = ?",
			randText(r, 6), string(data), docs[i]["classname"], docs[i]["keyname"])
	}
	exec(t, db, "DELETE FROM instances WHERE classname IN ('note', 'vault') AND id % 11 = 0")
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.ExecInTx(ctx, tx, "UPDATE instances SET displayname = 'rolled back' WHERE classname = 'note'"); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	loadJSON([]map[string]any{entry(1000, "note"), {"classname": "note", "keyname": docs[2]["keyname"], "_action": "delete"}},
		store.LoadOptions{DryRun: true})
	checkSearchIndex(t, db, "statements")
	compareSearch(t, db, r, stored, "statements", 60)

	// SQL outside the store: the layout's triggers list the rows it inserts and
	// deletes; an UPDATE lists its rows itself, as docs/operations.md says, in the
	// same transaction. Searches check them by reading them until the catch-up indexes
	// them (on PostgreSQL the engine indexes them at once).
	driver, dsn := "sqlite", "file:"+path+"?_pragma=busy_timeout(15000)"
	if testkit.Postgres() {
		driver, dsn = "pgx", path
	}
	raw, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	outside := []string{"UPDATE instances SET displayname = 'outside ' || id WHERE classname = 'note' AND id % 4 = 0",
		"DELETE FROM instances WHERE classname = 'note' AND id % 13 = 0"}
	if !testkit.Postgres() {
		outside = append(outside, `INSERT INTO instances_search_dirty(id) SELECT id FROM instances WHERE classname = 'note' AND id % 4 = 0
			ON CONFLICT(id) DO UPDATE SET staged = 2 WHERE staged = 1`)
	}
	rtx, err := raw.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range outside {
		if _, err := rtx.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := rtx.Commit(); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	stored = append(stored, "outside 1", "side 2")
	compareSearch(t, db, r, stored, "outside the store", 60)
	if ids, _ := listIDs(t, db, note, store.ListQuery{Search: "outside", Limit: 1000}); len(ids) == 0 {
		t.Fatal("rows written outside the store are not found")
	}
	db.Close()
	db = testkit.Open(t, path, testkit.Options{})
	checkSearchIndex(t, db, "reopened")
	compareSearch(t, db, r, stored, "reopened", 60)
}

// A search of three characters or more is answered by the index (an emptied index
// finds nothing), a shorter one by reading rows. On PostgreSQL the engine maintains
// the index and chooses the plan: among enough rows, the plan of a search of a rare
// word reads the trigram index (searchPlanUsesIndex).
func TestSearchUsesIndex(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, `
- {classname: _schema, keyname: note, text: {dataformat: string}}
- {classname: note, keyname: alpha, text: Needle}
- {classname: note, keyname: beta, text: needles}
- {classname: note, keyname: gamma, text: hay}
`, store.LoadOptions{System: true})
	s, err := db.Schema(context.Background(), "note")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"eed", "ne", "NEEDLE"} {
		if ids, _ := listIDs(t, db, s, store.ListQuery{Search: q, Limit: 10}); len(ids) != 2 {
			t.Fatalf("search %q finds %v", q, ids)
		}
	}
	// Sorted and paged by cursor, an indexed search keeps the same matches.
	ids, _ := listIDs(t, db, s, store.ListQuery{Search: "edl", Limit: 10})
	desc, _ := listIDs(t, db, s, store.ListQuery{Search: "edl", Limit: 10, Sort: "-keyname"})
	after, res := listIDs(t, db, s, store.ListQuery{Search: "edl", Limit: 10, After: ids[0]})
	if len(ids) != 2 || !slices.Equal(desc, []int64{ids[1], ids[0]}) || !slices.Equal(after, ids[1:]) || res.Count != 2 {
		t.Fatalf("search %v, sorted by -keyname %v, after %d %v (count %d)", ids, desc, ids[0], after, res.Count)
	}
	if testkit.Postgres() {
		searchPlanUsesIndex(t, db, s)
		return
	}
	// Indexed: the emptied index must then find nothing (no row is listed).
	if _, err := db.CatchUpSearch(context.Background()); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", "file:"+db.Path()+"?_pragma=busy_timeout(15000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec("DELETE FROM instances_search"); err != nil {
		t.Fatal(err)
	}
	if ids, _ := listIDs(t, db, s, store.ListQuery{Search: "eed", Limit: 10}); len(ids) != 0 {
		t.Fatalf("search with an emptied index finds %v: the index is not used", ids)
	}
	if ids, _ := listIDs(t, db, s, store.ListQuery{Search: "ee", Limit: 10}); len(ids) != 2 {
		t.Fatalf("short search finds %v, want the row read", ids)
	}
}

// A file written before the search index (layout 10) gets it built when it is opened.
func TestSearchIndexBuiltForExistingFiles(t *testing.T) {
	testkit.SQLiteOnly(t, "a file from before SQLite's layout step 10 (FTS5); PostgreSQL's layout has its trigram index from its first step")
	t.Parallel()
	db := newTestDB(t)
	path := db.Path()
	mustLoad(t, db, `
- {classname: _schema, keyname: note, text: {dataformat: string}}
- {classname: note, keyname: alpha, displayname: First, text: Needle-é}
- {classname: note, keyname: beta, text: haystack}
`, store.LoadOptions{System: true})
	db.Close()
	sdb, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"DROP TRIGGER instances_search_insert", "DROP TRIGGER instances_search_delete",
		"DROP TRIGGER instances_search_move", "DROP TABLE instances_search_staged", // layouts 10 and 19 (20 dropped the update trigger)
		"DROP TABLE instances_search_dirty", "DROP TABLE instances_search",
		"DROP TABLE nodes", "DROP TABLE node_salt", // layout 11
		"DROP TABLE throttle",                     // layout 12
		"DROP TABLE events",                       // layout 14
		"ALTER TABLE revisions DROP COLUMN delta", // layout 18
		"INSERT INTO instances(id, classname, keyname, data, created_at, updated_at) VALUES(100000, 'note', 'gamma', '{\"text\":\"more needles\"}', '', '')",
		"PRAGMA user_version = 9",
	} {
		if _, err := sdb.Exec(q); err != nil {
			sdb.Close()
			t.Fatalf("%s: %v", q, err)
		}
	}
	sdb.Close()
	db = testkit.Open(t, path, testkit.Options{})
	checkSearchIndex(t, db, "layout 10")
	s, err := db.Schema(context.Background(), "note")
	if err != nil {
		t.Fatal(err)
	}
	if ids, _ := listIDs(t, db, s, store.ListQuery{Search: "NEEDLE", Limit: 10}); len(ids) != 2 {
		t.Fatalf("search finds %v, want alpha and gamma", ids)
	}
}

// searchPlanUsesIndex: on PostgreSQL, among 5,000 more notes (statistics taken, the
// index not vacuumed), the engine's plan for the page of a search of a rare word, as
// ListInstances runs it, reads the trigram index instances_search; and the search
// finds what a scan finds.
func searchPlanUsesIndex(t *testing.T, db *store.DB, s *model.Schema) {
	t.Helper()
	ctx := context.Background()
	exec(t, db, `INSERT INTO instances(id, classname, keyname, data, created_at, updated_at)
		SELECT `+nextInstanceID+` + g, 'note', 'filler' || g, CAST('{"text":"hay ' || g || '"}' AS json), '', '' FROM generate_series(1, 5000) g`)
	// ANALYZE (as autovacuum's analyze soon does) but no VACUUM: the new entries may
	// still wait in the index's pending list, which the layout keeps short
	// (gin_pending_list_limit) so the planner prices the index below a scan anyway.
	raw, err := sql.Open("pgx", store.AddressOf(db))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.ExecContext(ctx, "ANALYZE instances"); err != nil {
		t.Fatal(err)
	}
	var plans []string
	store.SetSearchSeen(db, func(q string, args []any) {
		err := db.WithRead(ctx, func(r store.Reader) error {
			rows, err := r.QueryContext(ctx, "EXPLAIN "+q, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			var plan []string
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					return err
				}
				plan = append(plan, line)
			}
			plans = append(plans, strings.Join(plan, "\n"))
			return rows.Err()
		})
		if err != nil {
			t.Errorf("explain %s: %v", q, err)
		}
	})
	ids, _ := listIDs(t, db, s, store.ListQuery{Search: "NEEDLE", Limit: 10})
	store.SetSearchSeen(db, nil)
	if want := likeIDs(t, db, "note", "NEEDLE", true); len(ids) != 2 || !slices.Equal(ids, want) {
		t.Fatalf("search NEEDLE among 5,000 notes finds %v, the scan %v", ids, want)
	}
	if len(plans) != 1 || !strings.Contains(plans[0], "instances_search") {
		t.Fatalf("the plan of an indexed search does not read instances_search:\n%s", strings.Join(plans, "\n--\n"))
	}
}

// An update lists its row once, and both ids when it changes the id (SQL outside the
// store, as a restore of an old file may run): the index then loses the old id's
// entry and gains the new one's.
func TestSearchListsAnIDChange(t *testing.T) {
	testkit.SQLiteOnly(t, "the list of rows to index is SQLite's; PostgreSQL's engine maintains pg_trgm")
	t.Parallel()
	ctx := context.Background()
	db := newTestDB(t)
	mustLoad(t, db, `
- {classname: _schema, keyname: note, text: {dataformat: string}}
- {classname: note, keyname: n1, text: walrus-one}
- {classname: note, keyname: n2, text: walrus-two}
`, store.LoadOptions{System: true})
	if _, err := db.CatchUpSearch(ctx); err != nil {
		t.Fatal(err)
	}
	id := queryInt(t, db, `SELECT id FROM instances WHERE keyname = 'n1'`)
	testkit.Exec(t, db, `UPDATE instances SET data = '{"text":"walrus-three"}' WHERE id = ?`, id)
	if got := queryInt(t, db, `SELECT count(*) FROM instances_search_dirty`); got != 1 {
		t.Fatalf("an update of one row listed %d rows, want 1", got)
	}
	moved := id + 1000
	testkit.Exec(t, db, `UPDATE instances SET id = ? WHERE id = ?`, moved, id)
	if got := queryInt(t, db, `SELECT count(*) FROM instances_search_dirty WHERE id IN (?, ?)`, id, moved); got != 2 {
		t.Fatalf("an id change listed %d of the old and new ids, want both", got)
	}
	s, err := db.Schema(ctx, "note")
	if err != nil {
		t.Fatal(err)
	}
	for _, lag := range []string{"listed", "caught up"} {
		got, _ := listIDs(t, db, s, store.ListQuery{Search: "walrus-three", Limit: 10})
		if len(got) != 1 || got[0] != int64(moved) {
			t.Fatalf("%s: search found %v, want [%d]", lag, got, moved)
		}
		if _, err := db.CatchUpSearch(ctx); err != nil {
			t.Fatal(err)
		}
	}
	testkit.CheckSearchIndexCaughtUp(t, db.Path(), "after an id change")
}

// A staged row is found through the staged index, and only while no write has touched
// it since: an update after staging is found by its new text and not its old, a
// deletion after staging is not found, a row deleted before staging has no entry, and
// a search reads only the staged index's candidates (the plan). The catch-up then
// indexes staged rows as any, and takes their staged entries with them.
func TestSearchReadsStagedRows(t *testing.T) {
	testkit.SQLiteOnly(t, "staging is the SQLite list's; PostgreSQL's engine maintains pg_trgm")
	t.Parallel()
	ctx := context.Background()
	db := newTestDB(t)
	mustLoad(t, db, `
- {classname: _schema, keyname: note, text: {dataformat: string}}
- {classname: _schema, keyname: memo, text: {dataformat: string}}
- {classname: note, keyname: n1, text: alpha-one}
- {classname: note, keyname: n2, text: beta-two}
- {classname: note, keyname: n3, text: gamma-three}
- {classname: note, keyname: n4, text: iota-four}
`, store.LoadOptions{System: true})
	if _, err := db.CatchUpSearch(ctx); err != nil {
		t.Fatal(err)
	}
	mustLoad(t, db, `
- {classname: note, keyname: n1, text: delta-one}
- {classname: note, keyname: n3, _action: delete}
- {classname: note, keyname: n5, text: epsilon-five}
- {classname: memo, keyname: m1, text: epsilon-memo}
`, store.LoadOptions{System: true})
	staged, err := db.StageSearch(ctx)
	if err != nil || staged != 4 {
		t.Fatalf("staged %d rows (%v), want the 4 listed", staged, err)
	}
	if got := queryInt(t, db, `SELECT count(*) FROM instances_search_staged`); got != 3 {
		t.Fatalf("%d rows in the staged index, want 3 (the deleted row has none)", got)
	}
	testkit.CheckSearchIndex(t, db.Path(), "staged")
	s, err := db.Schema(ctx, "note")
	if err != nil {
		t.Fatal(err)
	}
	id := func(key string) int64 {
		return int64(queryInt(t, db, `SELECT id FROM instances WHERE classname = 'note' AND keyname = ?`, key))
	}
	n1, n5 := id("n1"), id("n5")
	expectAfter := func(round, search string, after int64, want ...int64) {
		t.Helper()
		got, res := listIDs(t, db, s, store.ListQuery{Search: search, After: after, Limit: 10})
		if !slices.Equal(got, want) || (after == 0 && res.Count != len(want)) {
			t.Fatalf("%s: search %q after %d found %v (count %d), want %v", round, search, after, got, res.Count, want)
		}
	}
	expect := func(round, search string, want ...int64) {
		t.Helper()
		expectAfter(round, search, 0, want...)
	}
	var plans []string
	store.SetSearchSeen(db, func(q string, args []any) {
		rows, err := db.Reader().QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Errorf("explain: %v", err)
			return
		}
		defer rows.Close()
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Error(err)
				return
			}
			plan = append(plan, detail)
		}
		plans = append(plans, strings.Join(plan, "\n"))
	})
	expect("staged", "delta-one", n1)
	store.SetSearchSeen(db, nil)
	if len(plans) != 1 || !strings.Contains(plans[0], "SCAN instances_search_staged VIRTUAL TABLE") ||
		!strings.Contains(plans[0], "SEARCH d USING INTEGER PRIMARY KEY") || strings.Contains(plans[0], "TEMP B-TREE") {
		t.Fatalf("the staged part does not read the staged index's candidates in order:\n%s", strings.Join(plans, "\n--\n"))
	}
	t.Logf("plan:\n%s", plans[0])
	expect("staged", "alpha")
	expect("staged", "gamma")
	expect("staged", "epsilon", n5)
	expect("staged", "beta-two", id("n2")) // indexed, not listed
	expectAfter("staged, after a cursor", "epsilon", n5-1, n5)
	expectAfter("staged, after a cursor", "epsilon", n5)

	// Writes after staging: the copies no longer count.
	mustLoad(t, db, `
- {classname: note, keyname: n1, text: zeta-one}
- {classname: note, keyname: n5, _action: delete}
- {classname: memo, keyname: m1, text: epsilon-memo-again}
`, store.LoadOptions{System: true})
	testkit.CheckSearchIndex(t, db.Path(), "written after staging")
	expect("written after staging", "delta")
	expect("written after staging", "zeta-one", n1)
	expect("written after staging", "epsilon")
	// m1 still holds the search after its write: found once (the listed row), not a
	// second time through its stale staged entry.
	memo, err := db.Schema(ctx, "memo")
	if err != nil {
		t.Fatal(err)
	}
	if got, res := listIDs(t, db, memo, store.ListQuery{Search: "epsilon", Limit: 10}); len(got) != 1 || res.Count != 1 {
		t.Fatalf("written after staging: memo search found %v (count %d), want m1 once", got, res.Count)
	}
	if got := queryInt(t, db, `SELECT count(*) FROM instances_search_dirty WHERE staged = 1`); got != 1 {
		t.Fatalf("%d rows still staged, want 1 (n3, deleted before staging)", got)
	}
	if _, err := db.StageSearch(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.CheckSearchIndex(t, db.Path(), "staged again")
	expect("staged again", "zeta-one", n1)
	expect("staged again", "delta")
	if _, err := db.CatchUpSearch(ctx); err != nil {
		t.Fatal(err)
	}
	if got := queryInt(t, db, `SELECT count(*) FROM instances_search_staged`); got != 0 {
		t.Fatalf("%d rows left in the staged index after the catch-up, want 0", got)
	}
	testkit.CheckSearchIndexCaughtUp(t, db.Path(), "caught up after staging")
	expect("caught up", "zeta-one", n1)

	// A row written after staging and indexed before it is staged again: its stale
	// entry leaves the staged index with it.
	mustLoad(t, db, `
- {classname: note, keyname: n6, text: kappa-six}
- {classname: note, keyname: n7, text: lambda-seven}
`, store.LoadOptions{System: true})
	if _, err := db.StageSearch(ctx); err != nil {
		t.Fatal(err)
	}
	mustLoad(t, db, `
- {classname: note, keyname: n6, text: mu-six}
`, store.LoadOptions{System: true})
	expect("stale entry", "kappa")
	expect("stale entry", "mu-six", id("n6"))
	if _, err := db.CatchUpSearch(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.CheckSearchIndexCaughtUp(t, db.Path(), "caught up with a stale staged entry")
}

// A search prepares its statements only once its read snapshot has ended: with a read
// pool of one connection, the snapshot holds it, and a prepare waiting for another
// would wait forever. Searches of every shape (nothing listed, rows listed, a staged
// backlog, a sorted page) finish, first unprepared and then prepared, with the same
// answers.
func TestSearchWithOneReadConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := testkit.OpenStore(t, testkit.NewAddress(t, "one-reader.db"), store.Options{ReadConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	mustLoad(t, db, `
- {classname: _schema, keyname: note, text: {dataformat: string}}
- {classname: note, keyname: n1, text: walrus-one}
- {classname: note, keyname: n2, text: walrus-two}
`, store.LoadOptions{System: true})
	s, err := db.Schema(ctx, "note")
	if err != nil {
		t.Fatal(err)
	}
	search := func(round string, q store.ListQuery, want int) {
		t.Helper()
		done := make(chan []int64, 1)
		go func() {
			ids, _ := listIDs(t, db, s, q)
			done <- ids
		}()
		select {
		case ids := <-done:
			if len(ids) != want {
				t.Fatalf("%s: search %+v found %v, want %d rows", round, q, ids, want)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s: search %+v did not finish: waiting for a second read connection", round, q)
		}
	}
	for _, round := range []string{"listed", "listed again", "staged", "caught up", "caught up again"} {
		switch round {
		case "staged":
			if _, err := db.StageSearch(ctx); err != nil {
				t.Fatal(err)
			}
		case "caught up":
			if _, err := db.CatchUpSearch(ctx); err != nil {
				t.Fatal(err)
			}
		}
		search(round, store.ListQuery{Search: "walrus", Limit: 10}, 2)
		search(round, store.ListQuery{Search: "walrus", Limit: 1}, 1)
		search(round, store.ListQuery{Search: "walrus-two", After: 1, Limit: 10}, 1)
		search(round, store.ListQuery{Search: "walrus", Sort: "-text", Limit: 10}, 2)
	}
}

// failures runs check with a testing.TB whose Fatal and Fatalf record the message and
// end check's goroutine (as the real ones end a test's), and returns the messages.
func failures(t *testing.T, check func(tb testing.TB)) []string {
	t.Helper()
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		check(rec)
	}()
	<-done
	return rec.msgs
}

type fatalRecorder struct {
	testing.TB
	msgs []string
}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (r *fatalRecorder) Fatal(args ...any) {
	r.msgs = append(r.msgs, fmt.Sprint(args...))
	runtime.Goexit()
}

// The kit's index check fails on each way the indexes can diverge from the instances:
// a row indexed as other text than its instance's (dropped from the list unindexed),
// a staged row without its entry, a row marked staged that never was. Each corruption
// is made in a fresh copy of one file, and the unchanged copy passes.
func TestSearchIndexCheckCatchesDivergence(t *testing.T) {
	testkit.SQLiteOnly(t, "the kit compares SQLite's FTS5 indexes with the instances")
	t.Parallel()
	ctx := context.Background()
	db := newTestDB(t)
	mustLoad(t, db, `
- {classname: _schema, keyname: note, text: {dataformat: string}}
- {classname: note, keyname: n1, text: alpha-one}
- {classname: note, keyname: n2, text: beta-two}
`, store.LoadOptions{System: true})
	if _, err := db.CatchUpSearch(ctx); err != nil {
		t.Fatal(err)
	}
	mustLoad(t, db, `
- {classname: note, keyname: n1, text: gamma-one}
- {classname: note, keyname: n3, text: delta-three}
- {classname: note, keyname: n4, text: eta-four}
`, store.LoadOptions{System: true})
	if _, err := db.StageSearch(ctx); err != nil {
		t.Fatal(err)
	}
	mustLoad(t, db, `
- {classname: note, keyname: n4, text: theta-four}
`, store.LoadOptions{System: true})
	path := db.Path()
	db.Close()
	if msgs := failures(t, func(tb testing.TB) { testkit.CheckSearchIndex(tb, path, "unchanged") }); len(msgs) != 0 {
		t.Fatalf("the unchanged file fails the check: %v", msgs)
	}
	for _, c := range []struct{ name, corrupt, want string }{
		{"a listed row dropped unindexed", `DELETE FROM instances_search_dirty
			WHERE id = (SELECT id FROM instances WHERE keyname = 'n1' AND classname = 'note')`,
			"rows differ between the index's text and the instances"},
		{"a staged row's entry lost", `DELETE FROM instances_search_staged
			WHERE rowid = (SELECT id FROM instances WHERE keyname = 'n3' AND classname = 'note')`,
			`only in a rebuilt index: term "del"`},
		{"a stale entry taken as current", `UPDATE instances_search_dirty SET staged = 1
			WHERE id = (SELECT id FROM instances WHERE keyname = 'n4' AND classname = 'note')`,
			`only in the index: term "\"et"`},
	} {
		copyPath := filepath.Join(t.TempDir(), "copy.db")
		raw, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec("VACUUM INTO ?", copyPath); err != nil {
			t.Fatal(err)
		}
		raw.Close()
		raw, err = sql.Open("sqlite", "file:"+copyPath)
		if err != nil {
			t.Fatal(err)
		}
		if res, err := raw.Exec(c.corrupt); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		} else if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("%s: %d rows changed, want 1", c.name, n)
		}
		raw.Close()
		msgs := failures(t, func(tb testing.TB) { testkit.CheckSearchIndex(tb, copyPath, c.name) })
		if len(msgs) != 1 || !strings.Contains(msgs[0], c.want) {
			t.Fatalf("%s: the check said %q, want a failure with %q", c.name, msgs, c.want)
		}
		t.Logf("%s: %s", c.name, msgs[0])
	}
}
