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
	"dataservice/store/codec"
	"dataservice/store/model"
)

// TestDryRunLeftoversRemovedAtOpen: a dry run's directory left behind by a killed
// process (its lock file unlocked, or no lock file and older than a minute) is removed
// when the database is next opened for writing; a directory whose lock is held (a dry
// run running in another process), a fresh one without its lock file yet, and the
// directory of a dry run running in this process are left alone.
//
// On PostgreSQL the directories are in TMPDIR (DB.TempDir), which the test makes its
// own, and the database is swept at its open for writing as a file is.
func TestDryRunLeftoversRemovedAtOpen(t *testing.T) {
	dryTempOfItsOwn(t)
	ctx := context.Background()
	db := dryShapeDB(t)
	path := store.AddressOf(db)
	prefix := path + ".dryrun-"
	if !db.IsFile() {
		prefix = filepath.Join(os.TempDir(), "dataservice-dryrun-")
	}
	mustLoad(t, db, "- {classname: dnode, keyname: stored, n: 1}\n", store.LoadOptions{})
	mkdir := func(name string, lock bool) string {
		dir := prefix + name
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
		for _, d := range dryDirsOf(t, db) {
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
	testkit.SQLiteOnly(t, "a full disk under the database file (a small filesystem made for the test)")
	t.Parallel()
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
	entries, err := codec.ParseDocument("boxes.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Load(t.Context(), entries, store.LoadOptions{DryRun: true})
	msg := store.ErrorMessage(err)
	if store.ErrorCode(err) != model.EDiskFull || !strings.Contains(msg, "holding the dry run's private database in "+db.Path()+".dryrun-") {
		t.Fatalf("dry run on a full disk: %v (%s), want the disk-full error naming the dry run's directory", err, store.ErrorCode(err))
	}
	if db.DiskFull() || db.NoSpace(err) != err || db.DiskFull() {
		t.Fatal("a dry run's full disk began the database's disk-full episode")
	}
	if dirs, _ := filepath.Glob(db.Path() + ".dryrun-*"); len(dirs) != 0 {
		t.Fatalf("the failed dry run left %v", dirs)
	}
}

// leftover makes a dry run's leftover directory dir (mode perm, whatever the umask)
// holding a private database and, unless lock is nil, a lock file made by lock.
func leftover(t *testing.T, dir string, perm os.FileMode, lock func(name string) error) {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dryrun.db"), []byte("rows"), 0o600); err != nil {
		t.Fatal(err)
	}
	if lock != nil {
		if err := lock(filepath.Join(dir, "lock")); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, perm); err != nil {
		t.Fatal(err)
	}
}

// freeLock makes an unlocked regular lock file: its directory is abandoned.
func freeLock(name string) error { return os.WriteFile(name, nil, 0o600) }

// openWithin opens the database at path for writing and closes it, failing the test
// if the open does not return within 10 s. fifos are opened for writing on a timeout,
// so that an open blocked reading one returns and the test ends.
func openWithin(t *testing.T, path string, fifos ...string) {
	t.Helper()
	opened := make(chan error, 1)
	go func() {
		db, err := store.Open(context.Background(), path, store.Options{})
		if err == nil {
			db.Close()
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		for _, name := range fifos {
			if f, err := os.OpenFile(name, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
		}
		<-opened
		t.Fatal("open did not return within 10 s")
	}
}

// TestDryRunLeftoverOddLockLeftAlone: a directory named as a dry run's whose `lock` is
// not a regular file is not a dry run's: a FIFO (which anyone may put in TMPDIR; opening
// it for reading waits for a writer forever, and hung every open for writing) and a
// symlink (which would be followed to lock a file elsewhere) are not opened, and the
// directory is left, beside the database and in TMPDIR alike.
func TestDryRunLeftoverOddLockLeftAlone(t *testing.T) {
	fifo := func(name string) error { return syscall.Mkfifo(name, 0o600) }
	for _, where := range []string{"beside", "temp"} {
		for _, kind := range []string{"fifo", "symlink"} {
			t.Run(where+"/"+kind, func(t *testing.T) {
				if where == "beside" {
					testkit.SQLiteOnly(t, "leftovers beside the database file")
				}
				tmp := t.TempDir()
				t.Setenv("TMPDIR", tmp)
				path := testkit.NewAddress(t, "odd.db")
				dir := path + ".dryrun-x"
				if where == "temp" {
					dir = filepath.Join(tmp, "dataservice-dryrun-x")
				}
				lock := fifo
				if kind == "symlink" {
					target := filepath.Join(t.TempDir(), "elsewhere")
					if err := os.WriteFile(target, nil, 0o600); err != nil {
						t.Fatal(err)
					}
					lock = func(name string) error { return os.Symlink(target, name) }
				}
				leftover(t, dir, 0o700, lock)
				openWithin(t, path, filepath.Join(dir, "lock"))
				if _, err := os.Lstat(filepath.Join(dir, "lock")); err != nil {
					t.Fatalf("the directory with a %s for its lock was removed: %v", kind, err)
				}
			})
		}
	}
}

// TestDryRunLeftoverBesideOddPath: the leftovers of a database whose name holds
// pattern characters are found by name, not as a pattern: its own are removed, and
// those of the database the pattern would name are not its to judge.
func TestDryRunLeftoverBesideOddPath(t *testing.T) {
	testkit.SQLiteOnly(t, "leftovers beside a database file with pattern characters in its name")
	t.Setenv("TMPDIR", t.TempDir())
	dir := filepath.Join(t.TempDir(), "a[b")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "x[12].db")
	own := path + ".dryrun-killed"
	other := filepath.Join(dir, "x1.db.dryrun-killed")
	leftover(t, own, 0o700, freeLock)
	leftover(t, other, 0o700, freeLock)
	openWithin(t, path)
	if _, err := os.Stat(own); !os.IsNotExist(err) {
		t.Errorf("the database's own leftover stayed (%v)", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another database's leftover was removed: %v", err)
	}
}

// TestDryRunLeftoverInTempOnlyPrivate: in TMPDIR, which every user may write, only a
// directory as a dry run makes it (owned by the process's user, mode 0700) is removed;
// one with another mode, or owned by another user (checked when the test runs as root,
// which may give it away), is not a dry run's of this user and is left.
func TestDryRunLeftoverInTempOnlyPrivate(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	private := filepath.Join(tmp, "dataservice-dryrun-private")
	open := filepath.Join(tmp, "dataservice-dryrun-open")
	foreign := filepath.Join(tmp, "dataservice-dryrun-foreign")
	leftover(t, private, 0o700, freeLock)
	leftover(t, open, 0o755, freeLock)
	leftover(t, foreign, 0o700, freeLock)
	if err := os.Chown(foreign, 65534, 65534); err != nil {
		t.Logf("cannot give a directory to another user (%v): the owner is not checked", err)
		os.RemoveAll(foreign)
		foreign = ""
	}
	openWithin(t, testkit.NewAddress(t, "t.db"))
	if _, err := os.Stat(private); !os.IsNotExist(err) {
		t.Errorf("the private leftover stayed (%v)", err)
	}
	for _, dir := range []string{open, foreign} {
		if _, err := os.Stat(dir); dir != "" && err != nil {
			t.Errorf("%s was removed: %v", filepath.Base(dir), err)
		}
	}
}
