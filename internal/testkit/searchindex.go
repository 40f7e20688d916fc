package testkit

import (
	"cmp"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// CheckSearchIndex fails the test unless, in one snapshot of the file at path, its
// search index holds exactly what an index rebuilt from the instances holds (the same
// rows for every term either knows, compared posting by posting) for every row not listed for indexing (listed
// rows wait for the catch-up; searches check them by reading them), the staged index
// holds for the staged rows exactly their instances' terms now, and
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
	// Every (term, row) posting of each index, through fts5vocab's instance tables:
	// one pass over each index, where a MATCH per term took minutes under the race
	// detector. The staged rows' ids are kept once,
	// keyed, for the staged index's filter.
	for _, q := range []string{
		`CREATE VIRTUAL TABLE temp.rebuilt USING fts5(keyname, displayname, data, tokenize='trigram', detail=none)`,
		`INSERT INTO temp.rebuilt(rowid, keyname, displayname, data) SELECT id, keyname, displayname, data FROM instances
		WHERE id NOT IN (SELECT id FROM instances_search_dirty)`,
		`CREATE VIRTUAL TABLE temp.postings_live USING fts5vocab(main, instances_search, instance)`,
		`CREATE VIRTUAL TABLE temp.postings_rebuilt USING fts5vocab(temp, rebuilt, instance)`,
		// The staged rows (layout 19) as their instances are now: the staged index
		// must hold exactly these rows' terms among the staged ones.
		`CREATE VIRTUAL TABLE temp.rebuilt_staged USING fts5(keyname, displayname, data, tokenize='trigram', detail=none)`,
		`INSERT INTO temp.rebuilt_staged(rowid, keyname, displayname, data) SELECT i.id, i.keyname, i.displayname, i.data
		FROM instances_search_dirty d JOIN instances i ON i.id = d.id WHERE d.staged = 1`,
		`CREATE VIRTUAL TABLE temp.postings_staged USING fts5vocab(main, instances_search_staged, instance)`,
		`CREATE VIRTUAL TABLE temp.postings_rebuilt_staged USING fts5vocab(temp, rebuilt_staged, instance)`,
		`CREATE TABLE temp.staged_ids(id INTEGER PRIMARY KEY)`,
		`INSERT INTO temp.staged_ids SELECT id FROM instances_search_dirty WHERE staged = 1`,
	} {
		if _, err := tx.Exec(q); err != nil {
			t.Fatalf("%s: %s: %v", round, q, err)
		}
	}
	// differ fails the test with up to ten postings one index has and the other lacks.
	// fts5vocab yields an index's postings in (term, row) order, so the two streams are
	// merged as they come, with no sort (a sort of every posting took most of a
	// minute under the race detector); a stream out of that order fails the test.
	differ := func(what, have, want string) {
		t.Helper()
		h, w := postingsOf(t, tx, round, have), postingsOf(t, tx, round, want)
		defer h.close()
		defer w.close()
		var diffs []string
		for (h.ok || w.ok) && len(diffs) < 10 {
			switch c := comparePostings(h, w); {
			case c < 0:
				diffs = append(diffs, fmt.Sprintf("only in the index: term %q row %d", h.term, h.doc))
				h.next()
			case c > 0:
				diffs = append(diffs, fmt.Sprintf("only in a rebuilt index: term %q row %d", w.term, w.doc))
				w.next()
			default:
				h.next()
				w.next()
			}
		}
		if len(diffs) > 0 {
			t.Fatalf("%s: %s differs from its instances:\n%s", round, what, strings.Join(diffs, "\n"))
		}
	}
	differ("the staged index", `SELECT term, doc FROM temp.postings_staged WHERE doc IN temp.staged_ids`,
		`SELECT term, doc FROM temp.postings_rebuilt_staged`)
	if listed == 0 && one(`SELECT (SELECT count(*) FROM (SELECT 1 FROM temp.postings_live LIMIT 1)) +
		(SELECT count(*) FROM (SELECT 1 FROM temp.postings_rebuilt LIMIT 1))`) == "0" {
		t.Fatalf("%s: no terms in the index", round)
	}
	differ("the search index", `SELECT term, doc FROM temp.postings_live
		WHERE doc NOT IN (SELECT id FROM instances_search_dirty)`, `SELECT term, doc FROM temp.postings_rebuilt`)
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

// postings is one index's (term, row) postings as a query yields them, one at a time;
// ok is false past the last. It fails the test on an error or a posting out of
// (term, row) order.
type postings struct {
	t     testing.TB
	round string
	rows  *sql.Rows
	ok    bool
	term  string
	doc   int64
}

func postingsOf(t testing.TB, tx *sql.Tx, round, q string) *postings {
	t.Helper()
	rows, err := tx.Query(q)
	if err != nil {
		t.Fatalf("%s: %s: %v", round, q, err)
	}
	p := &postings{t: t, round: round, rows: rows}
	p.next()
	return p
}

func (p *postings) next() {
	p.t.Helper()
	if !p.rows.Next() {
		if err := p.rows.Err(); err != nil {
			p.t.Fatalf("%s: postings: %v", p.round, err)
		}
		p.ok = false
		return
	}
	term, doc := p.term, p.doc
	if err := p.rows.Scan(&p.term, &p.doc); err != nil {
		p.t.Fatalf("%s: postings: %v", p.round, err)
	}
	if p.ok && (p.term < term || p.term == term && p.doc <= doc) {
		p.t.Fatalf("%s: postings out of order: (%q, %d) after (%q, %d)", p.round, p.term, p.doc, term, doc)
	}
	p.ok = true
}

func (p *postings) close() { p.rows.Close() }

// comparePostings orders the current postings of a and b, a stream past its end last.
func comparePostings(a, b *postings) int {
	switch {
	case !a.ok:
		return 1
	case !b.ok:
		return -1
	case a.term != b.term:
		return strings.Compare(a.term, b.term)
	default:
		return cmp.Compare(a.doc, b.doc)
	}
}
