package store

import (
	"context"
	"fmt"
	"time"
)

// Staging (layout 19): a search checks every listed row of its schema exactly, and
// reading a listed instance and running the search's LIKE over it cost about 5 µs a
// row at a million instances: 10,000 rows behind made a search take 50 ms.
// So the catch-up, before indexing, stages listed rows: it indexes a row's keyname,
// displayname and data in instances_search_staged, a small trigram index that keeps
// no text, and sets staged to 1 in the list. A write of a staged row sets it to 2
// (the listing trigger: its entry is stale), so the staged index answers for a row
// only as committed: a search asks it for candidates among the rows staged 1 and reads
// only those (LIKE deciding, as with the main index), and reads every other listed
// row. Indexing a row removes its entry, stale or not.
// A staged row whose instance was deleted has no entry: nothing to find. Staging a row
// in a small index costs far less than indexing it in the main one, and it takes the
// newest listed ids first while indexing takes the oldest, so the two rarely do the
// same row.
//
// The catch-up stages only while more rows are listed than its next batch indexes
// (catchUpBatchRows: below that, the rows are indexed within a batch's time, and
// staging them would be work for nothing) and at most SearchBacklogLimit: above it
// searches read every row of their schema anyway.

// stageChunkFirst is the first chunk of a staging batch; the next ones are sized from
// the time a row took, as the catch-up's are (nextChunk), up to catchUpChunkRows.
const stageChunkFirst = 8

// stageBatch stages up to rows listed rows that are not staged, newest ids first, in
// one write transaction of at most maxBatchTime (whole chunks), when more than above
// and at most SearchBacklogLimit rows are listed, and then no more than are listed
// beyond above. n is how many it staged (0: none waits, or the list is outside those
// bounds).
func (db *DB) stageBatch(ctx context.Context, rows int, above int64) (n int, err error) {
	if len(db.dia.stageListed) == 0 || db.readOnly {
		return 0, nil
	}
	// Read first: nothing to stage (the usual case) takes no writer.
	var listed, waiting int64
	if err := db.reader().queryRowContext(ctx, db.dia.stageWaiting, db.backlogLimit()+1).Scan(&listed, &waiting); err != nil {
		return 0, fmt.Errorf("search staging: %w", err)
	}
	if waiting == 0 || listed <= above || listed > db.backlogLimit() {
		return 0, nil
	}
	// The next index batch takes the oldest above rows: staging them would be work
	// for nothing.
	if above > 0 {
		rows = min(rows, int(listed-above))
	}
	tx, wctx, commit, done, err := db.beginCatchUp(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	began := time.Now()
	chunk := stageChunkFirst
	for n < rows && (n == 0 || time.Since(began) < maxBatchTime) {
		started := time.Now()
		k := min(chunk, rows-n)
		var staged int64
		for i, q := range db.dia.stageListed {
			res, err := tx.execContext(wctx, q, k)
			if err != nil {
				return 0, fmt.Errorf("search staging: %w", err)
			}
			if i == len(db.dia.stageListed)-1 { // the statement that sets staged
				if staged, err = res.RowsAffected(); err != nil {
					return 0, fmt.Errorf("search staging: %w", err)
				}
			}
		}
		if staged == 0 {
			break
		}
		n += int(staged)
		chunk = nextChunk(time.Since(started), int(staged), maxBatchTime-time.Since(began))
	}
	if n == 0 {
		return 0, nil
	}
	if err := commit(); err != nil {
		return 0, err
	}
	return n, nil
}

// StageSearch stages every listed row not staged yet (while SearchBacklogLimit rows or
// fewer are listed), a batch per transaction, as the background catch-up does before
// it indexes, and returns how many rows it staged. It does nothing where the engine
// maintains its index in every write (PostgreSQL).
func (db *DB) StageSearch(ctx context.Context) (int64, error) {
	var total int64
	for {
		n, err := db.stageBatch(ctx, catchUpBatchRows, 0)
		if err != nil {
			return total, err
		}
		if n == 0 {
			return total, nil
		}
		total += int64(n)
	}
}
