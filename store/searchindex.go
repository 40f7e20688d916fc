package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// The search index (layout 10; SQLite's is a trigram FTS5 index, search_sqlite.go)
// indexes each instance's keyname, displayname and data: a search of three characters
// or more asks it for the rows holding every trigram of the search, and checks those
// rows with the same LIKE a scan uses, so the index only narrows and never decides
// what matches.
//
// A write does not index what it writes: the layout's triggers list the ids written in
// instances_search_dirty, in the write's own transaction (cheap), and the catch-up
// (searchcatchup.go) indexes listed rows later, in batches, off the writes' path. The
// index is so exact for every row not listed; a search checks the listed rows by
// reading them (search.go), so it never depends on how far the index lags.

// SearchBacklogLimit is the number of listed (not yet indexed) rows above which a
// search no longer combines the index with an exact check of the listed rows but
// reads every row of its schema, as without an index: checking 100,000 rows costs
// about what a scan of a large schema does (half a second), and more would cost more.
const SearchBacklogLimit = 100_000

// catchUpBatchRows is how many listed rows one catch-up transaction indexes at most,
// in chunks of catchUpChunkRows, and for at most maxBatchTime (as a load's batch): long
// enough for FTS5 to write few, large segments, short enough that a request's write
// waits for one batch at most, however large the rows.
//
// A chunk's size follows the rows' cost: the first chunk is catchUpFirstChunk rows, and
// each next one is as many rows as the time per row of the last one says fit in what
// is left of maxBatchTime (1 to catchUpChunkRows), so a batch of large rows (a row of
// 100 KB takes FTS5 tens of milliseconds) stays within the bound instead of holding
// the writer for a whole fixed chunk.
const (
	catchUpBatchRows  = 2000
	catchUpChunkRows  = 500
	catchUpFirstChunk = 8
)

