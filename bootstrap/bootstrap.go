// Package bootstrap runs the start-up sequence: under an exclusive lock it bootstraps
// an empty database from the built-in files, synchronises configuration, runs the
// data-version migration blocks, seeds the built-in API key secret and forces the
// administrator password.
package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"sort"
	"time"

	"github.com/google/uuid"

	"dataservice/store"
	"dataservice/store/codec"
	"dataservice/store/model"
)

// LevelCritical is the log level of critical messages (above Error).
const LevelCritical = slog.Level(12)

// BootstrapVersion is the DB_VERSION a freshly bootstrapped database starts from.
const BootstrapVersion = "4.2.0"

// ErrRefused means the stored data is too old for this code (DB_VERSION < 4.0.0).
var ErrRefused = errors.New("database version too old: upgrade through a 4.0.x or 4.1.x release first")

// Options configure the start-up sequence.
type Options struct {
	Version     string // SERVICE_VERSION
	VersionDate string // SERVICE_VERSION_DATE
	// APIKeySecret is SERVICE_APIKEY_SECRET ("" = not set).
	APIKeySecret string
	// AdminPassword is SERVICE_ADMIN_PASSWORD ("" = not set: the admin account is locked).
	AdminPassword string
	// Backup backs the data up before migrating (SERVICE_BACKUP): a copy of the SQLite
	// file, a pg_dump archive of a PostgreSQL database.
	Backup bool
	// BackupDir is SERVICE_BACKUP_DIR, the directory of the automatic backups (the
	// backup before migrating, SQLite's scheduled backups). "": beside the SQLite file;
	// on PostgreSQL a start that must back up before migrating is then refused.
	BackupDir string
	// Init is the built-in init directory.
	Init   fs.FS
	Logger *slog.Logger
	// OnBlock, when set, is told each step that changed the data version: "bootstrap"
	// and every migration block that ran (metrics).
	OnBlock func(name string)
	// Sleep waits before a refused start exits (tests shorten it).
	Sleep func(ctx context.Context, d time.Duration)
}

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Sleep == nil {
		o.Sleep = func(ctx context.Context, d time.Duration) {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
	}
}

type starter struct {
	db  *store.DB
	mg  *store.Migrator
	o   Options
	log *slog.Logger
}

