package store

import (
	"context"
	"fmt"
	"strconv"
)

// Listing updated rows for the search index (SQLite, layout 20). Triggers list the
// instances an INSERT or a DELETE writes, whoever writes (dataservice or SQL outside
// it), but not an UPDATE's: a trigger that fires for every updated row cost a pipeline
// run about a fifth of its rate at a million instances (SQLite runs the trigger's
// program and keeps a statement journal for every UPDATE), so the store lists the
// instances it updates itself, in the same transaction, with one statement just
// before it commits. Every statement of the store that updates instances calls
// listForSearch (TestEveryInstanceUpdateIsListed checks it). An id listed twice, or
// one whose update a savepoint rolled back, is indexed again as it is: listing too
// much costs an indexing, never exactness. An UPDATE of instances made outside
// dataservice must list its rows itself (docs/operations.md, "The search index").

// listForSearch notes instance ids this transaction updated, for the search index.
// Nothing where the engine maintains its index in every write (PostgreSQL).
func (tx *Tx) listForSearch(ids ...int64) {
	if tx.db.dia.listSearch != "" && !tx.db.unlisted.Load() {
		tx.searchListed = append(tx.searchListed, ids...)
	}
}

// listWhereForSearch lists for the search index, at once, the instances that where
// (with args) selects: what a statement about to update many rows of a class (a
// field's deletion) lists, with its own condition, before it runs.
func (tx *Tx) listWhereForSearch(ctx context.Context, where string, args ...any) error {
	if tx.db.dia.listSearch == "" || tx.db.unlisted.Load() {
		return nil
	}
	if _, err := tx.execContext(ctx, fmt.Sprintf(tx.db.dia.listSearchWhere, where), args...); err != nil {
		return fmt.Errorf("list instances for the search index: %w", err)
	}
	return nil
}

// rawListing makes the statements the transaction runs as written list the rows they
// update, once per transaction: a trigger of the transaction's connection alone
// (TEMP, the dialect's rawListingOn), dropped before it commits (rawListingOff; a
// rollback undoes it with the rest), so the store's own updates never run it.
func (tx *Tx) rawListing(ctx context.Context) error {
	if tx.db.dia.listSearch == "" || tx.db.unlisted.Load() || tx.rawListed {
		return nil
	}
	if _, err := tx.execContext(ctx, tx.db.dia.rawListingOn); err != nil {
		return fmt.Errorf("list updates for the search index: %w", err)
	}
	tx.rawListed = true
	return nil
}

// flushSearchListed lists the ids listForSearch noted, in one statement (a JSON array:
// one argument whatever their number).
func (tx *Tx) flushSearchListed() error {
	if tx.rawListed {
		if _, err := tx.execContext(tx.began, tx.db.dia.rawListingOff); err != nil {
			return fmt.Errorf("list updates for the search index: %w", err)
		}
		tx.rawListed = false
	}
	if len(tx.searchListed) == 0 {
		return nil
	}
	buf := make([]byte, 0, 8*len(tx.searchListed)+2)
	buf = append(buf, '[')
	for i, id := range tx.searchListed {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = strconv.AppendInt(buf, id, 10)
	}
	buf = append(buf, ']')
	tx.searchListed = tx.searchListed[:0]
	if _, err := tx.execContext(tx.began, tx.db.dia.listSearch, string(buf)); err != nil {
		return fmt.Errorf("list updated instances for the search index: %w", err)
	}
	return nil
}

// UnlistedUpdatesForTest stops the store listing the instances it updates, for
// benchmarks measuring what writes cost without the search index
// (testkit.DropSearchIndex, which drops the triggers too) and floors that list with
// their own statement (SearchListSQL, search_sqlite.go): searches no longer see those
// updates otherwise. Never for a database in service.
func (db *DB) UnlistedUpdatesForTest() { db.unlisted.Store(true) }
