package bootstrap_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"dataservice/bootstrap"
	"dataservice/internal/testkit"
	"dataservice/store"
)

func TestPending(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		stored  string // "" = new database; "0" = new database with DB_VERSION 0; else set on a migrated one
		version string
		want    []string
	}{
		{"new database lists the bootstrap and the blocks after 4.2.0", "", testVersion,
			[]string{"bootstrap", "4.4.0", "4.5.0", "4.6.0", "4.8.0", "4.9.0"}},
		{"DB_VERSION 0 lists the bootstrap", "0", testVersion, []string{"bootstrap", "4.4.0", "4.5.0", "4.6.0", "4.8.0", "4.9.0"}},
		{"new database with a newer code version ends with its version step", "", "5.0.0",
			[]string{"bootstrap", "4.4.0", "4.5.0", "4.6.0", "4.8.0", "4.9.0", "set DB_VERSION 5.0.0"}},
		{"up-to-date database lists nothing", testVersion, testVersion, nil},
		{"4.1.0 lists every block", "4.1.0", testVersion, []string{"4.2.0", "4.4.0", "4.5.0", "4.6.0", "4.8.0", "4.9.0"}},
		{"4.4.0 lists the blocks after it", "4.4.0", testVersion, []string{"4.5.0", "4.6.0", "4.8.0", "4.9.0"}},
		{"release candidate lists its own block again", "4.6.0-RC1", "4.6.0-RC1",
			[]string{"4.6.0", "4.8.0", "4.9.0", "set DB_VERSION 4.6.0-RC1"}},
		// The seed's rule as written: "starts with 4.9.0-RC" (case and all).
		{"a suffix after the RC number is still the release candidate", testVersion, "4.9.0-RC1-hotfix",
			[]string{"4.9.0", "set DB_VERSION 4.9.0-RC1-hotfix"}},
		{"a lower-case rc is not a release candidate", testVersion, "4.9.0-rc1",
			[]string{"set DB_VERSION 4.9.0-rc1"}},
		{"3.9.0 is refused", "3.9.0", testVersion, []string{"refused (DB_VERSION < 4.0.0)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := newDB(t)
			if tt.stored != "" && tt.stored != "0" {
				run(t, db, options(t, &testkit.Recorder{}))
			}
			if tt.stored != "" {
				setRegistry(t, db, store.RegDBVersion, tt.stored)
			}
			before := snapshot(t, db)
			reg := registry(t, db)
			dbv, got, err := bootstrap.Pending(context.Background(), db, tt.version)
			if err != nil {
				t.Fatal(err)
			}
			if dbv != tt.stored {
				t.Fatalf("DB_VERSION = %q, want %q", dbv, tt.stored)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Pending = %q, want %q", got, tt.want)
			}
			if after := snapshot(t, db); after != before {
				t.Fatalf("Pending changed data: %s", diffLines(before, after))
			}
			if got, want := len(registry(t, db)), len(reg); got != want {
				t.Fatalf("registry keys = %d after Pending, want %d", got, want)
			}
		})
	}
}

