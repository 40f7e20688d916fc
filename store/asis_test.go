package store_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// userVersion reads a closed file's store layout version. (The tasks package's
// layout, which store's tests do not link, is checked by the CLI's tests.)
func userVersion(t *testing.T, path string) int {
	t.Helper()
	sdb, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	var have int
	if err := sdb.QueryRow("PRAGMA user_version").Scan(&have); err != nil {
		t.Fatal(err)
	}
	return have
}

// Options.AsIs (commands other than serve and migrate) creates no file and applies no
// table layout step: a file with steps pending is refused with ErrLayoutPending and
// left exactly as it was; a current file opens and reads.
func TestOpenAsIs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("a missing file is not created", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "none.db")
		if db, err := store.Open(ctx, path, store.Options{AsIs: true}); err == nil {
			db.Close()
			t.Fatal("open a missing file as is: got no error")
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("file created (stat err %v)", err)
		}
	})
	current := func(t *testing.T) string {
		path := filepath.Join(t.TempDir(), "x.db")
		db := testkit.Open(t, path, testkit.Options{IgnoreCloseError: true})
		if err := db.SetRegistry(ctx, store.RegLastStart, "x"); err != nil {
			t.Fatal(err)
		}
		db.Close()
		return path
	}
	t.Run("a current file opens", func(t *testing.T) {
		path := current(t)
		db, err := store.Open(ctx, path, store.Options{AsIs: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if v, err := db.Registry(ctx, store.RegLastStart); err != nil || v != "x" {
			t.Fatalf("registry: %q, %v", v, err)
		}
	})
	t.Run("rows left for the search index are not indexed at open", func(t *testing.T) {
		path := current(t)
		testkit.ExecFile(t, path, "INSERT INTO instances_search_dirty(id) VALUES(424242)")
		db, err := store.Open(ctx, path, store.Options{AsIs: true})
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		sdb, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer sdb.Close()
		var n int
		if err := sdb.QueryRow("SELECT count(*) FROM instances_search_dirty").Scan(&n); err != nil || n != 1 {
			t.Fatalf("dirty rows after an as-is open: %d, %v; want the one left (nothing written)", n, err)
		}
	})
	t.Run("store steps pending", func(t *testing.T) {
		path := current(t)
		testkit.ExecFile(t, path, layoutsAfter(9)...)
		db, err := store.Open(ctx, path, store.Options{AsIs: true})
		if err == nil {
			db.Close()
			t.Fatal("open with layout steps pending: got no error")
		}
		if !errors.Is(err, store.ErrLayoutPending) || !strings.Contains(err.Error(), "store 9 of ") {
			t.Fatalf("error %q: want ErrLayoutPending naming store 9", err)
		}
		if v := userVersion(t, path); v != 9 {
			t.Fatalf("layout version changed: 9 -> %d", v)
		}
	})
	t.Run("a newer layout is refused as newer", func(t *testing.T) {
		path := current(t)
		testkit.ExecFile(t, path, "PRAGMA user_version = 999")
		if db, err := store.Open(ctx, path, store.Options{AsIs: true}); err == nil {
			db.Close()
			t.Fatal("open a newer layout: got no error")
		} else if errors.Is(err, store.ErrLayoutPending) || !strings.Contains(err.Error(), "newer") {
			t.Fatalf("error %q does not say the layout is newer", err)
		}
	})
}
