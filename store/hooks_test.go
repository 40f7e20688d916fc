package store

import (
	"context"
	"database/sql"
)

// ExecInTx runs one statement in tx as written, for tests of package store_test that
// must hold a transaction of their own open around raw writes (a commit canceled
// midway). Only the store's tests see it.
func ExecInTx(ctx context.Context, tx *Tx, query string, args ...any) error {
	if err := tx.rawListing(ctx); err != nil { // as Migration.Exec
		return err
	}
	_, err := tx.execContext(ctx, query, args...)
	return err
}

// SetRestoreBeforeCommit makes every later RestorePostgres call f just before its
// last check for other sessions and its commit (nil: nothing).
func SetRestoreBeforeCommit(f func()) { restoreBeforeCommit = f }

// SetOnEvents replaces db's Options.OnEvents (tests opened by the kit).
func SetOnEvents(db *DB, f func(recorded int)) { db.onEvents = f }

// SetMaxDueQueues bounds the event queues db's claims look at (tests reach the
// bound with few rules).
func SetMaxDueQueues(db *DB, n int) { db.maxDueQueues = n }

// TxEventStats are the statements tx counted in its writes and those it ran to learn
// its event rules.
func TxEventStats(tx *Tx) (writes, ruleReads int) { return tx.writes, tx.events.reads }

// QueryRowInTx runs a one-row query in tx, for tests that look inside a transaction
// before it ends.
func QueryRowInTx(ctx context.Context, tx *Tx, query string, args ...any) *sql.Row {
	return tx.queryRowContext(ctx, query, args...)
}
