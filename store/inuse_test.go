package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"dataservice/store"
)

func TestInUseLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "inuse.db")
	a, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Two opens share the lock.
	b, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatalf("second open: %v", err)
	}
	if _, err := store.LockExclusive(path); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("exclusive lock while open: %v, want ErrInUse", err)
	}
	a.Close()
	if _, err := store.LockExclusive(path); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("exclusive lock while still open once: %v, want ErrInUse", err)
	}
	b.Close()
	unlock, err := store.LockExclusive(path)
	if err != nil {
		t.Fatalf("exclusive lock once closed: %v", err)
	}
	// An open waits while the exclusive lock is held; a cancelled wait fails cleanly.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := store.Open(cctx, path, store.Options{}); err == nil {
		t.Fatal("open succeeded while a restore held the lock")
	}
	unlock()
	c, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatalf("open after the restore: %v", err)
	}
	c.Close()
}
