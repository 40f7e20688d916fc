package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spf13/pflag"

	"dataservice/bootstrap"
	"dataservice/builtin"
	"dataservice/store"
)

// settingFlagNames are the flags that override SERVICE_* settings; an empty value is refused.
var settingFlagNames = map[string]bool{"db": true, "listen": true, "base-url": true, "log-level": true,
	"log-format": true, "backup": true, "workers": true, "disk-warn": true,
	"trusted-proxies": true}

// dbFlags registers the settings flags of a command that opens the database.
// startUp: the command runs the start-up sequence (serve, migrate), which adds
// --backup, the only reader of SERVICE_BACKUP. Every other command opens the
// database as it is and logs at warn unless told otherwise: the start-up sequence's
// info lines are not theirs, and would break the --wait progress line.
func (c *cli) dbFlags(fs *pflag.FlagSet, startUp bool) {
	fs.StringVar(&c.sf.db, "db", "", "SQLite file (SERVICE_DB, default ./dataservice.db)")
	defaultLevel := "warn"
	if startUp {
		defaultLevel = "info"
	}
	fs.StringVar(&c.sf.logLevel, "log-level", "", "debug, info, warn or error (SERVICE_LOG_LEVEL; default "+defaultLevel+")")
	fs.StringVar(&c.sf.logFormat, "log-format", "", "text or json (SERVICE_LOG_FORMAT)")
	if startUp {
		fs.StringVar(&c.sf.backup, "backup", "", "on or off: back the data up before migrating (SERVICE_BACKUP)")
	}
	c.sf.quiet = !startUp
}

// openStartUp validates settings, opens the database (creating it and applying its
// table layout steps) and runs the start-up sequence: migrate's way to open it.
func (c *cli) openStartUp(ctx context.Context) (*store.DB, *settings, *slog.Logger, error) {
	s, err := loadSettings(c.getenv, &c.sf)
	if err != nil {
		return nil, nil, nil, err
	}
	log := c.logger(s)
	if err := checkDBPath(s.DB); err != nil {
		return nil, nil, nil, err
	}
	db, mg, err := store.OpenMigrator(ctx, s.DB, store.Options{Logger: log, SecretKeyFile: s.SecretKeyFile})
	if err != nil {
		return nil, nil, nil, err
	}
	if err := checkBesideNodes(ctx, db, s, log); err != nil {
		db.Close()
		return nil, nil, nil, err
	}
	if err := startUp(ctx, mg, s, log); err != nil {
		db.Close()
		return nil, nil, nil, err
	}
	return db, s, log, nil
}

// open opens the database for a command other than serve and migrate: as it is,
// without the start-up sequence, so it never touches admin, LAST_START or the
// backups. A file that is missing or empty, has table layout steps pending, or
// holds data of another version is refused with a message saying what to run, and
// nothing is written to it.
func (c *cli) open(ctx context.Context) (*store.DB, *settings, *slog.Logger, error) {
	return c.openAsIs(ctx, true)
}

// openAsIs is open; current: the data must be at the code version (backup copies
// any version).
func (c *cli) openAsIs(ctx context.Context, current bool) (*store.DB, *settings, *slog.Logger, error) {
	s, err := loadSettings(c.getenv, &c.sf)
	if err != nil {
		return nil, nil, nil, err
	}
	log := c.logger(s)
	if err := checkDBExists(s.DB); err != nil {
		return nil, nil, nil, err
	}
	if err := checkDBPath(s.DB); err != nil {
		return nil, nil, nil, err
	}
	db, err := store.Open(ctx, s.DB, store.Options{Logger: log, AsIs: true, SecretKeyFile: s.SecretKeyFile})
	if errors.Is(err, store.ErrLayoutPending) {
		return nil, nil, nil, fmt.Errorf("%w: %s", err, runMigrate)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if current {
		if err := checkCurrent(ctx, db, s); err != nil {
			db.Close()
			return nil, nil, nil, err
		}
	}
	return db, s, log, nil
}

// runMigrate ends the message of a command refused because the file needs the
// start-up sequence.
const runMigrate = "run `dataservice migrate` (or `serve`) first, with the service's settings"

// checkDBExists refuses a missing or empty database file: only serve and migrate
// create one. A PostgreSQL database is the server's to check: opening it as it is
// refuses one without the service's tables (store.ErrLayoutPending).
func checkDBExists(path string) error {
	if !store.IsFileAddr(path) {
		return nil
	}
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) || (err == nil && st.Size() == 0) {
		return fmt.Errorf("no database at %s: run `dataservice migrate` (or `serve`) first", path)
	}
	return nil // any other failure is checkDBPath's to explain
}

