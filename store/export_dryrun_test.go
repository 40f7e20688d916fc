package store

import (
	"context"
	"database/sql"

	"dataservice/store/model"
)

// DryRunWork runs a dry-run load of entries on db and returns its result with the
// work it did: the snapshot rows it looked up or read and the statements it ran in
// its private database (copies and the load's own writes).
func DryRunWork(ctx context.Context, db *DB, entries []*model.Entry, opts LoadOptions) (*LoadResult, int, int, error) {
	opts.DryRun = true
	d, err := newDryRun(ctx, db)
	if err != nil {
		return nil, 0, 0, err
	}
	defer d.close()
	res, _, err := d.priv.loadStream(ctx, func(yield func(*model.Entry) error) error {
		for _, e := range entries {
			if err := yield(e); err != nil {
				return err
			}
		}
		return nil
	}, opts, d)
	writes := 0
	if d.tx != nil {
		writes = d.tx.writes
	}
	return res, d.lookups, writes, err
}

// SetMaxDryKeys lowers the number of keys a dry run on db remembers in memory, for a
// test (zero: the default bound).
func SetMaxDryKeys(db *DB, n int) { db.maxDryKeys = n }

// DryRunTx runs fn in a dry run's transaction on its private database, as a dry-run
// load runs its entries (rows copied from db's snapshot on first use), then rolls it
// back.
func DryRunTx(ctx context.Context, db *DB, fn func(tx *Tx) error) error {
	d, err := newDryRun(ctx, db)
	if err != nil {
		return err
	}
	defer d.close()
	tx, err := d.priv.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	tx.dry, d.tx = d, tx
	return fn(tx)
}

// AddressOf is db's address: a PostgreSQL URL with its password (Path shows none),
// or the file's path.
func AddressOf(db *DB) string { return db.addr }

// CloseIdle closes db's idle connections, so that no session of db is on its
// database while nothing runs (a PostgreSQL database is copied as a template only
// then); later statements open connections again.
func CloseIdle(db *DB) {
	for _, p := range []*sql.DB{db.w, db.r} {
		n := p.Stats().MaxOpenConnections
		p.SetMaxIdleConns(0)
		p.SetMaxIdleConns(max(n, 1))
	}
}

// SetSearchSeen makes every later indexed search on db give fn its page's query and
// arguments before running it (nil: none).
func SetSearchSeen(db *DB, fn func(query string, args []any)) { db.searchSeen = fn }

// SetSearchBacklogLimit makes searches on db read every row once more than n rows wait
// for the search index (SearchBacklogLimit's test bound).
func SetSearchBacklogLimit(db *DB, n int64) { db.searchLimit = n }

// SetMergeAfter makes the search index's catch-up merge it whole after n rows indexed
// instead of mergeAfterRows (tests reach it with few rows).
func SetMergeAfter(db *DB, n int64) { db.mergeAfter.Store(n) }
