package store

import (
	"context"
	"fmt"
)

// Merging the search index (SQLite). FTS5 keeps an index as b-trees (segments) and
// writes one or more for each transaction that indexes rows, merging them by levels
// as it goes (its automerge); a search looks each of its trigrams up in every
// segment: merged into one, a search at a million instances took 2.2–2.4 ms of CPU
// where it took 2.9–3.3 after the catch-up's batches (BENCHMARKS.md). So once the
// list is empty and the catch-up has indexed enough rows since the index was last
// merged whole (mergeDue), it merges the whole index, in write transactions that each
// write about 500 pages (the dialect's searchMergeStart and searchMergeMore), with the
// same pause between them as between its batches; indexing goes first whenever rows
// are listed meanwhile (the merge goes on where it stopped).

// mergeAfterRows is the fewest rows the catch-up indexes before it merges the index
// whole again, and mergeAfterShare the share of the instances: a merge rewrites the
// whole index (about 290 bytes an instance; FTS5 merges about 6 µs of CPU a row), so it
// runs after a backlog of a quarter of the instances at least: under steady writes the
// merges cost at most 4 rows rewritten for each row indexed (which itself costs 40 to
// 70 µs), not a rewrite of a million rows every 50,000.
const (
	mergeAfterRows  = 50_000
	mergeAfterShare = 4
)

// mergeBatch does one transaction of the index's merge: the first of a merge (start)
// puts every segment on one level, so that the merge makes one; the next ones go on
// with a merge begun. It reports whether there was work (FTS5 counts changed rows:
// two or more when it wrote, as its documentation says).
func (db *DB) mergeBatch(ctx context.Context, start bool) (worked bool, err error) {
	q := db.dia.searchMergeMore
	if start {
		q = db.dia.searchMergeStart
	}
	tx, wctx, commit, done, err := db.beginCatchUp(ctx)
	if err != nil {
		return false, err
	}
	defer done()
	var before, after int64
	if err := tx.queryRowContext(wctx, db.dia.totalChanges).Scan(&before); err != nil {
		return false, fmt.Errorf("search index merge: %w", err)
	}
	if _, err := tx.execContext(wctx, q); err != nil {
		return false, fmt.Errorf("search index merge: %w", err)
	}
	if err := tx.queryRowContext(wctx, db.dia.totalChanges).Scan(&after); err != nil {
		return false, fmt.Errorf("search index merge: %w", err)
	}
	if after-before < 2 {
		return false, nil
	}
	if err := commit(); err != nil {
		return false, err
	}
	return true, nil
}

// mergeDue reports whether the index is to be merged: a merge is under way, or the
// catch-up indexed, since its last whole merge, mergeAfterRows rows and a
// mergeAfterShare-th of the instances (or the test's bound) at least.
func (db *DB) mergeDue(ctx context.Context) bool {
	if db.dia.searchMergeStart == "" || db.readOnly {
		return false
	}
	if db.searchMerging.Load() {
		return true
	}
	since := db.searchIndexed.Load() - db.searchMergedAt.Load()
	if bound := db.mergeAfter.Load(); bound > 0 {
		return since >= bound
	}
	if since < mergeAfterRows {
		return false
	}
	var total int64
	if err := db.reader().queryRowContext(ctx, "SELECT coalesce(sum(n), 0) FROM instance_counts").Scan(&total); err != nil {
		return false // counted again at the next idle round
	}
	return since >= total/mergeAfterShare
}

// mergeStep does the next transaction of a due merge; false when the merge has ended
// (the index is one segment, or nothing was to merge).
func (db *DB) mergeStep(ctx context.Context) (bool, error) {
	start := !db.searchMerging.Load()
	mark := db.searchIndexed.Load()
	worked, err := db.mergeBatch(ctx, start)
	if err != nil {
		return false, err
	}
	if !worked {
		db.searchMerging.Store(false)
		db.searchMergedAt.Store(mark)
		return false, nil
	}
	db.searchMerging.Store(true)
	return true, nil
}

// mergeAll merges the index whole now when a merge is due (CatchUpSearch), a
// transaction at a time.
func (db *DB) mergeAll(ctx context.Context) error {
	for db.mergeDue(ctx) {
		more, err := db.mergeStep(ctx)
		if err != nil {
			return fmt.Errorf("search index: %w", err)
		}
		if !more {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}
