package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// The search index (layout 10; SQLite's is a trigram FTS5 index, search_sqlite.go)
// indexes each instance's keyname, displayname and data: a search of three characters or more asks it for the rows
// holding every trigram of the search, and checks those rows with the same LIKE a
// scan uses, so the index only narrows and never decides what matches.

// reindexChunkRows is how many listed rows one chunk of the re-indexing at open
// indexes: a few milliseconds of work; a transaction runs chunks for up to
// maxBatchTime.
const reindexChunkRows = 100

// reindexDirty brings the search index up to date with the instances the
// transaction wrote (noted in instances_search_dirty by triggers): it removes the
// entries of the rows deleted, replaces those of the rows still there with their
// current text, in id order (the index deletes the text it holds for an id, so the
// removal never depends on what the row holds now), and empties the list. The
// replacing is one statement: FTS5 flushes its pending changes to a new segment at
// each statement savepoint, and removing and re-adding in two statements would
// write two segments a commit.
// It runs last in every store write transaction, right before the commit.
func reindexDirty(ctx context.Context, tx conn) error {
	// Not interruptible: a canceled request must not stop FTS5 midway through writing
	// its segments. The last statement writes the index's pending changes out, so the
	// commit (which the request's context can still interrupt) has none left to flush.
	ctx = context.WithoutCancel(ctx)
	var dirty bool
	if err := tx.queryRowContext(ctx, tx.dia.searchDirty).Scan(&dirty); err != nil {
		return fmt.Errorf("search index: %w", err)
	}
	if !dirty {
		return nil
	}
	for _, q := range tx.dia.reindexAll {
		if _, err := tx.execContext(ctx, q); err != nil {
			return fmt.Errorf("search index: %w", err)
		}
	}
	return nil
}

// reindexLeftovers indexes rows written by SQL outside the store (which leaves
// them in instances_search_dirty) when a file is opened for writing. It works in
// transactions of up to maxBatchTime each, beginning each through the turnstile, so a
// writer in another process waits for one of them at most, not for the whole list
// (a million rows take tens of seconds). A write transaction of any process commits
// by indexing every listed row (reindexDirty), so a write made meanwhile indexes
// what is left, in its own transaction.
func (db *DB) reindexLeftovers(ctx context.Context) error {
	for {
		// Checked before any write transaction: opening a file with nothing listed
		// (the usual case) must not wait for a writer.
		var dirty bool
		if err := db.writer().queryRowContext(ctx, db.dia.searchDirty).Scan(&dirty); err != nil {
			return fmt.Errorf("search index: %w", err)
		}
		if !dirty {
			return nil
		}
		more, err := db.reindexSome(ctx)
		if err != nil {
			return fmt.Errorf("search index: %w", err)
		}
		if !more {
			return nil
		}
	}
}

// reindexSome indexes listed rows a chunk at a time in one transaction, for up to
// maxBatchTime; more is false once the list is empty.
func (db *DB) reindexSome(ctx context.Context) (more bool, err error) {
	raw, done, err := db.beginWriter(ctx)
	if err != nil {
		return false, err
	}
	defer done()
	defer raw.Rollback()
	tx := conn{raw, db.dia}
	chunk := db.dia.reindexUpTo
	began := time.Now()
	for time.Since(began) < maxBatchTime {
		var last sql.NullInt64
		var n int
		if err := tx.queryRowContext(ctx, `SELECT max(id), count(*) FROM (SELECT id FROM instances_search_dirty
			ORDER BY id LIMIT ?)`, reindexChunkRows).Scan(&last, &n); err != nil {
			return false, err
		}
		if !last.Valid {
			break
		}
		for _, q := range chunk[:len(chunk)-1] {
			if _, err := tx.execContext(ctx, q, last.Int64); err != nil {
				return false, err
			}
		}
		db.HoldForTest(n)
		more = true
	}
	if !more {
		return false, nil
	}
	if _, err := tx.execContext(ctx, chunk[len(chunk)-1]); err != nil {
		return false, err
	}
	return true, raw.Commit()
}
