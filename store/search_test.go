package store_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
)

// The trigram tokenizer (substring search) must be compiled into the SQLite driver.
func TestTrigramTokenizerAvailable(t *testing.T) {
	testkit.SQLiteOnly(t, "the SQLite driver's FTS5 trigram tokenizer")
	t.Parallel()
	sdb, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "fts.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	if _, err := sdb.Exec("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='trigram')"); err != nil {
		t.Fatalf("fts5 trigram: %v", err)
	}
	if _, err := sdb.Exec("INSERT INTO t(x) VALUES('alpha-Bravo-charlie'), ('delta')"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := sdb.QueryRow(`SELECT count(*) FROM t WHERE t MATCH '"o-CHA"'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("substring match found %d rows, want 1", n)
	}
}

// searchAlphabet mixes ASCII of both cases, non-ASCII letters of both cases, LIKE's
// wildcards and escape, JSON's quote and a space.
var searchAlphabet = []rune(`aAbBcé É_%\" x`)

func randText(r *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteRune(searchAlphabet[r.IntN(len(searchAlphabet))])
	}
	return b.String()
}

// likeIDs is the search's semantics, written out and applied in Go to every row of
// the class (a full scan, on either engine): the search is a substring of the
// keyname, the displayname or (in schemas without secrets) the stored JSON text,
// ignoring the case of ASCII letters only (SQLite's LIKE; PostgreSQL's ILIKE would
// fold every letter).
func likeIDs(t *testing.T, db *store.DB, cls, search string, withData bool) []int64 {
	t.Helper()
	rows, err := db.Reader().QueryContext(context.Background(),
		"SELECT id, keyname, displayname, CAST(data AS TEXT) FROM instances WHERE classname = ? ORDER BY id", cls)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	sub := foldASCII(search)
	var ids []int64
	for rows.Next() {
		var id int64
		var key, display, data string
		if err := rows.Scan(&id, &key, &display, &data); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(foldASCII(key), sub) || strings.Contains(foldASCII(display), sub) ||
			withData && strings.Contains(foldASCII(data), sub) {
			ids = append(ids, id)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// foldASCII lowers ASCII letters only.
func foldASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

func listIDs(t *testing.T, db *store.DB, s *model.Schema, q store.ListQuery) ([]int64, *store.ListResult) {
	t.Helper()
	res, err := db.ListInstances(context.Background(), s, q)
	if err != nil {
		t.Fatalf("list %+v: %v", q, err)
	}
	var ids []int64
	for _, in := range res.Instances {
		ids = append(ids, in.ID)
	}
	return ids, res
}

// The search answers exactly what LIKE answers (with the pattern escaping), over random
// data and random searches (substrings of stored values and random strings, short and long), in a
// schema with and one without secret fields; and after updates and deletes.
func TestSearchMatchesLike(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, `
- {classname: _schema, keyname: note, text: {dataformat: string}, more: {dataformat: string, cardinal_max: 0}}
- {classname: _schema, keyname: vault, text: {dataformat: string}, pw: {dataformat: secret}}
`, store.LoadOptions{System: true})
	r := rand.New(rand.NewPCG(16, 1))
	var docs []map[string]any
	var stored []string
	for i := range 300 {
		cls := "note"
		if i%3 == 0 {
			cls = "vault"
		}
		e := map[string]any{"classname": cls, "keyname": fmt.Sprintf("k%d-%s", i, strings.ReplaceAll(randText(r, 4), " ", "-")),
			"displayname": randText(r, r.IntN(8)), "text": randText(r, r.IntN(12))}
		if cls == "note" {
			e["more"] = []any{randText(r, 5), randText(r, 3)}
		} else if i%30 == 0 {
			e["pw"] = randText(r, 6) // each costs an argon2id derivation: a few
		}
		docs = append(docs, e)
		stored = append(stored, e["keyname"].(string), e["displayname"].(string), e["text"].(string))
	}
	body, _ := json.Marshal(docs)
	mustLoad(t, db, string(body), store.LoadOptions{System: true})
	compareSearch(t, db, r, stored, "after load", 150)
	// Updates and deletes keep the index in step.
	var updates []map[string]any
	for i := 0; i < 300; i += 7 {
		updates = append(updates, map[string]any{"classname": docs[i]["classname"], "keyname": docs[i]["keyname"],
			"_action": "update", "displayname": randText(r, 6), "text": randText(r, 6)})
	}
	body, _ = json.Marshal(updates)
	if res := mustLoad(t, db, string(body), store.LoadOptions{System: true}); res.Updated != len(updates) {
		t.Fatalf("updates: %s\n%s", counts(res), messages(res))
	}
	exec(t, db, "DELETE FROM instances WHERE classname IN ('note', 'vault') AND id % 5 = 0")
	compareSearch(t, db, r, stored, "after updates and deletes", 150)
}

// Counts are maintained by inserts, deletes and schema renames; keyset pages walk
// every instance once; a search's count stops at its bound unless asked for exactly.
func TestCountsAndKeysetPaging(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	ctx := context.Background()
	mustLoad(t, db, `- {classname: _schema, keyname: item, n: {dataformat: int}}`, store.LoadOptions{System: true})
	var b strings.Builder
	for i := range 1234 {
		fmt.Fprintf(&b, "- {classname: item, keyname: item%04d, n: %d}\n", i, i)
	}
	mustLoad(t, db, b.String(), store.LoadOptions{System: true})
	check := func(cls string, want int) {
		t.Helper()
		n, err := db.CountInstances(ctx, cls)
		if err != nil {
			t.Fatal(err)
		}
		if real := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = ?", cls); n != want || real != want {
			t.Fatalf("count %s = %d (count(*) %d), want %d", cls, n, real, want)
		}
	}
	check("item", 1234)
	exec(t, db, "DELETE FROM instances WHERE classname = 'item' AND id % 10 = 0")
	want := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'item'")
	check("item", want)
	s, err := db.Schema(ctx, "item")
	if err != nil {
		t.Fatal(err)
	}
	var walked []int64
	var after int64
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("keyset paging does not end")
		}
		ids, res := listIDs(t, db, s, store.ListQuery{After: after, Limit: 50})
		if res.Count != want {
			t.Fatalf("page count %d, want %d", res.Count, want)
		}
		walked = append(walked, ids...)
		if res.Next == 0 {
			break
		}
		if res.Next != ids[len(ids)-1] {
			t.Fatalf("next cursor %d is not the last id %d", res.Next, ids[len(ids)-1])
		}
		after = res.Next
	}
	all, _ := listIDs(t, db, s, store.ListQuery{Limit: 5000})
	if len(all) != want || !slices.Equal(walked, all) {
		t.Fatalf("keyset walk gave %d ids, the full list %d (want %d)", len(walked), len(all), want)
	}
	// Page numbers and the cursor agree.
	p3, _ := listIDs(t, db, s, store.ListQuery{Offset: 100, Limit: 50})
	if !slices.Equal(p3, all[100:150]) {
		t.Fatalf("offset page differs from the full list")
	}
	// "item" is in every keyname: the count of a search stops at offset+limit+slack.
	_, res := listIDs(t, db, s, store.ListQuery{Search: "item", Limit: 10})
	if bound := 10 + store.SearchCountSlack; want > bound && (res.Count != bound || res.CountExact) {
		t.Fatalf("bounded search count %d exact=%v, want %d inexact", res.Count, res.CountExact, bound)
	}
	_, res = listIDs(t, db, s, store.ListQuery{Search: "item", Limit: 10, ExactCount: true})
	if res.Count != want || !res.CountExact {
		t.Fatalf("exact search count %d, want %d", res.Count, want)
	}
	// Search with the cursor: the ids above it only.
	ids, _ := listIDs(t, db, s, store.ListQuery{Search: "item", After: all[500], Limit: 3})
	if !slices.Equal(ids, all[501:504]) {
		t.Fatalf("search after cursor gave %v, want %v", ids, all[501:504])
	}
	// Moving instances to another class name (as a schema rename does) moves the counts.
	exec(t, db, "UPDATE instances SET classname = 'item2' WHERE classname = 'item' AND id % 3 = 0")
	moved := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'item2'")
	check("item2", moved)
	check("item", want-moved)
}