func TestRunRefusesDataOlderThan400(t *testing.T) {
	t.Parallel()
	db, rec := migratedDB(t)
	setRegistry(t, db, store.RegDBVersion, "3.9.0")
	execSQL(t, db, "DELETE FROM registry WHERE key IN ('LAST_START', 'LAST_START_FAILED')")
	before := registry(t, db)
	data := snapshot(t, db)
	var slept []time.Duration
	var criticalBeforeSleep int
	o := options(t, rec)
	o.Backup = true
	o.Sleep = func(ctx context.Context, d time.Duration) {
		slept = append(slept, d)
		criticalBeforeSleep = len(rec.AtLeast(bootstrap.LevelCritical))
	}
	err := bootstrap.Run(context.Background(), testkit.Migrator(t, db), o)

	t.Run("Run returns ErrRefused after waiting 10s", func(t *testing.T) {
		if !errors.Is(err, bootstrap.ErrRefused) {
			t.Fatalf("err = %v, want ErrRefused", err)
		}
		if !slices.Equal(slept, []time.Duration{10 * time.Second}) {
			t.Fatalf("Sleep calls = %v, want [10s]", slept)
		}
	})
	t.Run("critical messages name 4.0.x and 4.1.x before the wait", func(t *testing.T) {
		c := rec.AtLeast(bootstrap.LevelCritical)
		if len(c) == 0 || criticalBeforeSleep != len(c) {
			t.Fatalf("critical records = %d, %d of them before Sleep", len(c), criticalBeforeSleep)
		}
		var text strings.Builder
		for _, e := range c {
			if e.Level != bootstrap.LevelCritical {
				t.Fatalf("level = %v, want LevelCritical", e.Level)
			}
			text.WriteString(e.Msg + " ")
		}
		if !strings.Contains(text.String(), "4.0.x") || !strings.Contains(text.String(), "4.1.x") {
			t.Fatalf("critical messages %q do not mention 4.0.x and 4.1.x", text.String())
		}
	})
	t.Run("registry and data are unchanged", func(t *testing.T) {
		after := registry(t, db)
		if got, want := len(after), len(before); got != want {
			t.Fatalf("registry keys = %v, want %v", sortedKeys(after), sortedKeys(before))
		}
		for k, v := range before {
			if after[k] != v {
				t.Fatalf("registry %s = %q, want %q", k, after[k], v)
			}
		}
		if got, want := after[store.RegDBVersion], "3.9.0"; got != want {
			t.Fatalf("DB_VERSION = %q, want %q", got, want)
		}
		if d := snapshot(t, db); d != data {
			t.Fatalf("data changed: %s", diffLines(data, d))
		}
		if got := blocksStarted(rec); len(got) != 0 {
			t.Fatalf("blocks ran: %v", got)
		}
	})
	t.Run("no backup is taken", func(t *testing.T) {
		if got := fileNames(t, filepath.Dir(db.Path()), "*.bak"); len(got) != 0 {
			t.Fatalf("backup files %v", got)
		}
	})
}

