package testkit

import (
	"database/sql"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// CheckSearchIndex fails the test unless, in one snapshot of the file at path, its
// search index holds exactly what an index rebuilt from the instances holds (the same
// rows for every term either knows) for every row not listed for indexing (listed
// rows wait for the catch-up; searches check them by reading them), the staged index
// answers every term with exactly the staged rows whose instances hold it now, and
// integrity_check passes. It returns how many rows are listed.
func CheckSearchIndex(t testing.TB, path, round string) (listed int) {
	t.Helper()
	sdb, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(15000)")
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	// One read transaction: one snapshot of the file even beside a running writer; the
	// temp tables made in it are dropped with its connection.
	tx, err := sdb.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	one := func(q string) string {
		t.Helper()
		var s string
		if err := tx.QueryRow(q).Scan(&s); err != nil {
			t.Fatalf("%s: %s: %v", round, q, err)
		}
		return s
	}
	listed, err = strconv.Atoi(one("SELECT count(*) FROM instances_search_dirty"))
	if err != nil {
		t.Fatal(err)
	}
	if ok := one("PRAGMA integrity_check"); ok != "ok" {
		t.Fatalf("%s: integrity_check: %s", round, ok)
	}
	// The text the index holds is the rows' (its own integrity check, part of
	// integrity_check, checks its entries against that text).
	if diff := one(`SELECT (SELECT count(*) FROM (SELECT rowid, keyname, displayname, data FROM instances_search
		WHERE rowid NOT IN (SELECT id FROM instances_search_dirty)
		EXCEPT SELECT id, keyname, displayname, data FROM instances)) + (SELECT count(*) FROM (
		SELECT id, keyname, displayname, data FROM instances WHERE id NOT IN (SELECT id FROM instances_search_dirty)
		EXCEPT SELECT rowid, keyname, displayname, data FROM instances_search))`); diff != "0" {
		t.Fatalf("%s: %s rows differ between the index's text and the instances", round, diff)
	}
	for _, q := range []string{
		`CREATE VIRTUAL TABLE temp.rebuilt USING fts5(keyname, displayname, data, tokenize='trigram', detail=none)`,
		`INSERT INTO temp.rebuilt(rowid, keyname, displayname, data) SELECT id, keyname, displayname, data FROM instances
		WHERE id NOT IN (SELECT id FROM instances_search_dirty)`,
		`CREATE VIRTUAL TABLE temp.vocab_live USING fts5vocab(main, instances_search, row)`,
		`CREATE VIRTUAL TABLE temp.vocab_rebuilt USING fts5vocab(temp, rebuilt, row)`,
		// The staged rows (layout 19) as their instances are now: the staged index
		// must answer each term with exactly these rows among the staged ones.
		`CREATE VIRTUAL TABLE temp.rebuilt_staged USING fts5(keyname, displayname, data, tokenize='trigram', detail=none)`,
		`INSERT INTO temp.rebuilt_staged(rowid, keyname, displayname, data) SELECT i.id, i.keyname, i.displayname, i.data
		FROM instances_search_dirty d JOIN instances i ON i.id = d.id WHERE d.staged = 1`,
		`CREATE VIRTUAL TABLE temp.vocab_staged USING fts5vocab(main, instances_search_staged, row)`,
		`CREATE VIRTUAL TABLE temp.vocab_rebuilt_staged USING fts5vocab(temp, rebuilt_staged, row)`,
	} {
		if _, err := tx.Exec(q); err != nil {
			t.Fatalf("%s: %s: %v", round, q, err)
		}
	}
	ids := func(q, term string) []int64 {
		t.Helper()
		rows, err := tx.Query(q, `"`+strings.ReplaceAll(term, `"`, `""`)+`"`)
		if err != nil {
			t.Fatalf("%s: %s %q: %v", round, q, term, err)
		}
		defer rows.Close()
		var out []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			out = append(out, id)
		}
		return out
	}
	termsOf := func(q string) []string {
		t.Helper()
		rows, err := tx.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var terms []string
		for rows.Next() {
			var term string
			if err := rows.Scan(&term); err != nil {
				t.Fatal(err)
			}
			terms = append(terms, term)
		}
		return terms
	}
	for _, term := range termsOf("SELECT term FROM temp.vocab_staged UNION SELECT term FROM temp.vocab_rebuilt_staged") {
		// +rowid: the IN is a filter on the index's answer, not rowids handed to FTS5
		// one by one (a lookup per staged row and term).
		live := ids(`SELECT rowid FROM instances_search_staged WHERE instances_search_staged MATCH ?
			AND +rowid IN (SELECT id FROM instances_search_dirty WHERE staged = 1) ORDER BY rowid`, term)
		want := ids("SELECT rowid FROM temp.rebuilt_staged WHERE rebuilt_staged MATCH ? ORDER BY rowid", term)
		if !slices.Equal(live, want) {
			t.Fatalf("%s: term %q: the staged index has staged rows %v, their instances %v", round, term, live, want)
		}
	}
	terms := termsOf("SELECT term FROM temp.vocab_live UNION SELECT term FROM temp.vocab_rebuilt")
	if len(terms) == 0 && listed == 0 {
		t.Fatalf("%s: no terms in the index", round)
	}
	for _, term := range terms {
		live := ids(`SELECT rowid FROM instances_search WHERE instances_search MATCH ?
			AND rowid NOT IN (SELECT id FROM instances_search_dirty) ORDER BY rowid`, term)
		want := ids("SELECT rowid FROM temp.rebuilt WHERE rebuilt MATCH ? ORDER BY rowid", term)
		if !slices.Equal(live, want) {
			t.Fatalf("%s: term %q: the index has rows %v, a rebuilt index %v", round, term, live, want)
		}
	}
	return listed
}

// CheckSearchIndexCaughtUp is CheckSearchIndex where nothing may be left listed: the
// index equals one rebuilt from the instances.
func CheckSearchIndexCaughtUp(t testing.TB, path, round string) {
	t.Helper()
	if n := CheckSearchIndex(t, path, round); n != 0 {
		t.Fatalf("%s: %d rows left to index", round, n)
	}
	// Nothing listed: nothing left in the staged index either (an entry leaves it with
	// its row, stale or not).
	sdb, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(15000)")
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	var staged int
	if err := sdb.QueryRow("SELECT count(*) FROM instances_search_staged").Scan(&staged); err != nil || staged != 0 {
		t.Fatalf("%s: %d rows left in the staged index (%v)", round, staged, err)
	}
}
