package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// The in-use lock: every process that has the database open holds a shared flock(2) on
// the database file itself (independent of SQLite's own fcntl locks); a restore takes it
// exclusively, so it never swaps the file under an open process, and a process opening
// the database while a restore runs waits for it.

// ErrInUse means the database file is open in another process.
var ErrInUse = errors.New("the database is in use by another process (a server or command has it open)")

// holdShared opens path and takes a shared lock on it, waiting while a restore holds it
// exclusively (until ctx ends or 30 s pass). It re-checks that path still names the
// locked file: a restore may have swapped it in the meantime.
func holdShared(ctx context.Context, path string) (*os.File, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if err == nil {
			if same(f, path) {
				return f, nil
			}
			f.Close()
			continue
		}
		f.Close()
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("lock %s: a restore holds the database", path)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// same reports whether the open file f is still the file at path.
func same(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// LockExclusive takes the in-use lock of the database file at path exclusively, without
// waiting: ErrInUse when any process has the database open. The returned func releases it.
func LockExclusive(path string) (func(), error) {
	for {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if err == syscall.EWOULDBLOCK {
				return nil, ErrInUse
			}
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if same(f, path) {
			return func() { f.Close() }, nil
		}
		f.Close()
	}
}
