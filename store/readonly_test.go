package store_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// TestOpenReadOnly: ReadOnly reads an existing file, refuses writes, creates nothing
// for a missing path and leaves the file's bytes as they were.
func TestOpenReadOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ro.db")
	db, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetRegistry(ctx, store.RegDBVersion, "4.9.0"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	testkit.ExecFile(t, path, "INSERT INTO instances_search_dirty(id) VALUES(424242)") // a row the index lags behind
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	opened := time.Now()
	ro, err := store.Open(ctx, path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := ro.Registry(ctx, store.RegDBVersion); err != nil || v != "4.9.0" {
		t.Fatalf("read: %q %v", v, err)
	}
	// The lag of a read-only open counts from the open, as a writable open's does.
	if lag, err := ro.SearchLag(ctx); err != nil || lag.Rows != 1 || lag.Since.Before(opened) || lag.Since.After(time.Now()) {
		t.Fatalf("read-only search lag %+v, %v: want 1 row, since the open at %v", lag, err, opened)
	}
	if err := ro.SetRegistry(ctx, store.RegDBVersion, "5.0.0"); err == nil {
		t.Fatal("a write through a read-only open succeeded")
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(path)
	if string(before) != string(after) {
		t.Fatal("the read-only open changed the file")
	}

	missing := filepath.Join(t.TempDir(), "missing.db")
	if _, err := store.Open(ctx, missing, store.Options{ReadOnly: true}); err == nil {
		t.Fatal("read-only open of a missing file succeeded")
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("read-only open created %s", missing)
	}
}
