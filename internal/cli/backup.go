package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"dataservice/bootstrap"
	"dataservice/internal/clip"
	"dataservice/store"
)

// backup: dataservice backup FILE — a consistent online copy of the database, of any
// data version (the file is opened as it is).
func setupBackup(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, false)
	return func(ctx context.Context, args []string) error {
		s, err := loadSettings(c.getenv, &c.sf)
		if err != nil {
			return err
		}
		if !store.IsFileAddr(s.DB) {
			err := c.backupPostgres(ctx, s, args[0])
			if errors.Is(err, store.ErrLayoutPending) {
				// A database without the service's tables (or an older layout) is
				// refused as the other commands refuse it: saying what to run.
				return fmt.Errorf("%w: %s", err, runMigrate)
			}
			return err
		}
		db, _, _, err := c.openAsIs(ctx, false)
		if err != nil {
			return err
		}
		defer db.Close()
		if err := db.Backup(ctx, args[0]); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "backup written to %s\n", args[0])
		c.tellSealed(ctx, db, "backed up", keepKeyAdvice)
		return nil
	}
}

// keepKeyAdvice is backup's advice on the key file of the secrets it wrote sealed.
const keepKeyAdvice = "they open only with the key file (%s), which the backup does not hold: keep a copy of it with the backup"

// restore: dataservice restore FILE — replace the database with a backup. The copy is
// checked first (integrity_check, a readable registry, DB_VERSION not newer than this
// code, and only the schema objects the service's layout creates: a file brings back
// data, not code); it refuses while any process has the database open; the current
// file is kept as <db>.before-restore.<timestamp>; the swap is one rename. The next
// start migrates. With --force, the copy's other triggers, views and indexes are
// dropped and changed or missing ones re-created (each reported) instead of refusing
// it; a table is never dropped or replaced, even with --force (its rows are the
// data). The copy's query-planner statistics are cleared: a crafted sqlite_stat1 could
// steer every query into full scans.
func setupRestore(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, false)
	force := fs.Bool("force", false, "drop the backup's triggers, views and indexes the service does not create and re-create changed or missing ones as the service creates them, reporting each (tables are never dropped or replaced)")
	return func(ctx context.Context, args []string) error { return c.restore(ctx, args[0], *force) }
}

func (c *cli) restore(ctx context.Context, file string, force bool) error {
	s, err := loadSettings(c.getenv, &c.sf)
	if err != nil {
		return err
	}
	if !store.IsFileAddr(s.DB) {
		err = c.restorePostgres(ctx, s, file, force)
	} else {
		err = c.restoreFile(ctx, s, file, force)
	}
	if err != nil {
		return err
	}
	// Once the restored database is in place (and unlocked): the key its secrets need
	// is the one of the database the backup was taken from.
	if db, _, _, err := c.openAsIs(ctx, false); err == nil {
		c.tellSealed(ctx, db, "restored", "they open only with the key of the database the backup was taken from, "+
			"in the key file %s: put it there before starting, or set the secrets again")
		db.Close()
	}
	return nil
}

