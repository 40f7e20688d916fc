package store

import "context"

// LockStartup takes the database's start-up lock, waiting until it is free or ctx
// ends, and returns the func that releases it. Every process runs its start-up
// sequence (bootstrap, configuration, migrations) under it: of several processes or
// nodes starting on one new database, exactly one bootstraps and migrates while the
// others wait, then find the work done. It is independent of the write transactions'
// lock, so writes of serving processes go on while a start-up waits.
func (db *DB) LockStartup(ctx context.Context) (unlock func(), err error) {
	return db.dia.lockStartup(ctx, db)
}
