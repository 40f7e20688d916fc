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

// SearchListSQL is SQLite's statement listing the instance ids of the JSON array `?`
// for the search index (staged ones made stale): the one statement a transaction that
// updated instances runs before it commits. Benchmarks' floors run it too.
const SearchListSQL = `INSERT INTO instances_search_dirty(id) SELECT value FROM json_each(?) WHERE true
	ON CONFLICT(id) DO UPDATE SET staged = 2 WHERE staged = 1`

// listForSearch notes instance ids this transaction updated, for the search index.
// Nothing where the engine maintains its index in every write (PostgreSQL).
func (tx *Tx) listForSearch(ids ...int64) {
	if tx.db.dia.listSearch != "" && !tx.db.unlisted {
		tx.searchListed = append(tx.searchListed, ids...)
	}
}

// listWhereForSearch lists for the search index, at once, the instances that where
// (with args) selects: what a statement about to update many rows of a class (a
// field's deletion) lists, with its own condition, before it runs.
func (tx *Tx) listWhereForSearch(ctx context.Context, where string, args ...any) error {
	if tx.db.dia.listSearch == "" || tx.db.unlisted {
		return nil
	}
	if _, err := tx.execContext(ctx, `INSERT INTO instances_search_dirty(id) SELECT id FROM instances WHERE `+where+`
		ON CONFLICT(id) DO UPDATE SET staged = 2 WHERE staged = 1`, args...); err != nil {
		return fmt.Errorf("list instances for the search index: %w", err)
	}
	return nil
}

// rawListingTrigger lists for the search index the rows a statement written as is
// (Migration.Exec) updates: a trigger of the transaction's connection alone (TEMP),
// created at its first such statement and dropped before it commits (a rollback undoes
// it with the rest), so the store's own updates never run it.
const rawListingTrigger = `CREATE TEMP TRIGGER search_list_update AFTER UPDATE OF id, keyname, displayname, data
	ON main.instances BEGIN
	INSERT INTO instances_search_dirty(id) VALUES(NEW.id) ON CONFLICT(id) DO UPDATE SET staged = 2 WHERE staged = 1;
END`

// rawListing makes the statements the transaction runs as written list the rows they
// update (rawListingTrigger), once per transaction.
func (tx *Tx) rawListing(ctx context.Context) error {
	if tx.db.dia.listSearch == "" || tx.db.unlisted || tx.rawListed {
		return nil
	}
	if _, err := tx.execContext(ctx, rawListingTrigger); err != nil {
		return fmt.Errorf("list updates for the search index: %w", err)
	}
	tx.rawListed = true
	return nil
}

// flushSearchListed lists the ids listForSearch noted, in one statement (a JSON array:
// one argument whatever their number).
func (tx *Tx) flushSearchListed() error {
	if tx.rawListed {
		if _, err := tx.execContext(tx.began, "DROP TRIGGER temp.search_list_update"); err != nil {
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
// their own statement (SearchListSQL): searches no longer see those updates otherwise.
// Never for a database in service.
func (db *DB) UnlistedUpdatesForTest() { db.unlisted = true }
