package bootstrap_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"dataservice/bootstrap"
	"dataservice/internal/testkit"
	"dataservice/store"
)

func scheduledFiles(t *testing.T, dbPath string) []string {
	t.Helper()
	m, err := filepath.Glob(dbPath + ".*.scheduled.bak")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	return m
}

func TestScheduledBackupIntervalKeepAndNaming(t *testing.T) {
	testkit.SQLiteOnly(t, "scheduled backups are copies beside the file; they are off on PostgreSQL")
	t.Parallel()
	db, rec := migratedDB(t)
	ctx := context.Background()
	log := rec.Logger(t)
	now := time.Now()

	if f, err := bootstrap.ScheduledBackup(ctx, db, "", now, log); err != nil || f != "" {
		t.Fatalf("BACKUP_INTERVAL_HOURS 0: got %q, %v; want no backup", f, err)
	}
	if err := db.SetConfig(ctx, map[string]string{"BACKUP_INTERVAL_HOURS": "1", "BACKUP_KEEP": "2"}); err != nil {
		t.Fatal(err)
	}
	// A backup taken before a migration is never pruned.
	premig := db.Path() + ".4.8.0.20260101T000000.000Z.bak"
	if err := os.WriteFile(premig, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(premig, now.Add(-48*time.Hour), now.Add(-48*time.Hour)); err != nil {
		t.Fatal(err)
	}

	first, err := bootstrap.ScheduledBackup(ctx, db, "", now, log)
	if err != nil || first == "" {
		t.Fatalf("first scheduled backup: %q, %v", first, err)
	}
	name := regexp.MustCompile(`^` + regexp.QuoteMeta(filepath.Base(db.Path())) +
		`\.` + regexp.QuoteMeta(testVersion) + `\.\d{8}T\d{6}\.\d{3}Z\.scheduled\.bak$`)
	if !name.MatchString(filepath.Base(first)) {
		t.Fatalf("backup name %s does not follow <db>.<DB_VERSION>.<timestamp>.scheduled.bak", first)
	}
	copyDB, err := store.Open(ctx, first, store.Options{})
	if err != nil {
		t.Fatalf("open backup: %v", err)
	}
	if v, err := copyDB.Registry(ctx, store.RegDBVersion); err != nil || v != testVersion {
		t.Errorf("backup DB_VERSION %q, %v", v, err)
	}
	copyDB.Close()
	os.Remove(first + "-wal")
	os.Remove(first + "-shm")

	if f, err := bootstrap.ScheduledBackup(ctx, db, "", now.Add(30*time.Minute), log); err != nil || f != "" {
		t.Fatalf("30 minutes later: got %q, %v; want none (interval 1 h)", f, err)
	}
	var made []string
	for i := 1; i <= 3; i++ {
		f, err := bootstrap.ScheduledBackup(ctx, db, "", now.Add(time.Duration(i)*2*time.Hour), log)
		if err != nil || f == "" {
			t.Fatalf("backup %d: %q, %v", i, f, err)
		}
		made = append(made, f)
	}
	got := scheduledFiles(t, db.Path())
	want := append([]string(nil), made[1:]...)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("after 4 backups with BACKUP_KEEP 2:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := os.Stat(premig); err != nil {
		t.Fatalf("the backup before migrating was pruned: %v", err)
	}
	if partial, _ := filepath.Glob(db.Path() + "*.partial"); len(partial) != 0 {
		t.Fatalf(".partial files left: %v", partial)
	}
	last, ok := bootstrap.LastBackup(bootstrap.BackupBase(db, ""))
	st, _ := os.Stat(made[2])
	if !ok || !last.Equal(st.ModTime()) {
		t.Fatalf("LastBackup %v %v, want %v", last, ok, st.ModTime())
	}
}

func TestBackupLoopReportsSuccessAndFailure(t *testing.T) {
	testkit.SQLiteOnly(t, "scheduled backups are copies of the SQLite file; they are off on PostgreSQL")
	t.Parallel()
	sub := filepath.Join(t.TempDir(), "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	db := openDB(t, filepath.Join(sub, "data.db"))
	rec := &testkit.Recorder{}
	run(t, db, options(t, rec))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := db.SetConfig(ctx, map[string]string{"BACKUP_INTERVAL_HOURS": "1"}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var oks, fails int
	done := make(chan struct{})
	go func() {
		defer close(done)
		bootstrap.BackupLoop(ctx, db, "", 10*time.Millisecond, rec.Logger(t), func(file string, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				fails++
			} else if file != "" {
				oks++
			}
		})
	}()
	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			ok := cond()
			mu.Unlock()
			if ok {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("timed out waiting for %s", what)
	}
	wait("the first scheduled backup", func() bool { return oks == 1 })
	// The next one is not due for an hour: a few more ticks write nothing.
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	if oks != 1 || fails != 0 {
		t.Fatalf("after the first backup: %d written, %d failed", oks, fails)
	}
	mu.Unlock()
	if n := len(scheduledFiles(t, db.Path())); n != 1 {
		t.Fatalf("%d scheduled backups, want 1", n)
	}
	// The directory goes away under the open database: the next attempts fail, are
	// logged and reported, and the loop keeps running.
	if err := db.SetConfig(ctx, map[string]string{"BACKUP_INTERVAL_HOURS": "1"}); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(sub, sub+".moved"); err != nil {
		t.Fatal(err)
	}
	wait("two failures", func() bool { return fails >= 2 })
	cancel()
	<-done
	if len(rec.Find(slog.LevelError, "scheduled backup failed")) < 2 {
		t.Fatalf("failures not logged: %v", rec.All())
	}
}

// With SERVICE_BACKUP_DIR, scheduled backups are written and pruned there, named after
// the file, and none beside the file; LastBackup finds them there.
func TestScheduledBackupInBackupDir(t *testing.T) {
	testkit.SQLiteOnly(t, "scheduled backups are copies of the SQLite file; they are off on PostgreSQL")
	t.Parallel()
	db, rec := migratedDB(t)
	ctx := context.Background()
	dir := t.TempDir()
	if err := db.SetConfig(ctx, map[string]string{"BACKUP_INTERVAL_HOURS": "1", "BACKUP_KEEP": "1"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	var made []string
	for i := 0; i < 2; i++ {
		f, err := bootstrap.ScheduledBackup(ctx, db, dir, now.Add(time.Duration(i)*2*time.Hour), rec.Logger(t))
		if err != nil || f == "" {
			t.Fatalf("backup %d: %q, %v", i+1, f, err)
		}
		made = append(made, f)
	}
	if got, want := filepath.Dir(made[1]), dir; got != want {
		t.Fatalf("backup written in %s, want %s", got, want)
	}
	if got, want := strings.Join(scheduledFiles(t, filepath.Join(dir, filepath.Base(db.Path()))), ","), made[1]; got != want {
		t.Fatalf("scheduled backups in the directory after BACKUP_KEEP 1: %s, want %s", got, want)
	}
	if beside := scheduledFiles(t, db.Path()); len(beside) != 0 {
		t.Fatalf("scheduled backups beside the file: %v", beside)
	}
	if _, ok := bootstrap.LastBackup(bootstrap.BackupBase(db, "")); ok {
		t.Fatalf("LastBackup beside the file found one")
	}
	last, ok := bootstrap.LastBackup(bootstrap.BackupBase(db, dir))
	st, _ := os.Stat(made[1])
	if !ok || !last.Equal(st.ModTime()) {
		t.Fatalf("LastBackup in the directory %v %v, want %v", last, ok, st.ModTime())
	}
}
