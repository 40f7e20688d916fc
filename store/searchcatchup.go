package store

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// The search index's catch-up: a background loop that indexes the rows writes
// listed (searchindex.go), so that no write pays for the index in its own
// transaction. serve runs it on every node of a SQLite file; a command that writes
// and exits leaves its rows listed for the next serve (searches stay exact
// meanwhile). PostgreSQL's engine maintains its index in every write: nothing runs.

// catchUpIdle is how often an idle catch-up looks at the list without being woken:
// rows listed by another process (a CLI load beside the server) wake nobody here.
const catchUpIdle = time.Second

// catchUpPause is the pause between two batches: the writer is free for that long, so
// a request's write waiting for it begins before the next batch does.
const catchUpPause = 2 * time.Millisecond

// wakeCatchUp tells the catch-up that a commit may have listed rows.
func (db *DB) wakeCatchUp() {
	select {
	case db.searchWake <- struct{}{}:
	default:
	}
}

// RunSearchCatchUp stages and indexes listed rows, and merges the index after a
// backlog (searchmerge.go), until ctx ends: a batch per transaction
// (catchUpBatchRows), each through the turnstile like any write, with a pause between
// batches so other writers go first; when the list is empty it waits for a commit of
// this process or catchUpIdle. An error is logged and retried after a pause: the index
// stays exact meanwhile (searches check the listed rows). It returns at once where
// the engine maintains its index (PostgreSQL) or the database is read-only.
func (db *DB) RunSearchCatchUp(ctx context.Context, log *slog.Logger) {
	if db.dia.searchBacklog == "" || db.readOnly {
		return
	}
	if log == nil {
		log = db.log
	}
	// sleep waits d, or less when woken (a nil wake never is); false when ctx ended.
	sleep := func(d time.Duration, wake <-chan struct{}) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-wake:
			return true
		case <-t.C:
			return true
		}
	}
	wait := func(d time.Duration) bool { return sleep(d, db.searchWake) }
	pause := func() bool { return sleep(catchUpPause, nil) }
	failing := false
	for ctx.Err() == nil {
		// Stage the newest listed rows (searchstage.go), then index the oldest, with
		// the pause between the two writes as between batches. Indexing goes on when
		// staging fails (at the pace of a failing catch-up): staging only makes searches
		// cheaper.
		staged, serr := db.stageBatch(ctx, catchUpBatchRows, catchUpBatchRows)
		if staged > 0 && !pause() {
			return
		}
		n, err := db.indexBatch(ctx, catchUpBatchRows)
		if n == 0 && staged == 0 && err == nil && serr == nil && db.mergeDue(ctx) {
			// Nothing listed: merge the index if a backlog made it many segments
			// (searchmerge.go), a transaction a round, indexing first whenever rows
			// are listed meanwhile.
			var more bool
			if more, err = db.mergeStep(ctx); more {
				n = 1 // a round that wrote: pause, then look again
			}
		}
		n += staged
		err = errors.Join(serr, err)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			if !failing {
				log.Error("search index catch-up", "error", err)
				failing = true
			}
			if !wait(catchUpIdle) {
				return
			}
		case n == 0:
			if failing {
				log.Info("search index catch-up works again")
				failing = false
			}
			if !wait(catchUpIdle) {
				return
			}
		default:
			failing = false
			if !pause() {
				return
			}
		}
	}
}

// backlogLimit is SearchBacklogLimit, or the test's bound.
func (db *DB) backlogLimit() int64 {
	if db.searchLimit > 0 {
		return db.searchLimit
	}
	return SearchBacklogLimit
}

// searchFellBack records that a search read every row of its schema because rows
// listed number more than SearchBacklogLimit, and logs it once per episode.
func (db *DB) searchFellBack(listed int64) {
	if db.searchScanning.CompareAndSwap(false, true) {
		// listed is counted up to the limit and one more: the backlog is at least that.
		db.log.Warn("search reads every row of its schema: the search index lags too far behind",
			"rows_behind_at_least", listed, "limit", db.backlogLimit())
	}
}

// searchIndexUsable records that a search could use the index again, ending an
// episode of searchFellBack.
func (db *DB) searchIndexUsable(listed int64) {
	if db.searchScanning.Load() && db.searchScanning.CompareAndSwap(true, false) {
		db.log.Info("search uses the search index again", "rows_behind", listed)
	}
}
