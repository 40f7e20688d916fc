package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// After a backlog the catch-up merges the search index into one segment (FTS5's
// b-trees: a search looks each trigram up in every one), on CatchUpSearch and in the
// background loop once the list is empty; below the bound it does not; the merged
// index is still exact.
func TestSearchIndexMergedAfterBacklog(t *testing.T) {
	ctx := context.Background()
	db, segments := mergeTestDB(t)
	store.SetMergeAfter(db, 1_000_000)
	for round := range 6 { // a catch-up transaction each: six segments or more
		var doc string
		for i := range 40 {
			doc += fmt.Sprintf("- {classname: note, keyname: n%d-%d, text: word-%d-%d}\n", round, i, round, i)
		}
		mustLoad(t, db, doc, store.LoadOptions{System: true})
		if _, err := db.CatchUpSearch(ctx); err != nil {
			t.Fatal(err)
		}
	}
	before := segments()
	if before < 2 {
		t.Fatalf("%d segments after six catch-ups: nothing to merge", before)
	}
	if _, err := db.CatchUpSearch(ctx); err != nil {
		t.Fatal(err)
	}
	if got := segments(); got != before {
		t.Fatalf("merged below the bound: %d segments, were %d", got, before)
	}
	store.SetMergeAfter(db, 100)
	if _, err := db.CatchUpSearch(ctx); err != nil {
		t.Fatal(err)
	}
	if got := segments(); got != 1 {
		t.Fatalf("%d segments after the merge, were %d; want 1", got, before)
	}
	t.Logf("%d segments merged into one", before)
	testkit.CheckSearchIndexCaughtUp(t, db.Path(), "merged")
	s, err := db.Schema(ctx, "note")
	if err != nil {
		t.Fatal(err)
	}
	if ids, _ := listIDs(t, db, s, store.ListQuery{Search: "word-3-17", Limit: 10}); len(ids) != 1 {
		t.Fatalf("search after the merge finds %v", ids)
	}

	// The background loop: more rows, indexed and merged once the list is empty.
	for round := range 4 {
		var doc string
		for i := range 60 {
			doc += fmt.Sprintf("- {classname: note, keyname: m%d-%d, text: more-%d-%d}\n", round, i, round, i)
		}
		mustLoad(t, db, doc, store.LoadOptions{System: true})
		store.SetMergeAfter(db, 1_000_000)
		if _, err := db.CatchUpSearch(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if segments() < 2 {
		t.Fatal("no segments to merge for the background loop")
	}
	store.SetMergeAfter(db, 100)
	loop, stop := context.WithCancel(ctx)
	ended := make(chan struct{})
	go func() { defer close(ended); db.RunSearchCatchUp(loop, nil) }()
	for deadline := time.Now().Add(30 * time.Second); segments() != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			stop()
			<-ended
			t.Fatalf("the background catch-up left %d segments", segments())
		}
	}
	stop()
	<-ended
	testkit.CheckSearchIndexCaughtUp(t, db.Path(), "merged by the background catch-up")
	if ids, _ := listIDs(t, db, s, store.ListQuery{Search: "more-2-59", Limit: 10}); len(ids) != 1 {
		t.Fatalf("search after the background merge finds %v", ids)
	}
}

// The production bound: 60,000 rows indexed in a table of as many (over 50,000 and a
// quarter of the instances) make the catch-up merge; 1,000 more do not.
func TestSearchIndexMergeBound(t *testing.T) {
	ctx := context.Background()
	db, segments := mergeTestDB(t)
	insert := func(from, n int) {
		testkit.Exec(t, db, `WITH RECURSIVE c(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM c WHERE i < ?)
			INSERT INTO instances(classname, keyname, data, created_at, updated_at)
			SELECT 'note', 'n' || i, json_object('text', 'w' || i), '', '' FROM c`, from, from+n-1)
	}
	insert(0, 60_000)
	if _, err := db.CatchUpSearch(ctx); err != nil {
		t.Fatal(err)
	}
	if got := segments(); got != 1 {
		t.Fatalf("%d segments after indexing 60,000 rows, want 1 (merged)", got)
	}
	insert(60_000, 1_000)
	if _, err := db.CatchUpSearch(ctx); err != nil {
		t.Fatal(err)
	}
	if got := segments(); got < 2 {
		t.Fatalf("%d segments after 1,000 more rows: merged below the bound", got)
	}
}

// mergeTestDB is a new database (SQLite only; the test runs in parallel) with a schema
// note, and a function counting its search index's segments (FTS5's b-trees: each
// has its rows in the index's %_idx table).
func mergeTestDB(t *testing.T) (*store.DB, func() int) {
	t.Helper()
	testkit.SQLiteOnly(t, "the merge is of SQLite's FTS5 index; PostgreSQL's engine maintains pg_trgm")
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, "- {classname: _schema, keyname: note, text: {dataformat: string}}\n", store.LoadOptions{System: true})
	return db, func() int {
		t.Helper()
		return queryInt(t, db, "SELECT count(DISTINCT segid) FROM instances_search_idx")
	}
}
