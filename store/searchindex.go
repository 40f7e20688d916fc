package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// The search index (layout 10) is a trigram FTS5 index of each instance's keyname,
// displayname and data: a search of three characters or more asks it for the rows
// holding every trigram of the search, and checks those rows with the same LIKE a
// scan uses, so the index only narrows and never decides what matches.

// SearchDirtyCheck and SearchReindex are the statements a write transaction runs last
// (reindexDirty): the check whether any written row awaits indexing, then the index's
// update from the listed rows. Exported so that benchmark floors run the same SQL.
const SearchDirtyCheck = `SELECT EXISTS (SELECT 1 FROM instances_search_dirty)`

var SearchReindex = reindexStatements("")

// reindexStatements are the re-indexing statements over the listed rows that satisfy
// cond (a condition on d.id; "" for all of them).
func reindexStatements(cond string) []string {
	and, where := "", ""
	if cond != "" {
		and, where = " AND "+cond, " WHERE "+cond
	}
	return []string{
		`DELETE FROM instances_search WHERE rowid IN (SELECT d.id FROM instances_search_dirty d
		WHERE NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = d.id)` + and + `)`,
		`INSERT OR REPLACE INTO instances_search(rowid, keyname, displayname, data)
		SELECT i.id, i.keyname, i.displayname, i.data
		FROM instances_search_dirty d JOIN instances i ON i.id = d.id` + where + ` ORDER BY d.id`,
		`DELETE FROM instances_search_dirty AS d` + where,
		`INSERT INTO instances_search(instances_search) VALUES('flush')`,
	}
}

// reindexChunk is the statements that index the listed rows with ids up to ? (the
// last of a chunk of reindexChunkRows): the re-indexing at open works through the
// list a chunk at a time.
var reindexChunk = reindexStatements("d.id <= ?")

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
func reindexDirty(ctx context.Context, tx *sql.Tx) error {
	// Not interruptible: a canceled request must not stop FTS5 midway through writing
	// its segments. The last statement writes the index's pending changes out, so the
	// commit (which the request's context can still interrupt) has none left to flush.
	ctx = context.WithoutCancel(ctx)
	var dirty bool
	if err := tx.QueryRowContext(ctx, SearchDirtyCheck).Scan(&dirty); err != nil {
		return fmt.Errorf("search index: %w", err)
	}
	if !dirty {
		return nil
	}
	for _, q := range SearchReindex {
		if _, err := tx.ExecContext(ctx, q); err != nil {
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
		if err := db.w.QueryRowContext(ctx, SearchDirtyCheck).Scan(&dirty); err != nil {
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
	tx, done, err := db.beginWriter(ctx)
	if err != nil {
		return false, err
	}
	defer done()
	defer tx.Rollback()
	began := time.Now()
	for time.Since(began) < maxBatchTime {
		var last sql.NullInt64
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT max(id), count(*) FROM (SELECT id FROM instances_search_dirty
			ORDER BY id LIMIT ?)`, reindexChunkRows).Scan(&last, &n); err != nil {
			return false, err
		}
		if !last.Valid {
			break
		}
		for _, q := range reindexChunk[:len(reindexChunk)-1] {
			if _, err := tx.ExecContext(ctx, q, last.Int64); err != nil {
				return false, err
			}
		}
		db.HoldForTest(n)
		more = true
	}
	if !more {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, reindexChunk[len(reindexChunk)-1]); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

// maxTrigrams bounds the trigrams a search asks the index for: a long search is
// narrowed by its first ones (the LIKE check sees the whole search).
const maxTrigrams = 32

// indexQuery is the FTS5 query for a search: every distinct trigram of it (at most
// maxTrigrams), each a quoted string, joined by AND (the index keeps no positions; the LIKE check that
// follows does the rest). ok is false where the index cannot narrow a search
// exactly as LIKE would: fewer than three characters (no trigram), text that is not
// valid UTF-8, or a NUL character.
func indexQuery(search string) (q string, ok bool) {
	if utf8.RuneCountInString(search) < 3 || !utf8.ValidString(search) || strings.ContainsRune(search, 0) {
		return "", false
	}
	r := []rune(search)
	seen := map[string]bool{}
	var b strings.Builder
	for i := 0; i+3 <= len(r) && len(seen) < maxTrigrams; i++ {
		tri := string(r[i : i+3])
		if seen[tri] {
			continue
		}
		seen[tri] = true
		if b.Len() > 0 {
			b.WriteString(" AND ")
		}
		b.WriteString(`"` + strings.ReplaceAll(tri, `"`, `""`) + `"`)
	}
	return b.String(), true
}
