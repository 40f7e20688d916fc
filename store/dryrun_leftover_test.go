package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// TestDryRunLeftoversRemovedAtOpen: a dry run's directory left behind by a killed
// process (its lock file unlocked, or no lock file and older than a minute) is removed
// when the database is next opened for writing; a directory whose lock is held (a dry
// run running in another process), a fresh one without its lock file yet, and the
// directory of a dry run running in this process are left alone.
func TestDryRunLeftoversRemovedAtOpen(t *testing.T) {
	ctx := context.Background()
	db := dryShapeDB(t)
	path := db.Path()
	mustLoad(t, db, "- {classname: dnode, keyname: stored, n: 1}\n", store.LoadOptions{})
	mkdir := func(name string, lock bool) string {
		dir := path + ".dryrun-" + name
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "dryrun.db"), []byte("rows"), 0o600); err != nil {
			t.Fatal(err)
		}
		if lock {
			if err := os.WriteFile(filepath.Join(dir, "lock"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	killed := mkdir("killed", true)
	early := mkdir("early", false)
	old := time.Now().Add(-2 * time.Minute)
	if err := os.Chtimes(early, old, old); err != nil {
		t.Fatal(err)
	}
	fresh := mkdir("fresh", false)
	held := mkdir("held", true)
	f, err := os.Open(filepath.Join(held, "lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	exists := func(dir string) bool {
		_, err := os.Stat(dir)
		return err == nil
	}

	// A second handle opened while a dry run on the first is held mid-run.
	var running []string
	db.SetDryRunHook(func(int) {
		dirs, _ := filepath.Glob(path + ".dryrun-*")
		for _, d := range dirs {
			if d != killed && d != early && d != fresh && d != held {
				running = append(running, d)
			}
		}
		other, err := store.Open(ctx, path, store.Options{})
		if err != nil {
			t.Errorf("open beside a dry run: %v", err)
			return
		}
		other.Close()
		for _, d := range running {
			if !exists(d) {
				t.Errorf("the directory %s of a running dry run was removed", d)
			}
		}
	})
	res := load(t, db, "- {classname: dnode, keyname: stored, n: 2}\n", store.LoadOptions{DryRun: true})
	db.SetDryRunHook(nil)
	if len(running) != 1 || res.Updated != 1 || res.Errors != 0 {
		t.Fatalf("dry run: %s, running directories %v", counts(res), running)
	}
	for dir, want := range map[string]bool{killed: false, early: false, fresh: true, held: true, running[0]: false} {
		if exists(dir) != want {
			t.Errorf("%s exists: %v, want %v", filepath.Base(dir), !want, want)
		}
	}

	// Opening as it is (a command that writes nothing at open) removes nothing.
	f.Close()
	asIs, err := store.Open(ctx, path, store.Options{AsIs: true})
	if err != nil {
		t.Fatal(err)
	}
	asIs.Close()
	if !exists(held) {
		t.Error("an open as it is removed a leftover directory")
	}
}

// TestDryRunDiskFullIsItsOwn: a dry run whose private database fills the disk fails
// with the disk-full error naming its directory, and the database's own disk-full
// episode is not begun (nothing was written to it; /readyz must not say it is full).
// The disk is a small filesystem made for the test.
func TestDryRunDiskFullIsItsOwn(t *testing.T) {
	dir := testkit.SmallFS(t, 16<<20)
	db := testkit.Open(t, filepath.Join(dir, "full.db"), testkit.Options{})
	mustLoad(t, db, dryShapeSchema, store.LoadOptions{})
	var b strings.Builder
	for i := range 4000 {
		fmt.Fprintf(&b, "- {classname: dnode, keyname: n%05d, tag: %s}\n", i, strings.Repeat("x", 400))
	}
	testkit.EmptyWAL(t, db.Path())
	ballast := filepath.Join(dir, "ballast")
	testkit.FillDisk(t, ballast, 2<<20)
	entries, err := store.ParseDocument("boxes.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Load(t.Context(), entries, store.LoadOptions{DryRun: true})
	msg := store.ErrorMessage(err)
	if store.ErrorCode(err) != store.EDiskFull || !strings.Contains(msg, "holding the dry run's private database in "+db.Path()+".dryrun-") {
		t.Fatalf("dry run on a full disk: %v (%s), want the disk-full error naming the dry run's directory", err, store.ErrorCode(err))
	}
	if db.DiskFull() || db.NoSpace(err) != err || db.DiskFull() {
		t.Fatal("a dry run's full disk began the database's disk-full episode")
	}
	if dirs, _ := filepath.Glob(db.Path() + ".dryrun-*"); len(dirs) != 0 {
		t.Fatalf("the failed dry run left %v", dirs)
	}
}