// indexBatch indexes up to rows listed rows, lowest ids first, in one write
// transaction that passes the turnstile and holds the writer as any write does, for
// at most maxBatchTime (whole chunks). n is how many it indexed (0: the list was
// empty).
func (db *DB) indexBatch(ctx context.Context, rows int) (n int, err error) {
	// Read first: an empty list (the idle catch-up's usual case) takes no writer, so
	// it never makes another process's write wait.
	var listed int64
	seen := time.Now()
	if err := db.reader().queryRowContext(ctx, db.dia.searchBacklog, 1).Scan(&listed); err != nil {
		return 0, err
	}
	if listed == 0 {
		db.sawSearchListEmpty(seen)
		return 0, nil
	}
	tx, wctx, commit, done, err := db.beginCatchUp(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	index, flush := db.dia.reindexUpTo[:len(db.dia.reindexUpTo)-1], db.dia.reindexUpTo[len(db.dia.reindexUpTo)-1]
	began := time.Now()
	chunk := catchUpFirstChunk
	emptied := false // the batch took every listed row
	for n < rows && (n == 0 || time.Since(began) < maxBatchTime) {
		started := time.Now()
		var last sql.NullInt64
		var k int
		if err := tx.queryRowContext(wctx, `SELECT max(id), count(*) FROM (SELECT id FROM instances_search_dirty
			ORDER BY id LIMIT ?)`, min(chunk, rows-n)).Scan(&last, &k); err != nil {
			return 0, err
		}
		if !last.Valid {
			emptied = true
			break
		}
		for _, q := range index {
			if _, err := tx.execContext(wctx, q, last.Int64); err != nil {
				return 0, err
			}
		}
		db.HoldForTest(k)
		n += k
		chunk = nextChunk(time.Since(started), k, maxBatchTime-time.Since(began))
	}
	if n == 0 {
		return 0, nil
	}
	if _, err := tx.execContext(wctx, flush); err != nil {
		return 0, err
	}
	// The writer is held until the commit: a row listed after it is listed after now.
	seen = time.Now()
	if err := commit(); err != nil {
		return 0, err
	}
	if emptied {
		db.sawSearchListEmpty(seen)
	}
	db.searchIndexed.Add(int64(n))
	return n, nil
}

// beginCatchUp begins a write transaction of the catch-up (an indexing or a staging
// batch): it passes the turnstile and holds the writer as any write does. wctx is not
// interruptible: a canceled catch-up must not stop FTS5 midway through writing its
// segments (the rollback would undo them, and the batch's work would be lost for
// nothing). commit commits it; done ends it (rolls back what is not committed, and
// lets the writer go).
func (db *DB) beginCatchUp(ctx context.Context) (tx conn, wctx context.Context, commit func() error, done func(), err error) {
	raw, leave, err := db.beginWriter(ctx)
	if err != nil {
		return conn{}, nil, nil, nil, err
	}
	commit = func() error {
		if err := raw.Commit(); err != nil {
			return db.NoSpace(err)
		}
		db.committed() // a commit ends a disk-full episode, as a request's write does
		db.commits.Add(1)
		return nil
	}
	done = func() {
		raw.Rollback()
		leave()
	}
	return conn{raw, db.dia}, context.WithoutCancel(ctx), commit, done, nil
}

// nextChunk is how many rows the next chunk of a catch-up batch indexes: as many as
// fit in left at the time per row the last chunk (k rows in took) showed, from 1 to
// catchUpChunkRows.
func nextChunk(took time.Duration, k int, left time.Duration) int {
	if k <= 0 || left <= 0 {
		return 1
	}
	per := took / time.Duration(k)
	if per <= 0 {
		return catchUpChunkRows
	}
	return max(1, min(catchUpChunkRows, int(left/per)))
}

// CatchUpSearch indexes every row listed for the search index now, a batch per
// transaction (as the background catch-up does, without pausing), and returns how
// many rows it indexed. Rows listed meanwhile by other writers are indexed too. On
// PostgreSQL, whose engine maintains its index in every write, it does nothing.
func (db *DB) CatchUpSearch(ctx context.Context) (int64, error) {
	var total int64
	if db.dia.searchBacklog == "" || db.readOnly { // the engine's own index, or read-only
		return 0, nil
	}
	for {
		n, err := db.indexBatch(ctx, catchUpBatchRows)
		if err != nil {
			return total, fmt.Errorf("search index: %w", err)
		}
		if n == 0 {
			// As the background catch-up does once the list is empty (searchmerge.go).
			return total, db.mergeAll(ctx)
		}
		total += int64(n)
	}
}

// SearchLag is how far the search index is behind the data.
type SearchLag struct {
	// Rows is the number of rows listed and not yet indexed.
	Rows int64
	// Since is a moment before which none of them was listed: the last time this
	// process saw the list empty (its catch-up emptied it, or a search, the catch-up or
	// SearchLag found it so), or when it opened the database. Zero when none is
	// listed. The list keeps ids only (a clock read per listed row was about a third
	// of what listing costs a write), so the age of the oldest listed row is at most
	// time.Since(Since), not exactly that; except for rows listed before the process
	// opened the database, which count from the open until the list is seen empty.
	Since time.Time
}

// SearchLag reads how far the search index lags. PostgreSQL's engine maintains its
// index in every write: it never lags (zero).
func (db *DB) SearchLag(ctx context.Context) (SearchLag, error) {
	var lag SearchLag
	if db.dia.searchLag == "" {
		return lag, nil
	}
	seen := time.Now()
	if err := db.reader().queryRowContext(ctx, db.dia.searchLag).Scan(&lag.Rows); err != nil {
		return lag, fmt.Errorf("search index lag: %w", err)
	}
	if lag.Rows == 0 {
		db.sawSearchListEmpty(seen)
		return lag, nil
	}
	lag.Since = time.Unix(0, db.searchEmptyAt.Load())
	return lag, nil
}

// sawSearchListEmpty records that the list of rows to index was empty at t (a time
// taken before the read that found it empty began, or before the commit that emptied
// it): every row listed later was listed after t. A later moment replaces an earlier.
func (db *DB) sawSearchListEmpty(t time.Time) {
	ns := t.UnixNano()
	for {
		old := db.searchEmptyAt.Load()
		if ns <= old || db.searchEmptyAt.CompareAndSwap(old, ns) {
			return
		}
	}
}

// SearchIndexed is the number of rows this process's catch-up has indexed since it
// opened the database: its rate is the catch-up's.
func (db *DB) SearchIndexed() int64 { return db.searchIndexed.Load() }
