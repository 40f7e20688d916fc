package bootstrap_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"dataservice/bootstrap"
	"dataservice/internal/testkit"
	"dataservice/store"
)

// olderDB is a migrated database put back to DB_VERSION 4.5.0 without p_code_editor
// (block 4.6.0 adds it back), so a start with the test version migrates it; one
// configuration entry is removed, which the configuration sync adds back, so a start
// that changed nothing is told from one that synchronised the configuration.
func olderDB(t *testing.T) (*store.DB, *testkit.Recorder) {
	t.Helper()
	db, rec := migratedDB(t)
	setRegistry(t, db, store.RegDBVersion, "4.5.0")
	execSQL(t, db, "DELETE FROM permissions WHERE keyname = 'p_code_editor'",
		"DELETE FROM configuration WHERE keyname = 'BACKUP_KEEP'")
	return db, rec
}

// needPgDump skips on the PostgreSQL pass when pg_dump is not installed (Debian's
// postgresql package brings it, so CI has it).
func needPgDump(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("pg_dump"); testkit.Postgres() && err != nil {
		t.Skipf("pg_dump is not on PATH (Debian: postgresql-client): %v", err)
	}
}

// postgresOnly skips on the SQLite pass, saying what covers SQLite there.
func postgresOnly(t *testing.T, why string) {
	t.Helper()
	if !testkit.Postgres() {
		t.Skipf("PostgreSQL only: %s", why)
	}
}

// With SERVICE_BACKUP_DIR the backup before migrating goes into that directory, named
// after the file (SQLite: a copy) or the database (PostgreSQL: a pg_dump archive), and
// holds the data as it was before the blocks ran.
func TestRunBackupInBackupDir(t *testing.T) {
	needPgDump(t)
	t.Parallel()
	ctx := context.Background()
	db, rec := olderDB(t)
	dir := t.TempDir()
	o := options(t, rec)
	o.Backup, o.BackupDir = true, dir
	run(t, db, o)

	name := filepath.Base(bootstrap.BackupBase(db, dir))
	bakName := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `\.4\.5\.0\.20260203T\d{6}\.\d{3}Z\.bak$`)
	baks := fileNames(t, dir, "*")
	if len(baks) != 1 || !bakName.MatchString(baks[0]) {
		t.Fatalf("files in SERVICE_BACKUP_DIR = %v, want one %s.4.5.0.<timestamp>.bak", baks, name)
	}
	file := filepath.Join(dir, baks[0])
	logged := rec.Find(slog.LevelInfo, "backup before migrating")
	if len(logged) != 1 || logged[0].Attrs["file"] != file {
		t.Fatalf("backup records = %+v, want one naming %s", logged, file)
	}
	mustPermission(t, db, "p_code_editor")
	if got, want := dbVersion(t, db), testVersion; got != want {
		t.Fatalf("DB_VERSION = %q, want %q", got, want)
	}
	if !testkit.Postgres() {
		if beside := fileNames(t, filepath.Dir(db.Path()), "*.bak"); len(beside) != 0 {
			t.Fatalf("backups beside the file: %v", beside)
		}
		copyDB := openDB(t, file)
		if got, want := dbVersion(t, copyDB), "4.5.0"; got != want {
			t.Fatalf("backup DB_VERSION = %q, want %q", got, want)
		}
		if _, ok := permission(t, copyDB, "p_code_editor"); ok {
			t.Fatalf("backup has p_code_editor: taken after block 4.6.0")
		}
		return
	}
	v, err := store.PostgresArchiveVersion(ctx, file)
	if err != nil || v != "4.5.0" {
		t.Fatalf("archive DB_VERSION = %q, %v; want 4.5.0 (a pg_dump archive taken before the blocks)", v, err)
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("archive mode: %v %v, want 0600", st.Mode(), err)
	}
	if strings.Contains(file, "@") || strings.Contains(file, "://") {
		t.Fatalf("archive name %s carries the URL", file)
	}
}

