package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// startupLockKey is the session advisory lock of the start-up sequence; it differs
// from writerLockKey, which every write transaction takes.
const startupLockKey = "7305721195839"

// postgresLockStartup is PostgreSQL's start-up lock: a session advisory lock
// (pg_advisory_lock) on a connection of its own, held until unlock. Not one of the
// pools' connections: the writer pool's one connection must stay free for the
// start-up sequence's own transactions. A node that dies while holding it loses its
// session, and PostgreSQL releases the lock: no stale lock is left behind. The lock
// is a session's, so it needs a direct connection (or PgBouncer's session mode).
func postgresLockStartup(ctx context.Context, db *DB) (func(), error) {
	fail := func(err error) (func(), error) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("start-up lock on %s: %w", db.path, redactErr(err, db.addr))
	}
	c, err := pgx.Connect(ctx, db.dia.dsn(db.addr, false))
	if err != nil {
		return fail(err)
	}
	closeConn := func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Close(cctx)
	}
	var got bool
	if err := c.QueryRow(ctx, "SELECT pg_try_advisory_lock("+startupLockKey+")").Scan(&got); err != nil {
		closeConn()
		return fail(err)
	}
	if !got {
		db.log.Info("another node runs its start-up sequence: waiting for it", "db", db.path)
		// Cancelling ctx cancels the wait on the server (pgx sends a cancel request).
		if _, err := c.Exec(ctx, "SELECT pg_advisory_lock("+startupLockKey+")"); err != nil {
			closeConn()
			return fail(err)
		}
	}
	return func() {
		// Closing the session releases the lock too; unlocking first says so at once
		// should the close be slow.
		uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Exec(uctx, "SELECT pg_advisory_unlock("+startupLockKey+")")
		c.Close(uctx)
	}, nil
}
