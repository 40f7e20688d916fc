package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The dry run's private database is an SQLite file of its own (dryrun.go): this file
// holds the machinery of that file, SQLite's by nature. The directory it lives in,
// with its lock and the sweep of the directories killed runs leave, and the temporary
// objects that record the keys the run deletes or renames away.

// makeDryDir creates the private database's directory. Beside the database: the one
// directory the service must be able to write (SQLite creates the -wal and -shm files
// there; a scratch container has no /tmp). A file opened read-only may sit in a
// directory the process cannot write: then TMPDIR. Only a refusal of the directory
// falls back; any other failure (a full disk) is the dry run's error.
//
// A database that is no file (PostgreSQL) has its directory in DB.TempDir, the
// system's temporary directory.
func makeDryDir(db *DB) (string, error) {
	var dir string
	var err error
	if db.IsFile() {
		dir, err = os.MkdirTemp(filepath.Dir(db.path), filepath.Base(db.path)+dryDirSuffix+"*")
	}
	if !db.IsFile() || errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		dir, err = os.MkdirTemp(db.TempDir(), dryTempPrefix+"*")
	}
	if err != nil {
		return "", fmt.Errorf("dry run: %w", err)
	}
	return dir, nil
}

// A dry run's directory holds copies of rows of the database, the credentials' hashes
// among them, so none may outlive its run. The run holds an exclusive flock(2) on the
// file lock in its directory while it uses it; a process killed mid-run (SIGKILL, the
// OOM killer) leaves the directory behind with its lock free, and the next open of the
// database for writing removes it (sweepDryRuns).
const (
	dryDirSuffix  = ".dryrun-" // beside the database: <db>.dryrun-*
	dryTempPrefix = "dataservice-dryrun-"
	dryLockName   = "lock"
	// dryLockGrace is how old a directory without its lock file must be to be
	// removed: a run creates the file right after the directory.
	dryLockGrace = time.Minute
)

// lockDryDir creates and locks dir's lock file. It locks the file under another name
// and renames it, so a sweep never finds the lock file unlocked while its run starts.
func lockDryDir(dir string) (*os.File, error) {
	tmp := filepath.Join(dir, dryLockName+".new")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("dry run: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("dry run: lock %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, dryLockName)); err != nil {
		f.Close()
		return nil, fmt.Errorf("dry run: %w", err)
	}
	return f, nil
}

// sweepDryRuns removes the directories dry runs left behind beside the database at
// path (and in the temporary directory, where a run goes when it may not write beside
// its database): those whose lock is free, and those without a lock file older than
// dryLockGrace. A directory in use by a running dry run, in this process or another,
// is left alone. Failures are logged, never fatal: the database opens regardless.
//
// Directories are found by name prefix, not by a glob: the database's path may hold
// pattern characters. TMPDIR is everyone's, so there only a directory as MkdirTemp
// makes it for this user (owned by it, mode 0700) may be a dry run's; anything else
// under the name was put there by someone else and is not ours to open or remove.
//
// path "" (a database that is no file: PostgreSQL) sweeps the temporary directory
// only.
func sweepDryRuns(path string, log *slog.Logger) {
	var dirs []string
	if path != "" {
		dirs = dryDirs(filepath.Dir(path), filepath.Base(path)+dryDirSuffix, false)
	}
	dirs = append(dirs, dryDirs(os.TempDir(), dryTempPrefix, true)...)
	for _, dir := range dirs {
		if !dryDirAbandoned(dir) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			log.Warn("cannot remove a dry run's leftover directory", "dir", dir, "error", err)
			continue
		}
		log.Info("removed a dry run's leftover directory", "dir", dir)
	}
}

// dryDirs lists the directories (not symlinks) in parent whose names begin with
// prefix; private keeps only those owned by this process's user with mode 0700.
func dryDirs(parent, prefix string, private bool) []string {
	entries, _ := os.ReadDir(parent)
	var dirs []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		st, err := os.Lstat(dir)
		if err != nil || !st.IsDir() {
			continue
		}
		if private {
			sys, ok := st.Sys().(*syscall.Stat_t)
			if !ok || int(sys.Uid) != os.Getuid() || st.Mode().Perm() != 0o700 {
				continue
			}
		}
		dirs = append(dirs, dir)
	}
	return dirs
}

// dryDirAbandoned reports whether no dry run uses dir: its lock is free (a run locks
// only the directory it has just made, before it names the lock file, so a free lock
// stays free), or it has no lock file and is older than dryLockGrace. A lock that is
// not a regular file (a FIFO, a symlink) is no run's: the directory is not ours and
// is left (openRegular neither blocks on a FIFO nor follows a symlink).
func dryDirAbandoned(dir string) bool {
	f, err := openRegular(filepath.Join(dir, dryLockName), 0)
	if errors.Is(err, fs.ErrNotExist) {
		st, err := os.Lstat(dir)
		return err == nil && st.IsDir() && time.Since(st.ModTime()) > dryLockGrace
	}
	if err != nil {
		return false
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}

// recordGone creates the temporary table of the keys the run deletes or renames away,
// and the triggers filling it, for when the keys in memory were forgotten. The
// private writer is one connection, so these temporary objects stay for the dry run.
func recordGone(ctx context.Context, w conn) error {
	for _, q := range []string{
		`CREATE TEMP TABLE dry_gone(classname TEXT NOT NULL, keyname TEXT NOT NULL, PRIMARY KEY(classname, keyname)) WITHOUT ROWID`,
		`CREATE TEMP TRIGGER dry_gone_delete AFTER DELETE ON main.instances BEGIN ` + gone + ` END`,
		`CREATE TEMP TRIGGER dry_gone_rename AFTER UPDATE OF keyname ON main.instances WHEN OLD.keyname <> NEW.keyname BEGIN ` + gone + ` END`,
	} {
		if _, err := w.execContext(ctx, q); err != nil {
			return fmt.Errorf("dry run: %w", err)
		}
	}
	return nil
}

// gone records OLD's key in dry_gone (a conflict clause of the outer statement would
// override an OR IGNORE here).
const gone = `INSERT INTO dry_gone SELECT OLD.classname, OLD.keyname WHERE NOT EXISTS
	(SELECT 1 FROM dry_gone WHERE classname = OLD.classname AND keyname = OLD.keyname);`

// known reports whether the private database holds (cls, key) or the run deleted or
// renamed it away.
func (d *dryRun) known(ctx context.Context, tx *Tx, cls, key string) (bool, error) {
	var known bool
	err := tx.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM main.instances WHERE classname = ?1 AND keyname = ?2)
		OR EXISTS (SELECT 1 FROM temp.dry_gone WHERE classname = ?1 AND keyname = ?2)`, cls, key).Scan(&known)
	if err != nil {
		return false, fmt.Errorf("dry run: read %s %s: %w", cls, key, err)
	}
	return known, nil
}