// Run runs the whole start-up sequence of the seed, in order, under the lock, on the
// database of mg. The Migrator is the migration door: the opener hands it here, and
// nothing else that holds the database can migrate.
func Run(ctx context.Context, mg *store.Migrator, o Options) error {
	db := mg.DB()
	o.defaults()
	if o.Init == nil {
		return errors.New("start-up: no init directory")
	}
	// The database's start-up lock: of several processes (nodes) starting together,
	// one runs the sequence while the others wait, then find it done.
	unlock, err := db.LockStartup(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	s := &starter{db: db, mg: mg, o: o, log: o.Logger}
	return s.run(ctx)
}

func (s *starter) run(ctx context.Context) error {
	// 1. Read INSTANCE_UUID and DB_VERSION.
	uid, _ := s.db.Registry(ctx, store.RegInstanceUUID)
	dbv, err := s.db.Registry(ctx, store.RegDBVersion)
	if err != nil && !store.IsNotFound(err) {
		return err
	}
	present := dbv != "" && dbv != "0"
	s.log.Info("start-up", "db_version", dbv, "service_version", s.o.Version, "instance_uuid", uid)
	if present {
		s.warnVersionOrder(dbv)
	} else {
		s.warnVersionOrder("") // the code version against the blocks only
	}
	// A backup before migrating that cannot be taken refuses the start before anything
	// changes.
	if s.backupDue(dbv, present) {
		if err := s.checkBackup(ctx, dbv); err != nil {
			return err
		}
	}
	// 2. Bootstrap an empty database.
	if !present {
		if err := s.bootstrap(ctx); err != nil {
			return s.failed(ctx, "bootstrap", err)
		}
		s.ran("bootstrap")
	}
	// 3. Synchronise configuration.
	if err := s.db.WithTx(ctx, func(tx *store.Tx) error {
		return tx.SyncConfig(ctx)
	}); err != nil {
		return s.failed(ctx, "configuration", err)
	}
	// 4. Migrations. Their first row refuses data older than 4.0.0; configuration has
	// been synchronised by then (seed order), the registry is left as it was.
	if present && dbv < "4.0.0" {
		return s.refuse(ctx, dbv)
	}
	if err := s.migrate(ctx, dbv, present); err != nil {
		return err
	}
	// 5. Built-in API key secret, then the administrator account.
	if err := s.mg.Migrate(ctx, func(tx *store.Migration) error {
		if err := s.seedAPIKey(ctx, tx); err != nil {
			return err
		}
		return s.forceAdmin(ctx, tx)
	}); err != nil {
		return s.failed(ctx, "keys and admin", err)
	}
	// 6. LAST_START or LAST_START_FAILED.
	now := s.db.Now().UTC().Format(time.RFC3339)
	final, _ := s.db.Registry(ctx, store.RegDBVersion)
	if final == s.o.Version {
		return s.db.SetRegistry(ctx, store.RegLastStart, now)
	}
	// The seed's step 6 records the failure and logs it; it does not stop the start.
	// (The last migration step sets DB_VERSION to SERVICE_VERSION, so this is reached
	// only if the registry is changed behind the sequence's back.)
	s.log.Log(ctx, LevelCritical, "stored data version differs from code version after migrations",
		"db_version", final, "service_version", s.o.Version)
	return s.db.SetRegistry(ctx, store.RegLastStartFailed, now)
}

// ran reports a step that ran to the OnBlock hook.
func (s *starter) ran(name string) {
	if s.o.OnBlock != nil {
		s.o.OnBlock(name)
	}
}

// failed logs a critical message for a failed step, records LAST_START_FAILED and
// returns the error.
func (s *starter) failed(ctx context.Context, step string, err error) error {
	s.log.Log(ctx, LevelCritical, "start-up step failed", "step", step, "error", err)
	if rerr := s.db.SetRegistry(ctx, store.RegLastStartFailed, s.db.Now().UTC().Format(time.RFC3339)); rerr != nil {
		s.log.Error("record LAST_START_FAILED", "error", rerr)
	}
	return fmt.Errorf("%s: %w", step, err)
}

// bootstrap loads 00_permission.yml, then every other regular .yml file in path
// order, and sets DB_VERSION and a new INSTANCE_UUID, in one transaction.
func (s *starter) bootstrap(ctx context.Context) error {
	s.log.Info("bootstrap: empty database, loading built-in definitions")
	return s.mg.Migrate(ctx, func(tx *store.Migration) error {
		if err := s.loadFile(ctx, tx.Tx(), "00_permission.yml", "_permission"); err != nil {
			return err
		}
		files, err := InitFiles(s.o.Init)
		if err != nil {
			return err
		}
		for _, f := range files {
			if err := s.loadFile(ctx, tx.Tx(), f, ""); err != nil {
				return err
			}
		}
		if err := tx.SetRegistry(ctx, store.RegDBVersion, BootstrapVersion); err != nil {
			return err
		}
		return tx.SetRegistry(ctx, store.RegInstanceUUID, uuid.NewString())
	})
}

// InitFiles lists the .yml files of the init directory other than 00_permission.yml:
// regular files only (no symlinks), at any depth, in lexicographic order of path.
func InitFiles(fsys fs.FS) ([]string, error) {
	var out []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !d.Type().IsRegular() || path.Ext(p) != ".yml" || p == "00_permission.yml" {
			return nil
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read init directory: %w", err)
	}
	sort.Strings(out)
	return out, nil
}

// loadFile loads one built-in file with every permission. Invalid YAML is logged and
// skipped, an empty file skipped; onlyClass (if set) restricts the entries loaded.
func (s *starter) loadFile(ctx context.Context, tx *store.Tx, name, onlyClass string) error {
	data, err := fs.ReadFile(s.o.Init, name)
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	entries, err := codec.ParseDocument(name, data)
	if err != nil {
		s.log.Error("bootstrap: invalid built-in file skipped", "file", name, "error", err)
		return nil
	}
	if len(entries) == 0 {
		return nil
	}
	if onlyClass != "" {
		kept := entries[:0]
		for _, e := range entries {
			if cls, _ := e.Key(); cls == onlyClass {
				kept = append(kept, e)
			} else {
				s.log.Warn("bootstrap: entry is not a permission, skipped", "file", name, "classname", cls)
			}
		}
		entries = kept
	}
	res, err := tx.Load(ctx, entries, store.LoadOptions{System: true, NoRevisions: true})
	if err != nil {
		return fmt.Errorf("load %s: %w", name, err)
	}
	for _, m := range res.Messages {
		s.log.Error("bootstrap: built-in entry failed", "file", name, "entry", m.String())
	}
	return nil
}

// seedAPIKey sets the api_builtin secret from SERVICE_APIKEY_SECRET when the key
// exists and has no secret yet.
func (s *starter) seedAPIKey(ctx context.Context, tx *store.Migration) error {
	if s.o.APIKeySecret == "" {
		return nil
	}
	in, err := tx.Instance(ctx, "_apikey", "api_builtin")
	if store.IsNotFound(err) {
		s.log.Warn("built-in API key api_builtin not found: secret not seeded")
		return nil
	}
	if err != nil {
		return err
	}
	if sec, _ := in.Data["secret"].(string); sec != "" {
		return nil
	}
	sch, err := tx.Schema(ctx, "_apikey")
	if err != nil {
		return err
	}
	next := *in
	next.Data = cloneData(in.Data)
	next.Data["secret"] = model.HashSecret(s.o.APIKeySecret)
	s.log.Info("built-in API key secret seeded", "key", "api_builtin")
	_, err = tx.Apply(ctx, store.Write{Schema: sch, Old: in, New: &next, Action: model.ActionUpdate})
	return err
}

// forceAdmin applies SERVICE_ADMIN_PASSWORD to the admin account: set it (when it
// differs) and activate the account, or lock the account when it is not set.
func (s *starter) forceAdmin(ctx context.Context, tx *store.Migration) error {
	in, err := tx.Instance(ctx, "_user", "admin")
	if store.IsNotFound(err) {
		s.log.Info("no admin account: password step skipped")
		return nil
	}
	if err != nil {
		return err
	}
	sch, err := tx.Schema(ctx, "_user")
	if err != nil {
		return err
	}
	next := *in
	next.Data = cloneData(in.Data)
	changed := false
	if s.o.AdminPassword != "" {
		stored, _ := in.Data["password"].(string)
		if stored == "" || !model.VerifySecret(s.o.AdminPassword, stored) {
			next.Data["password"] = model.HashSecret(s.o.AdminPassword)
			changed = true
			s.log.Info("admin password set from SERVICE_ADMIN_PASSWORD")
		}
		if !in.IsEnabled {
			next.IsEnabled, changed = true, true
			s.log.Info("admin account activated")
		}
	} else if in.IsEnabled {
		next.IsEnabled, changed = false, true
		s.log.Warn("SERVICE_ADMIN_PASSWORD not set: admin account locked")
	}
	if !changed {
		return nil
	}
	_, err = tx.Apply(ctx, store.Write{Schema: sch, Old: in, New: &next, Action: model.ActionUpdate})
	return err
}

func cloneData(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