// restoreFile is restore on SQLite.
func (c *cli) restoreFile(ctx context.Context, s *settings, file string, force bool) error {
	src, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	dbPath, err := filepath.Abs(s.DB)
	if err != nil {
		return err
	}
	if st, err := os.Stat(src); err != nil {
		return fmt.Errorf("backup %s: %w", src, err)
	} else if !st.Mode().IsRegular() {
		return fmt.Errorf("backup %s: not a regular file", src)
	}
	if src == dbPath {
		return fmt.Errorf("backup %s is the database itself", src)
	}
	// Fail early, before copying, when the database is in use; checked again under the
	// lock before the swap.
	if unlock, err := store.LockExclusive(dbPath); err == nil {
		unlock()
	} else if !os.IsNotExist(err) {
		return fmt.Errorf("refused: %w", err)
	}

	// A consistent, self-contained copy beside the database (same file system, so the
	// swap is one rename), written through SQLite so a WAL next to FILE is included.
	tmp, err := os.CreateTemp(filepath.Dir(dbPath), filepath.Base(dbPath)+".restore.*.partial")
	if err != nil {
		return err
	}
	partial := tmp.Name()
	tmp.Close()
	keep := false
	defer func() {
		if !keep {
			os.Remove(partial)
		}
	}()
	if err := store.CopyFile(ctx, src, partial); err != nil {
		return fmt.Errorf("backup %s: cannot be read as an SQLite database: %w", src, err)
	}
	dbv, err := store.CheckFileVersion(ctx, partial)
	if err != nil {
		return fmt.Errorf("backup %s: %w", src, err)
	}
	// Text comparison, as the migrations compare.
	if bootstrap.Newer(dbv, s.Version) {
		return fmt.Errorf("backup %s: DB_VERSION %s is newer than this code (%s): restore it with that release", src, clip.Quote(dbv), s.Version)
	}
	// Only the copy is changed, never FILE.
	repaired, err := store.CheckFileSchema(ctx, partial, force)
	if se := (*store.SchemaError)(nil); errors.As(err, &se) && !force && se.Repairable() {
		return fmt.Errorf("backup %s: %w; `dataservice restore --force FILE` drops or replaces them", src, err)
	}
	if err != nil {
		return fmt.Errorf("backup %s: %w", src, err)
	}
	for _, line := range repaired {
		fmt.Fprintf(c.stdout, "%s\n", line)
	}
	cleared, err := store.ClearStatistics(ctx, partial)
	if err != nil {
		return fmt.Errorf("backup %s: clear query-planner statistics: %w", src, err)
	}
	if cleared > 0 {
		fmt.Fprintf(c.stdout, "cleared the backup's query-planner statistics (%d rows of sqlite_stat1/sqlite_stat4)\n", cleared)
	}
	if _, err := store.ForgetNodes(ctx, partial); err != nil {
		return fmt.Errorf("backup %s: forget the nodes it records: %w", src, err)
	}
	if err := os.Chmod(partial, 0o600); err != nil {
		return err
	}
	// Run as root next to a service user's database (systemd DynamicUser): the restored
	// file keeps the current file's owner, or the service could not open it.
	if st, err := os.Stat(dbPath); err == nil && os.Geteuid() == 0 {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			if err := os.Chown(partial, int(sys.Uid), int(sys.Gid)); err != nil {
				return err
			}
		}
	}

	unlock, err := store.LockExclusive(dbPath)
	switch {
	case err == nil:
		defer unlock()
	case os.IsNotExist(err):
		unlock = nil
	default:
		return fmt.Errorf("refused: %w", err)
	}
	kept := ""
	if unlock != nil {
		if err := store.CheckpointFile(ctx, dbPath); err != nil {
			return fmt.Errorf("checkpoint the current database: %w", err)
		}
		kept = fmt.Sprintf("%s.before-restore.%s", dbPath, time.Now().UTC().Format("20060102T150405.000Z"))
		if err := os.Link(dbPath, kept); err != nil {
			return fmt.Errorf("keep the current database as %s: %w", kept, err)
		}
	}
	// The old file's WAL and shared-memory index must not be applied to the new file.
	for _, ext := range []string{"-wal", "-shm"} {
		if err := os.Remove(dbPath + ext); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	if err := os.Rename(partial, dbPath); err != nil {
		return fmt.Errorf("swap: %w", err)
	}
	keep = true
	if d, err := os.Open(filepath.Dir(dbPath)); err == nil {
		d.Sync()
		d.Close()
	}
	fmt.Fprintf(c.stdout, "restored %s (DB_VERSION %s) into %s\n", src, dbv, dbPath)
	if kept != "" {
		fmt.Fprintf(c.stdout, "the previous database is kept as %s\n", kept)
	}
	if dbv != s.Version {
		fmt.Fprintf(c.stdout, "the next `dataservice migrate` (or `serve`) migrates it from %s to %s; other commands refuse it until then\n", clip.Text(dbv), s.Version)
	}
	return nil
}