func TestRunBackup(t *testing.T) {
	testkit.SQLiteOnly(t, "the backup before migrating is a copy beside the file; PostgreSQL's goes to SERVICE_BACKUP_DIR only (TestRunBackupInBackupDir, TestRunBackupRefusedWithoutDir)")
	t.Parallel()
	// The timestamp is the database's clock (the tests' ticking clock starts 2026-02-03).
	bakName := regexp.MustCompile(`^data\.db\.4\.5\.0\.20260203T\d{6}\.\d{3}Z\.bak$`)

	t.Run("DB at 4.5.0 with Backup is copied before migrating", func(t *testing.T) {
		db, rec := migratedDB(t)
		setRegistry(t, db, store.RegDBVersion, "4.5.0")
		execSQL(t, db, "DELETE FROM permissions WHERE keyname = 'p_code_editor'")
		o := options(t, rec)
		o.Backup = true
		run(t, db, o)
		dir := filepath.Dir(db.Path())
		baks := fileNames(t, dir, "*.bak")
		if len(baks) != 1 || !bakName.MatchString(baks[0]) {
			t.Fatalf("backup files = %v, want one data.db.4.5.0.<timestamp>.bak", baks)
		}
		logged := rec.Find(slog.LevelInfo, "backup before migrating")
		if len(logged) != 1 || logged[0].Attrs["file"] != filepath.Join(dir, baks[0]) {
			t.Fatalf("backup records = %+v, want one naming %s", logged, baks[0])
		}
		copyDB := openDB(t, filepath.Join(dir, baks[0]))
		if got, want := dbVersion(t, copyDB), "4.5.0"; got != want {
			t.Fatalf("backup DB_VERSION = %q, want %q", got, want)
		}
		if _, ok := permission(t, copyDB, "p_code_editor"); ok {
			t.Fatalf("backup has p_code_editor: taken after block 4.6.0")
		}
		mustPermission(t, db, "p_code_editor")
	})
	t.Run("DB at 4.5.0 without Backup is not copied", func(t *testing.T) {
		db, rec := migratedDB(t)
		setRegistry(t, db, store.RegDBVersion, "4.5.0")
		run(t, db, options(t, rec))
		if got := fileNames(t, filepath.Dir(db.Path()), "*.bak"); len(got) != 0 {
			t.Fatalf("backup files %v", got)
		}
		if got, want := dbVersion(t, db), testVersion; got != want {
			t.Fatalf("DB_VERSION = %q, want %q", got, want)
		}
	})
	t.Run("new and up-to-date databases are not copied", func(t *testing.T) {
		db := newDB(t)
		rec := &testkit.Recorder{}
		o := options(t, rec)
		o.Backup = true
		run(t, db, o)
		run(t, db, o)
		if got := fileNames(t, filepath.Dir(db.Path()), "*.bak"); len(got) != 0 {
			t.Fatalf("backup files %v", got)
		}
	})
	t.Run("data newer than the code is logged as a warning", func(t *testing.T) {
		db, rec := migratedDB(t)
		setRegistry(t, db, store.RegDBVersion, "4.9.1")
		run(t, db, options(t, rec))
		w := rec.Find(slog.LevelWarn, "stored data is newer than this code")
		if len(w) != 1 || w[0].Attrs["db_version"] != "4.9.1" || w[0].Attrs["service_version"] != testVersion {
			t.Fatalf("warnings = %+v, want one naming 4.9.1 and %s", w, testVersion)
		}
		if got := blocksStarted(rec); len(got) != 0 {
			t.Fatalf("blocks ran: %v", got)
		}
		// The seed's last step always sets DB_VERSION to SERVICE_VERSION.
		if got, want := dbVersion(t, db), testVersion; got != want {
			t.Fatalf("DB_VERSION = %q, want %q", got, want)
		}
	})
}

// fileNames lists the names in dir matching pattern.
func fileNames(t *testing.T, dir, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

// TestRunReloadFailureDoesNotStopStartup: an entry missing from a built-in file is
// logged and the start goes on (seed Migrations rule 2).
func TestRunReloadFailureDoesNotStopStartup(t *testing.T) {
	t.Parallel()
	dir := initDir(t)
	home, err := os.ReadFile(filepath.Join(dir, "20_home.yml"))
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(home), "- classname: _home\n  keyname: code_editor")
	if i < 0 {
		t.Fatal("code_editor entry not found in 20_home.yml")
	}
	db, rec := migratedDB(t)
	setRegistry(t, db, store.RegDBVersion, "4.5.0")
	writeFile(t, dir, "20_home.yml", string(home[:i]))
	o := options(t, rec)
	o.Init = os.DirFS(dir)
	run(t, db, o)

	if got, want := dbVersion(t, db), testVersion; got != want {
		t.Fatalf("DB_VERSION = %q, want %q", got, want)
	}
	var entries []string
	for _, e := range rec.Find(slog.LevelError, "reload: entry not found in built-in file") {
		entries = append(entries, e.Attrs["file"]+" "+e.Attrs["entry"])
	}
	if got, want := strings.Join(entries, ","), "20_home.yml _home:code_editor"; got != want {
		t.Fatalf("not-found records = %q, want %q", got, want)
	}
	failed := rec.Find(slog.LevelError, "reload failed")
	if len(failed) != 1 || !strings.Contains(failed[0].Attrs["error"], "_home:code_editor not found") {
		t.Fatalf("reload failed records = %+v", failed)
	}
	mustPermission(t, db, "p_code_editor") // the rest of block 4.6.0 ran
}
