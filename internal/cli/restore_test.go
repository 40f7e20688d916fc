package cli

import (
	"context"
	"database/sql"
	"dataservice/internal/testkit"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"dataservice/store"
)

// sqlText runs one query on the database file at path and returns the first column.
func sqlText(t *testing.T, path, query string) string {
	t.Helper()
	db, err := sql.Open("sqlite", sqliteDSN(path, "mode=ro"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v string
	if err := db.QueryRow(query).Scan(&v); err != nil {
		t.Fatalf("%s on %s: %v", query, path, err)
	}
	return v
}

func loadVMs(t *testing.T, env map[string]string, prefix string, n int) {
	t.Helper()
	var doc strings.Builder
	doc.WriteString("- {classname: _schema, keyname: vm, ram: {dataformat: int}}\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&doc, "- {classname: vm, keyname: %s%03d, ram: %d}\n", prefix, i, i)
	}
	file := filepath.Join(t.TempDir(), prefix+".yml")
	if err := os.WriteFile(file, []byte(doc.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, env, "load", file); code != 0 {
		t.Fatalf("load %s: %s", prefix, stderr)
	}
}

// leftovers lists the restore's temporary files beside the database.
func leftovers(t *testing.T, dbPath string) []string {
	m, _ := filepath.Glob(dbPath + ".restore.*")
	b, _ := filepath.Glob(dbPath + ".before-restore.*")
	return append(m, b...)
}

func TestRestoreSwapsKeepsTheCurrentFileAndMigratesAtNextStart(t *testing.T) {
	testkit.SQLiteOnly(t, "restore checks and swaps an SQLite file (VACUUM INTO copies, integrity_check, crafted sqlite_schema objects); a PostgreSQL database is restored with pg_restore")
	t.Parallel()
	env := migratedEnv(t)
	dbPath := env["SERVICE_DB"]
	loadVMs(t, env, "a", 10)
	backup := filepath.Join(t.TempDir(), "old.bak")
	if code, _, stderr := runCLI(t, env, "backup", backup); code != 0 {
		t.Fatalf("backup: %s", stderr)
	}
	// The backup claims an older data version: the next start must run the 4.9.0 block.
	bdb, err := sql.Open("sqlite", sqliteDSN(backup, ""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bdb.Exec("UPDATE registry SET value = '4.8.0' WHERE key = 'DB_VERSION'"); err != nil {
		t.Fatal(err)
	}
	bdb.Close()
	loadVMs(t, env, "b", 5)

	code, stdout, stderr := runCLI(t, env, "restore", backup)
	if code != 0 {
		t.Fatalf("restore: %d %s", code, stderr)
	}
	kept, _ := filepath.Glob(dbPath + ".before-restore.*")
	if len(kept) != 1 || !strings.Contains(stdout, kept[0]) {
		t.Fatalf("before-restore files %v; output %s", kept, stdout)
	}
	if got := sqlText(t, kept[0], "SELECT count(*) FROM instances WHERE classname = 'vm'"); got != "15" {
		t.Errorf("kept file has %s vm instances, want 15 (its WAL folded in)", got)
	}
	if got := sqlText(t, dbPath, "SELECT count(*) FROM instances WHERE classname = 'vm'"); got != "10" {
		t.Errorf("restored database has %s vm instances, want 10", got)
	}
	if got := sqlText(t, dbPath, "SELECT value FROM registry WHERE key = 'DB_VERSION'"); got != "4.8.0" {
		t.Errorf("restored DB_VERSION %s before the next start", got)
	}
	if m, _ := filepath.Glob(dbPath + ".restore.*"); len(m) != 0 {
		t.Errorf("temporary files left: %v", m)
	}
	if !strings.Contains(stdout, "migrates it from 4.8.0 to 4.9.0") {
		t.Errorf("output does not say the next start migrates: %s", stdout)
	}
	env["SERVICE_LOG_LEVEL"] = "info"
	code, _, stderr = runCLI(t, env, "migrate")
	if code != 0 || !strings.Contains(stderr, "block=4.9.0") {
		t.Fatalf("migrate after restore: %d %s", code, stderr)
	}
	if got := sqlText(t, dbPath, "SELECT value FROM registry WHERE key = 'DB_VERSION'"); got != "4.9.0" {
		t.Errorf("DB_VERSION after the start: %s", got)
	}
	if got := sqlText(t, dbPath, "PRAGMA integrity_check"); got != "ok" {
		t.Errorf("integrity: %s", got)
	}
}

func TestRestoreRefusesWhileTheDatabaseIsOpen(t *testing.T) {
	testkit.SQLiteOnly(t, "restore checks and swaps an SQLite file (VACUUM INTO copies, integrity_check, crafted sqlite_schema objects); a PostgreSQL database is restored with pg_restore")
	t.Parallel()
	env := migratedEnv(t)
	dbPath := env["SERVICE_DB"]
	loadVMs(t, env, "a", 3)
	backup := filepath.Join(t.TempDir(), "x.bak")
	if code, _, stderr := runCLI(t, env, "backup", backup); code != 0 {
		t.Fatalf("backup: %s", stderr)
	}
	loadVMs(t, env, "b", 2)
	db, err := store.Open(context.Background(), dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, env, "restore", backup)
	if code != 1 || !strings.Contains(stderr, "in use") {
		t.Fatalf("restore with the database open: %d %s", code, stderr)
	}
	db.Close()
	if got := sqlText(t, dbPath, "SELECT count(*) FROM instances WHERE classname = 'vm'"); got != "5" {
		t.Errorf("database changed by a refused restore: %s vm instances", got)
	}
	if l := leftovers(t, dbPath); len(l) != 0 {
		t.Errorf("files left by a refused restore: %v", l)
	}
	// A server holds it too: serve in this process, then restore is refused.
	_, _, stop := servingProcess(t, env)
	code, _, stderr = runCLI(t, env, "restore", backup)
	if code != 1 || !strings.Contains(stderr, "in use") {
		t.Fatalf("restore while serving: %d %s", code, stderr)
	}
	stop()
	if code, _, stderr = runCLI(t, env, "restore", backup); code != 0 {
		t.Fatalf("restore after the server stopped: %s", stderr)
	}
}

func TestRestoreRefusesBadCopies(t *testing.T) {
	testkit.SQLiteOnly(t, "restore checks and swaps an SQLite file (VACUUM INTO copies, integrity_check, crafted sqlite_schema objects); a PostgreSQL database is restored with pg_restore")
	t.Parallel()
	env := migratedEnv(t)
	dbPath := env["SERVICE_DB"]
	loadVMs(t, env, "a", 200)
	good := filepath.Join(t.TempDir(), "good.bak")
	if code, _, stderr := runCLI(t, env, "backup", good); code != 0 {
		t.Fatalf("backup: %s", stderr)
	}
	dir := t.TempDir()
	variant := func(name string, change func(path string)) string {
		p := filepath.Join(dir, name)
		b, err := os.ReadFile(good)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		change(p)
		return p
	}
	execOn := func(q string) func(string) {
		return func(p string) {
			db, err := sql.Open("sqlite", sqliteDSN(p, ""))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct{ name, file, want string }{
		{"newer", variant("newer.bak", execOn("UPDATE registry SET value = '9.0.0' WHERE key = 'DB_VERSION'")), "newer than this code"},
		// Newer by the numbers, as every command judges it, though older as text.
		{"newer minor", variant("newer10.bak", execOn("UPDATE registry SET value = '4.10.0' WHERE key = 'DB_VERSION'")), "newer than this code"},
		{"no version", variant("nover.bak", execOn("DELETE FROM registry WHERE key = 'DB_VERSION'")), "not a dataservice database"},
		{"no registry", variant("noreg.bak", execOn("DROP TABLE registry")), "registry not readable"},
		{"not sqlite", variant("text.bak", func(p string) { os.WriteFile(p, []byte("hello, not a database\n"), 0o600) }), "cannot be read as an SQLite database"},
		{"corrupt", variant("corrupt.bak", func(p string) {
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			st, _ := f.Stat()
			junk := []byte(strings.Repeat("\xff\x00junk", 512))
			for off := int64(8192); off+int64(len(junk)) < st.Size(); off += 16384 {
				f.WriteAt(junk, off)
			}
			f.Close()
		}), "malformed"},
		{"missing", filepath.Join(dir, "missing.bak"), "no such file"},
	}
	before := sqlText(t, dbPath, "SELECT count(*) FROM instances")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, env, "restore", c.file)
			if code != 1 || !strings.Contains(stderr, c.want) {
				t.Fatalf("restore %s: %d %q, want exit 1 naming %q", c.name, code, stderr, c.want)
			}
			if testing.Verbose() {
				t.Log(stderr)
			}
			if got := sqlText(t, dbPath, "SELECT count(*) FROM instances"); got != before {
				t.Fatalf("database changed: %s instances, was %s", got, before)
			}
			if l := leftovers(t, dbPath); len(l) != 0 {
				t.Fatalf("files left: %v", l)
			}
		})
	}
}

// sqliteDSN is the connection string of the SQLite file at path with the query given,
// for the tests that read or change a file with SQL of their own.
func sqliteDSN(path string, query string) string {
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + query
}
