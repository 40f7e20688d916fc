package store

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"
)

// sqliteLockStartup is SQLite's start-up lock: an exclusive flock(2) on the file
// `<db>.lock` beside the database (created if missing, owner-only), polled until it
// is free or ctx ends. A lock file of its own, not the database file, so the lock is
// independent of SQLite's locks and of the in-use lock (inuse.go).
func sqliteLockStartup(ctx context.Context, db *DB) (func(), error) {
	path := db.path + ".lock"
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