// assertUnchanged checks a refused start left the database as it was: the data, the
// registry, and the configuration entry olderDB removed (no configuration sync).
func assertUnchanged(t *testing.T, db *store.DB, data string, reg map[string]string) {
	t.Helper()
	if d := snapshot(t, db); d != data {
		t.Fatalf("a refused start changed the data: %s", diffLines(data, d))
	}
	after := registry(t, db)
	if strings.Join(sortedKeys(after), ",") != strings.Join(sortedKeys(reg), ",") {
		t.Fatalf("registry keys = %v, want %v", sortedKeys(after), sortedKeys(reg))
	}
	for k, v := range reg {
		if after[k] != v {
			t.Fatalf("registry %s = %q, want %q", k, after[k], v)
		}
	}
	if n := count(t, db, "SELECT count(*) FROM configuration WHERE keyname = 'BACKUP_KEEP'"); n != 0 {
		t.Fatalf("the configuration was synchronised by a refused start")
	}
}

// On PostgreSQL without SERVICE_BACKUP_DIR a start that must migrate with
// SERVICE_BACKUP on is refused before anything changes, naming both settings; with
// SERVICE_BACKUP off it migrates.
func TestRunBackupRefusedWithoutDir(t *testing.T) {
	postgresOnly(t, "a SQLite file's backup goes beside it without SERVICE_BACKUP_DIR (TestRunBackup)")
	t.Parallel()
	db, rec := olderDB(t)
	data, reg := snapshot(t, db), registry(t, db)
	o := options(t, rec)
	o.Backup = true
	err := bootstrap.Run(context.Background(), testkit.Migrator(t, db), o)
	if !errors.Is(err, bootstrap.ErrBackupRefused) || !strings.Contains(err.Error(), "SERVICE_BACKUP_DIR") ||
		!strings.Contains(err.Error(), "SERVICE_BACKUP=off") {
		t.Fatalf("Run = %v, want a refusal naming SERVICE_BACKUP_DIR and SERVICE_BACKUP=off", err)
	}
	c := rec.AtLeast(bootstrap.LevelCritical)
	if len(c) != 1 || !strings.Contains(c[0].Attrs["reason"], "SERVICE_BACKUP_DIR") || c[0].Attrs["db_version"] != "4.5.0" {
		t.Fatalf("critical records = %+v, want one naming SERVICE_BACKUP_DIR and DB_VERSION 4.5.0", c)
	}
	if got := blocksStarted(rec); len(got) != 0 {
		t.Fatalf("blocks ran: %v", got)
	}
	assertUnchanged(t, db, data, reg)

	rec.Reset()
	o.Backup = false
	run(t, db, o)
	mustPermission(t, db, "p_code_editor")
	if got, want := dbVersion(t, db), testVersion; got != want {
		t.Fatalf("DB_VERSION with SERVICE_BACKUP=off = %q, want %q", got, want)
	}
	// Up to date now: no backup is due, the same settings start.
	o.Backup = true
	run(t, db, o)
}

// Without pg_dump on PATH a start that must back up before migrating is refused
// before anything changes, naming pg_dump, its Debian package and SERVICE_BACKUP=off.
func TestRunBackupRefusedWithoutPgDump(t *testing.T) {
	postgresOnly(t, "SQLite's backup is VACUUM INTO, no tool (TestRunBackup)")
	db, rec := olderDB(t)
	data, reg := snapshot(t, db), registry(t, db)
	dir := t.TempDir()
	t.Setenv("PATH", t.TempDir())
	o := options(t, rec)
	o.Backup, o.BackupDir = true, dir
	err := bootstrap.Run(context.Background(), testkit.Migrator(t, db), o)
	if !errors.Is(err, bootstrap.ErrBackupRefused) || !errors.Is(err, store.ErrToolMissing) {
		t.Fatalf("Run = %v, want a refusal for a missing tool", err)
	}
	for _, want := range []string{"pg_dump is not on PATH", "postgresql-client", "SERVICE_BACKUP=off"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("Run = %v, want it to name %q", err, want)
		}
	}
	if got := blocksStarted(rec); len(got) != 0 {
		t.Fatalf("blocks ran: %v", got)
	}
	assertUnchanged(t, db, data, reg)
	if files := fileNames(t, dir, "*"); len(files) != 0 {
		t.Fatalf("files in SERVICE_BACKUP_DIR: %v", files)
	}
}
