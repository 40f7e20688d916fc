package store_test

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"dataservice/store"
)

// rawFile opens the SQLite file at path with SQL of the test's own, in WAL mode, and
// gives it a registry holding dbVersion (none when empty) and a table of n rows.
func rawFile(t *testing.T, path, dbVersion string, n int) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		"CREATE TABLE registry (key TEXT PRIMARY KEY, value TEXT)",
		"CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT)",
		"CREATE INDEX item_name ON item(name)",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if dbVersion != "" {
		if _, err := db.Exec("INSERT INTO registry VALUES (?, ?)", store.RegDBVersion, dbVersion); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if _, err := db.Exec("INSERT INTO item (name) VALUES (?)", strings.Repeat("x", i%7)); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// fileCount runs a count query on the file at path, read-only.
func fileCount(t *testing.T, path, query string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCopyFileIncludesTheWALAndChecksTheVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "src.db")
	rawFile(t, src, "4.9.0", 50) // left open: the rows are in the WAL only
	if st, err := os.Stat(src + "-wal"); err != nil || st.Size() == 0 {
		t.Fatalf("the source has no WAL to include: %v", err)
	}
	dest := filepath.Join(dir, "copy.db")
	if err := os.WriteFile(dest, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := store.CopyFile(ctx, src, dest); err != nil {
		t.Fatal(err)
	}
	if got, want := fileCount(t, dest, "SELECT count(*) FROM item"), 50; got != want {
		t.Fatalf("copy has %d rows, want %d", got, want)
	}
	dbv, err := store.CheckFileVersion(ctx, dest)
	if err != nil || dbv != "4.9.0" {
		t.Fatalf("CheckFileVersion = %q, %v; want 4.9.0", dbv, err)
	}
}

func TestCheckFileVersionRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	t.Run("no DB_VERSION", func(t *testing.T) {
		path := filepath.Join(dir, "noversion.db")
		rawFile(t, path, "", 1).Close()
		if _, err := store.CheckFileVersion(ctx, path); err == nil || !strings.Contains(err.Error(), "no DB_VERSION in its registry") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("no registry", func(t *testing.T) {
		path := filepath.Join(dir, "noregistry.db")
		db := rawFile(t, path, "4.9.0", 1)
		if _, err := db.Exec("DROP TABLE registry"); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if _, err := store.CheckFileVersion(ctx, path); err == nil || !strings.Contains(err.Error(), "registry not readable") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("not a database", func(t *testing.T) {
		path := filepath.Join(dir, "garbage.db")
		if err := os.WriteFile(path, []byte(strings.Repeat("not sqlite ", 500)), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := store.CheckFileVersion(ctx, path); err == nil {
			t.Fatal("a file of text passed")
		}
	})
}

func TestClearStatisticsEmptiesThePlannerTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "stats.db")
	db := rawFile(t, path, "4.9.0", 20)
	if _, err := db.Exec("ANALYZE"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	stats := "SELECT count(*) FROM sqlite_stat1"
	if fileCount(t, path, "SELECT count(*) FROM sqlite_schema WHERE name = 'sqlite_stat4'") == 1 {
		stats = "SELECT (SELECT count(*) FROM sqlite_stat1) + (SELECT count(*) FROM sqlite_stat4)"
	}
	before := fileCount(t, path, stats)
	if before == 0 {
		t.Fatal("ANALYZE wrote no statistics")
	}
	n, err := store.ClearStatistics(ctx, path)
	if err != nil || n != int64(before) {
		t.Fatalf("ClearStatistics = %d, %v; want %d", n, err, before)
	}
	if got := fileCount(t, path, stats); got != 0 {
		t.Fatalf("%d statistics rows left", got)
	}
	if n, err := store.ClearStatistics(ctx, path); err != nil || n != 0 {
		t.Fatalf("second ClearStatistics = %d, %v; want 0", n, err)
	}
	if got := fileCount(t, path, "SELECT count(*) FROM item"); got != 20 {
		t.Fatalf("the data changed: %d rows", got)
	}
}

func TestCheckpointFileLeavesTheFileCompleteOnItsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "cur.db")
	rawFile(t, path, "4.9.0", 30) // left open and idle, as a WAL that was never folded in
	if err := store.CheckpointFile(ctx, path); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path + "-wal"); err == nil && st.Size() != 0 {
		t.Fatalf("WAL still holds %d bytes", st.Size())
	}
	// The main file alone, without its WAL, holds every row.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	alone := filepath.Join(dir, "alone.db")
	if err := os.WriteFile(alone, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := fileCount(t, alone, "SELECT count(*) FROM item"); got != 30 {
		t.Fatalf("the file alone has %d rows, want 30", got)
	}
}
