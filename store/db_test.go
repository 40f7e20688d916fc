package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
)

func TestOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("a new database gets every table of the documented layout", func(t *testing.T) {
		db := openEmptyDB(t)
		for _, table := range []string{"registry", "configuration", "schemas", "schema_fields", "instances", "permissions", "revisions", "tasks"} {
			if !hasRelation(t, db, "table", table) {
				t.Fatalf("table %s is missing", table)
			}
		}
		if !hasRelation(t, db, "index", "instances_classname_id") {
			t.Fatal("index instances_classname_id is missing")
		}
		if !testkit.Postgres() {
			if got, want := queryString(t, db, "PRAGMA journal_mode"), "wal"; got != want {
				t.Fatalf("journal_mode: got %s, want %s", got, want)
			}
		}
	})
	t.Run("reopening keeps the data", func(t *testing.T) {
		addr := testkit.NewAddress(t, "re.db")
		db, err := store.Open(ctx, addr, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.SetRegistry(ctx, store.RegDBVersion, "4.9.0"); err != nil {
			t.Fatal(err)
		}
		db.Close()
		db, err = store.Open(ctx, addr, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if got, err := db.Registry(ctx, store.RegDBVersion); err != nil || got != "4.9.0" {
			t.Fatalf("DB_VERSION after reopen: got %q (%v), want 4.9.0", got, err)
		}
	})
	t.Run("the database, -wal and -shm files are owner-only", func(t *testing.T) {
		testkit.SQLiteOnly(t, "file modes of the database file and its WAL")
		path := filepath.Join(t.TempDir(), "mode.db")
		db, err := store.Open(ctx, path, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.SetRegistry(ctx, store.RegDBVersion, "4.9.0"); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Mode().Perm(); got != 0o600 {
				t.Fatalf("%s: mode %o, want 600", filepath.Base(p), got)
			}
		}
	})
	t.Run("an up-to-date database opens while another connection writes", func(t *testing.T) {
		addr := testkit.NewAddress(t, "busy.db")
		writer, err := store.Open(ctx, addr, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer writer.Close()
		tx, err := writer.BeginAs(ctx, store.Revisions{Author: "test"})
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		// The transaction holds the write lock (SQLite's file lock, PostgreSQL's
		// advisory writer lock); opening must not need it.
		if err := tx.SetRegistry(ctx, store.RegLastStart, "held"); err != nil {
			t.Fatal(err)
		}
		octx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		db, err := store.Open(octx, addr, store.Options{})
		if err != nil {
			t.Fatalf("open while a writer holds the lock: %v", err)
		}
		db.Close()
	})
	t.Run("a directory is refused", func(t *testing.T) {
		testkit.SQLiteOnly(t, "a directory in place of the database file")
		if _, err := store.Open(ctx, t.TempDir(), store.Options{}); err == nil {
			t.Fatal("open a directory: got no error")
		}
	})
	t.Run("an empty path is refused", func(t *testing.T) {
		if _, err := store.Open(ctx, "", store.Options{}); err == nil {
			t.Fatal("open an empty path: got no error")
		}
	})
	t.Run("a newer table layout is refused", func(t *testing.T) {
		addr := testkit.NewAddress(t, "new.db")
		db, err := testkit.OpenStore(t, addr, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if testkit.Postgres() {
			exec(t, db, "UPDATE layout_version SET version = 999")
		} else {
			exec(t, db, "PRAGMA user_version = 999")
		}
		db.Close()
		if db, err := store.Open(ctx, addr, store.Options{}); err == nil {
			db.Close()
			t.Fatal("open a newer layout: got no error")
		} else if !strings.Contains(err.Error(), "newer") {
			t.Fatalf("error %q does not say the layout is newer", err)
		}
	})
	t.Run("a database of another application is refused", func(t *testing.T) {
		addr := testkit.NewAddress(t, "other.db")
		testkit.ExecFile(t, addr, "CREATE TABLE other_app_users (id INTEGER PRIMARY KEY, login TEXT)")
		if db, err := store.Open(ctx, addr, store.Options{}); err == nil {
			db.Close()
			t.Fatal("open a database holding another application's table: got no error")
		} else if !strings.Contains(err.Error(), "other_app_users") {
			t.Fatalf("error %q does not name the foreign table", err)
		}
	})
	t.Run("concurrent opens of a new database all make or find its layout", func(t *testing.T) {
		// Each open applies the pending layout steps or waits for the one that does;
		// none may fail on a table another open just created.
		addr := testkit.NewAddress(t, "race.db")
		const n = 4
		type opened struct {
			db  *store.DB
			err error
		}
		results := make(chan opened, n)
		for range n {
			go func() {
				db, err := store.Open(ctx, addr, store.Options{})
				results <- opened{db, err}
			}()
		}
		for range n {
			r := <-results
			if r.err != nil {
				t.Errorf("concurrent open: %v", r.err)
				continue
			}
			if !hasRelation(t, r.db, "table", "instances") {
				t.Error("an open returned before the layout was made")
			}
			r.db.Close()
		}
	})
}

// hasRelation reports whether the database holds the table or index name: in
// sqlite_master on SQLite, through to_regclass on PostgreSQL.
func hasRelation(tb testing.TB, db *store.DB, kind, name string) bool {
	tb.Helper()
	if testkit.Postgres() {
		return queryInt(tb, db, "SELECT count(*) FROM pg_class WHERE oid = to_regclass(?) AND relkind = ?", name, map[string]string{"table": "r", "index": "i"}[kind]) == 1
	}
	return queryInt(tb, db, "SELECT count(*) FROM sqlite_master WHERE type = ? AND name = ?", kind, name) == 1
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	db := openEmptyDB(t)
	ctx := context.Background()
	_, err := db.Registry(ctx, store.RegInstanceUUID)
	if got, want := store.ErrorCode(err), model.ENotFound; got != want {
		t.Fatalf("missing key: got code %q (%v), want %q", got, err, want)
	}
	if err := db.SetRegistry(ctx, store.RegLastStart, "a"); err != nil {
		t.Fatal(err)
	}
	if err := db.SetRegistry(ctx, store.RegLastStart, "b"); err != nil {
		t.Fatal(err)
	}
	if got, err := db.Registry(ctx, store.RegLastStart); err != nil || got != "b" {
		t.Fatalf("LAST_START: got %q (%v), want b", got, err)
	}
	if got, want := queryInt(t, db, "SELECT count(*) FROM registry"), 1; got != want {
		t.Fatalf("registry rows: got %d, want %d", got, want)
	}
	t.Run("a failed transaction leaves nothing", func(t *testing.T) {
		boom := errors.New("boom")
		err := db.WithTx(ctx, func(tx *store.Tx) error {
			if err := tx.SetRegistry(ctx, store.RegDBVersion, "9"); err != nil {
				return err
			}
			if got, err := tx.Registry(ctx, store.RegDBVersion); err != nil || got != "9" {
				t.Fatalf("inside the transaction: got %q (%v), want 9", got, err)
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("WithTx: got %v, want boom", err)
		}
		if _, err := db.Registry(ctx, store.RegDBVersion); store.ErrorCode(err) != model.ENotFound {
			t.Fatalf("DB_VERSION after rollback: got %v, want not found", err)
		}
	})
}

func TestBackup(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	ctx := context.Background()
	mustLoad(t, db, serverSchema+`- {classname: server, keyname: kept}`, store.LoadOptions{})
	dest := filepath.Join(t.TempDir(), "copy.db")
	if err := db.Backup(ctx, dest); err != nil {
		t.Fatalf("backup: %v", err)
	}
	cp, err := store.Open(ctx, dest, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	instance(t, cp, "server", "kept")
	t.Run("an existing destination is refused", func(t *testing.T) {
		before, _ := os.Stat(dest)
		err := db.Backup(ctx, dest)
		if got, want := store.ErrorCode(err), model.EConflict; got != want {
			t.Fatalf("backup over a file: got code %q (%v), want %q", got, err, want)
		}
		after, _ := os.Stat(dest)
		if !after.ModTime().Equal(before.ModTime()) || after.Size() != before.Size() {
			t.Fatal("existing destination was modified")
		}
	})
}

func TestErrorHelpers(t *testing.T) {
	t.Parallel()
	wrapped := errors.Join(errors.New("context"), model.Errorf(model.EConflict, "taken %d", 7))
	if got, want := store.ErrorCode(wrapped), model.EConflict; got != want {
		t.Fatalf("code: got %q, want %q", got, want)
	}
	if got, want := store.ErrorMessage(wrapped), "taken 7"; got != want {
		t.Fatalf("message: got %q, want %q", got, want)
	}
	plain := errors.New("disk on fire")
	if got, want := store.ErrorCode(plain), model.EInternal; got != want {
		t.Fatalf("plain code: got %q, want %q", got, want)
	}
	if got, want := store.ErrorMessage(plain), "internal error"; got != want {
		t.Fatalf("plain message: got %q, want %q", got, want)
	}
}
