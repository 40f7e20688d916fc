package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"syscall"

	"dataservice/store/model"
)

// dryDiskFull marks a full disk met by a dry run in its private database: not a write
// of the database, so no disk-full episode of it (NoSpace passes it through).
type dryDiskFull struct{ e *model.Error }

func (d *dryDiskFull) Error() string { return d.e.Error() }
func (d *dryDiskFull) Unwrap() error { return d.e }

// dryRunFull reports whether err is a dry run's full disk (dryDiskFull).
func dryRunFull(err error) bool {
	var d *dryDiskFull
	return errors.As(err, &d)
}

// Aborts reports whether err stops a whole operation rather than refusing one entry or
// instance: an internal error, a full disk (every later write would fail too), or text
// the engine refused (PostgreSQL aborts the transaction it ran in).
func Aborts(err error) bool {
	code := ErrorCode(err)
	return code == model.EInternal || code == model.EDiskFull || isBadText(err)
}

// NoSpace returns err as an EDiskFull error naming the database file when err is a
// full disk, and err unchanged otherwise (or when it already is an EDiskFull error).
// Every write transaction's failure passes through it (WithTx, Commit, LoadStream);
// a caller holding a full-disk error from elsewhere (a spooled body) passes it too, so
// the episode is logged. The first full-disk failure after a successful commit is
// logged at error level, once: a full disk fails every write until space is freed,
// and one line per request would bury the rest of the log.
func (db *DB) NoSpace(err error) error {
	if err == nil || !isDiskFull(err) {
		return err
	}
	var e *model.Error
	if errors.As(err, &e) && (e.Code != model.EDiskFull || dryRunFull(err)) {
		// A caller-safe error of another kind that merely wraps the disk's, or a dry
		// run's private database that filled the disk: keep it.
		return err
	}
	if db.diskFull.CompareAndSwap(false, true) {
		attrs := []any{"db", db.path, "error", redactErr(err, db.addr)}
		if free, _, serr := db.DiskSpace(); db.IsFile() && serr == nil {
			attrs = append(attrs, "free_bytes", free)
		}
		db.log.Error("disk full: writes fail until space is freed", attrs...)
	}
	if e != nil {
		return err
	}
	if !db.IsFile() {
		return model.ServerDiskFullError(err)
	}
	return model.DiskFullError("the database "+db.path, err)
}

// DiskFull reports whether the last write transaction of this process failed for lack
// of space and none has committed since.
func (db *DB) DiskFull() bool { return db.diskFull.Load() }

// committed ends a disk-full episode: a write transaction committed again.
func (db *DB) committed() {
	if db.diskFull.CompareAndSwap(true, false) {
		db.log.Info("disk space available again: a write committed", "db", db.path)
	}
}

// DiskSpace is the free space (blocks available to unprivileged users: root may have
// a reserve beyond it)
// and the size, in bytes, of the filesystem holding the database file.
func (db *DB) DiskSpace() (free, size uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(db.path), &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", filepath.Dir(db.path), err)
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}