// checkCurrent refuses data that is not at the code version, naming what to do.
func checkCurrent(ctx context.Context, db *store.DB, s *settings) error {
	err := bootstrap.Current(ctx, db, s.Version)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, bootstrap.ErrNeedsMigrate):
		return fmt.Errorf("database %s: %w: %s", store.RedactURL(s.DB), err, runMigrate)
	case errors.Is(err, bootstrap.ErrNewerData):
		return fmt.Errorf("database %s: %w: use that version of dataservice (or a newer one) with this database", store.RedactURL(s.DB), err)
	}
	return fmt.Errorf("database %s: %w", store.RedactURL(s.DB), err)
}

// checkDBPath names the usual reasons a database cannot be opened, which SQLite reports
// only as "unable to open database file": a missing directory, a file that is a
// directory, or no permission to the directory or the file. A PostgreSQL URL names
// no file: the server answers for it when it is opened.
func checkDBPath(path string) error {
	if !store.IsFileAddr(path) {
		return nil
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("database %s: directory %s does not exist (create it first)", path, dir)
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("database %s: permission denied on directory %s", path, dir)
	case err != nil:
		return fmt.Errorf("database %s: %w", path, err)
	case !st.IsDir():
		return fmt.Errorf("database %s: %s is not a directory", path, dir)
	}
	st, err = os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if syscall.Access(dir, 2|1) != nil { // W_OK|X_OK: the file must be created there
			return fmt.Errorf("database %s: permission denied: cannot create files in directory %s", path, dir)
		}
		return nil
	case err != nil:
		return fmt.Errorf("database %s: %w", path, err)
	case st.IsDir():
		return fmt.Errorf("database %s: is a directory, not a file", path)
	}
	if syscall.Access(path, 4) != nil { // R_OK
		return fmt.Errorf("database %s: permission denied: the file is not readable", path)
	}
	if syscall.Access(path, 2) != nil { // W_OK
		return fmt.Errorf("database %s: %w", path, errReadOnlyFile)
	}
	return nil
}

// errReadOnlyFile: the process may read the database file but not write it. Commands
// that only read open it read-only; the others stop with this error.
var errReadOnlyFile = errors.New("permission denied: the file is read-only for this user " +
	"(commands that change data need write access; export, list and show commands, and migrate --status, work)")

// openRead opens the database for a command that only reads. A file this process may
// not write is opened read-only, with a warning; otherwise it is open. Either way the
// data must be at the code version.
func (c *cli) openRead(ctx context.Context) (*store.DB, *settings, *slog.Logger, error) {
	s, err := loadSettings(c.getenv, &c.sf)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := checkDBPath(s.DB); errors.Is(err, errReadOnlyFile) {
		if err := checkDBExists(s.DB); err != nil {
			return nil, nil, nil, err
		}
		log := c.logger(s)
		db, err := store.Open(ctx, s.DB, store.Options{Logger: log, ReadOnly: true, SecretKeyFile: s.SecretKeyFile})
		if err != nil {
			return nil, nil, nil, err
		}
		if err := checkCurrent(ctx, db, s); err != nil {
			db.Close()
			return nil, nil, nil, err
		}
		log.Warn("database file is read-only: reading only", "db", s.DB)
		return db, s, log, nil
	}
	return c.open(ctx)
}

// reading is the run function of a command that only reads: the database opened as
// openRead opens it, handed to fn, closed after.
func reading(c *cli, fn func(ctx context.Context, db *store.DB) error) func(context.Context, []string) error {
	return func(ctx context.Context, _ []string) error {
		db, _, _, err := c.openRead(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		return fn(ctx, db)
	}
}

// startUp runs the start-up sequence with the settings on the database of mg (the
// migration door OpenMigrator gave); a refusal is returned as is.
func startUp(ctx context.Context, mg *store.Migrator, s *settings, log *slog.Logger) error {
	return startUpWith(ctx, mg, s, log, nil)
}

// startUpWith is startUp telling onBlock each step that changed the data version.
func startUpWith(ctx context.Context, mg *store.Migrator, s *settings, log *slog.Logger, onBlock func(string)) error {
	err := bootstrap.Run(ctx, mg, bootstrap.Options{Version: s.Version, VersionDate: s.VersionDate,
		APIKeySecret: s.APIKeySecret, AdminPassword: s.AdminPassword, Backup: s.Backup, BackupDir: s.BackupDir,
		Init: builtin.Init(), Logger: log, OnBlock: onBlock})
	if err != nil && !errors.Is(err, bootstrap.ErrRefused) {
		return fmt.Errorf("start-up: %w", err)
	}
	return err
}