// A file written before the counts existed gets them built when it is opened.
func TestCountsBuiltForExistingFiles(t *testing.T) {
	testkit.SQLiteOnly(t, "a file from before SQLite's layout step 4; PostgreSQL's layout keeps the counts from its first step")
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "old.db")
	db, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	// Before layouts 4 (counts) and later; layout 3 is the sessions table.
	testkit.ExecFile(t, path, append([]string{
		"INSERT INTO instances(classname, keyname, data, created_at, updated_at) VALUES('a', 'one', '{\"x\":\"needle\"}', '', ''), ('a', 'two', '{}', '', ''), ('b', 'three', '{}', '', '')"},
		layoutsAfter(3)...)...,
	)
	db, err = store.Open(context.Background(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for cls, want := range map[string]int{"a": 2, "b": 1, "c": 0} {
		if n, err := db.CountInstances(context.Background(), cls); err != nil || n != want {
			t.Fatalf("count %s = %d, %v; want %d", cls, n, err, want)
		}
	}
}

// The count of a search is the same whether it comes from the last page or from
// counting: on every page, with page numbers past the end too.
func TestSearchCountOnEveryPage(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, `- {classname: _schema, keyname: item, n: {dataformat: int}}`, store.LoadOptions{System: true})
	var b strings.Builder
	for i := range 37 {
		fmt.Fprintf(&b, "- {classname: item, keyname: item%02d, n: %d}\n", i, i)
	}
	mustLoad(t, db, b.String(), store.LoadOptions{System: true})
	s, err := db.Schema(context.Background(), "item")
	if err != nil {
		t.Fatal(err)
	}
	want := len(likeIDs(t, db, "item", "1", true))
	for page := range 6 {
		_, res := listIDs(t, db, s, store.ListQuery{Search: "1", Offset: page * 5, Limit: 5})
		if res.Count != want || !res.CountExact {
			t.Fatalf("page %d: count %d (exact %v), want %d", page+1, res.Count, res.CountExact, want)
		}
	}
}
