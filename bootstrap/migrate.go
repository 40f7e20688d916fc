package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"dataservice/rules"
	"dataservice/store"
	"dataservice/store/model"
)

// block is one data-version migration block of the seed's table.
type block struct {
	version string
	// rc: the block also re-runs when SERVICE_VERSION starts with "<version>-RC".
	rc  bool
	run func(s *starter, ctx context.Context, tx *store.Migration) error
}

// blocks are the seed's migration blocks, in order. Versions compare as text.
var blocks = []block{
	{version: "4.2.0", run: (*starter).block420},
	{version: "4.4.0", run: (*starter).block440},
	{version: "4.5.0", run: (*starter).block450},
	{version: "4.6.0", rc: true, run: (*starter).block460},
	{version: "4.8.0", rc: true, run: (*starter).block480},
	{version: "4.9.0", rc: true, run: (*starter).block490},
}

func (b block) applies(dbVersion, serviceVersion string) bool {
	return dbVersion < b.version || (b.rc && strings.HasPrefix(serviceVersion, b.version+"-RC"))
}

// Pending returns the stored DB_VERSION ("" when absent) and the blocks a start with
// serviceVersion would run, changing nothing.
func Pending(ctx context.Context, db *store.DB, serviceVersion string) (string, []string, error) {
	dbv, err := db.Registry(ctx, store.RegDBVersion)
	if err != nil && !store.IsNotFound(err) {
		return "", nil, err
	}
	from := dbv
	var out []string
	if dbv == "" || dbv == "0" {
		out = append(out, "bootstrap")
		from = BootstrapVersion
	} else if dbv < "4.0.0" {
		return dbv, []string{"refused (DB_VERSION < 4.0.0)"}, nil
	}
	for _, b := range blocks {
		if b.applies(from, serviceVersion) {
			out = append(out, b.version)
			from = b.version
		}
	}
	if from != serviceVersion {
		out = append(out, "set DB_VERSION "+serviceVersion)
	}
	return dbv, out, nil
}

// migrate runs the refusal check, the backup, every applicable block (each in one
// transaction ending with its DB_VERSION) and the final version step.
func (s *starter) migrate(ctx context.Context, stored string, present bool) error {
	dbv, err := s.db.Registry(ctx, store.RegDBVersion)
	if err != nil {
		return s.failed(ctx, "migrations", err)
	}
	if present && dbv > s.o.Version {
		s.log.Warn("stored data is newer than this code", "db_version", dbv, "service_version", s.o.Version)
	}
	if s.backupDue(stored, present) {
		// checkBackup made sure before anything changed that there is a place and a tool.
		base := BackupBase(s.db, s.o.BackupDir)
		if base == "" {
			return s.failed(ctx, "backup", errors.New("no directory for the backup (SERVICE_BACKUP_DIR)"))
		}
		dest := backupName(base, stored, s.db.Now(), ".bak")
		if err := s.db.Backup(ctx, dest); err != nil {
			return s.failed(ctx, "backup", err)
		}
		s.log.Info("backup before migrating", "file", dest)
	}
	for _, b := range blocks {
		cur, err := s.db.Registry(ctx, store.RegDBVersion)
		if err != nil {
			return s.failed(ctx, "migrations", err)
		}
		if !b.applies(cur, s.o.Version) {
			continue
		}
		s.log.Info("migration block start", "block", b.version, "db_version", cur)
		err = s.mg.Migrate(ctx, func(tx *store.Migration) error {
			if err := b.run(s, ctx, tx); err != nil {
				return err
			}
			return tx.SetRegistry(ctx, store.RegDBVersion, b.version)
		})
		if err != nil {
			return s.failed(ctx, "migration block "+b.version, err)
		}
		s.log.Info("migration block done", "block", b.version)
		s.ran(b.version)
	}
	err = s.db.WithTx(ctx, func(tx *store.Tx) error {
		if err := tx.SetRegistry(ctx, store.RegDBVersion, s.o.Version); err != nil {
			return err
		}
		return tx.SetRegistry(ctx, store.RegDBVersionDate, s.o.VersionDate)
	})
	if err != nil {
		return s.failed(ctx, "set DB_VERSION", err)
	}
	return nil
}

// reload runs Reload: missing or failing entries are logged and start-up goes on
// (seed rule 2); any other error is returned and fails the block.
func (s *starter) reload(ctx context.Context, tx *store.Migration, file string, items []string, action model.Action) error {
	var err error
	if action == model.ActionInit {
		err = loadBuiltins(ctx, tx.Tx(), s.o.Init, file, items, action, s.log)
	} else {
		err = Reload(ctx, tx.Tx(), s.o.Init, file, items, action, s.log)
	}
	if errors.Is(err, ErrReloadEntries) {
		s.log.Error("reload failed", "file", file, "error", err)
		return nil
	}
	return err
}

// reloads runs several reloads in order, stopping at the first fatal error.
func (s *starter) reloads(ctx context.Context, tx *store.Migration, steps ...reloadStep) error {
	for _, r := range steps {
		if err := s.reload(ctx, tx, r.file, r.items, r.action); err != nil {
			return err
		}
	}
	return nil
}

type reloadStep struct {
	file   string
	items  []string
	action model.Action
}

func (s *starter) block420(ctx context.Context, tx *store.Migration) error {
	err := s.reloads(ctx, tx,
		reloadStep{"00_permission.yml", []string{"_permission:p_keyname_rename"}, ""},
		reloadStep{"20_home.yml", []string{"_home:code_editor", "_home:revision"}, ""},
		reloadStep{"60_ipam.yml", []string{"_schema:ipam_ip"}, ""},
		reloadStep{"30_dataview.yml", []string{"_dataview:user_default"}, ""})
	if err != nil {
		return err
	}
	for _, p := range []string{"p_schema_create", "p_schema_update", "p_schema_delete", "p_schemafield_read",
		"p_schemafield_create", "p_schemafield_update", "p_schemafield_delete"} {
		if err := tx.DeletePermission(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// The blocks' "add" steps create an object when it is missing and leave an existing
// one exactly as it is (action init): a re-run of a block (a release candidate, or a
// version that sorts lower as text) must not revert what users changed since.

func (s *starter) block440(ctx context.Context, tx *store.Migration) error {
	return s.reloads(ctx, tx,
		reloadStep{"40_pipeline.yml", []string{"_pipeline:bulk_delete_disabled"}, model.ActionInit},
		reloadStep{"00_permission.yml", []string{"_permission:p_api_load", "_permission:p_api_rawfile"}, model.ActionInit})
}

func (s *starter) block450(ctx context.Context, tx *store.Migration) error {
	return s.reload(ctx, tx, "00_permission.yml", []string{"_permission:p_api_conf"}, model.ActionInit)
}

// block460 runs its four steps independently: a missing `_pipeline` schema skips the
// rewrite only.
func (s *starter) block460(ctx context.Context, tx *store.Migration) error {
	if err := s.rewritePipelines(ctx, tx); err != nil {
		return err
	}
	if err := s.setCodeEditorURL(ctx, tx); err != nil {
		return err
	}
	return s.reloads(ctx, tx,
		reloadStep{"00_permission.yml", []string{"_permission:p_code_editor"}, model.ActionInit},
		reloadStep{"50_apikey.yml", []string{"_apikey:api_builtin"}, model.ActionInit})
}

// setCodeEditorURL updates the built-in `_home:code_editor` entry from its built-in
// file, the url only: users may have changed its other fields. A missing entry is
// logged as a failed reload (seed rule 2) and start-up goes on.
func (s *starter) setCodeEditorURL(ctx context.Context, tx *store.Migration) error {
	err := loadBuiltins(ctx, tx.Tx(), s.o.Init, "20_home.yml", []string{"_home:code_editor"}, model.ActionUpdate, s.log, "url")
	if errors.Is(err, ErrReloadEntries) {
		s.log.Error("reload failed", "file", "20_home.yml", "error", err)
		return nil
	}
	return err
}

// rewritePipelines rewrites every `_pipeline` content to a flat rule list; without
// the `_pipeline` schema there is nothing to rewrite. Each rewrite goes through the
// apply path (validated as any write of the content), without a revision.
func (s *starter) rewritePipelines(ctx context.Context, tx *store.Migration) error {
	sch, err := tx.Schema(ctx, "_pipeline")
	if store.IsNotFound(err) {
		s.log.Warn("4.6.0: schema _pipeline not found; no pipeline to rewrite")
		return nil
	}
	if err != nil {
		return err
	}
	rewritten := 0
	var after int64
	for {
		batch, err := tx.Instances(ctx, "_pipeline", after, 500)
		if err != nil {
			return err
		}
		for _, in := range batch {
			after = in.ID
			content, _ := in.Data["content"].(string)
			norm, changed := rules.Normalize(content)
			if !changed {
				continue
			}
			next := *in
			next.Data = cloneData(in.Data)
			next.Data["content"] = norm
			if _, err := tx.Apply(ctx, store.Write{Schema: sch, Old: in, New: &next, Action: model.ActionUpdate}); err != nil {
				return fmt.Errorf("rewrite pipeline %s: %w", in.Keyname, err)
			}
			rewritten++
		}
		if len(batch) < 500 {
			break
		}
	}
	s.log.Info("pipelines rewritten to flat rule lists", "count", rewritten)
	return nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// refuse applies the seed's first migration row: data older than 4.0.0 cannot be
// migrated. It runs after the configuration sync (seed order: step 3, then step 4)
// and before the backup and the blocks, so the registry and the data stay as they were.
func (s *starter) refuse(ctx context.Context, dbv string) error {
	s.log.Log(ctx, LevelCritical, "stored data is older than 4.0.0 and cannot be migrated by this release",
		"db_version", dbv, "service_version", s.o.Version)
	s.log.Log(ctx, LevelCritical, "upgrade through a 4.0.x or 4.1.x release first, then start this release again")
	s.o.Sleep(ctx, 10*time.Second)
	return ErrRefused
}

// backupDue says whether this start backs the data up before migrating: the stored
// data is at another version than the code (and not refused as too old), and
// SERVICE_BACKUP is on.
func (s *starter) backupDue(stored string, present bool) bool {
	return present && stored >= "4.0.0" && stored != s.o.Version && s.o.Backup
}

// ErrBackupRefused is a start that must back up before migrating and cannot: no
// directory for a PostgreSQL database's backup, or no pg_dump. Nothing was changed.
var ErrBackupRefused = errors.New("the backup before migrating cannot be taken; nothing was changed")

// checkBackup runs before anything changes, when a backup is due: it refuses the
// start when the backup cannot be taken, so a refusal leaves the database as it was
// (no configuration sync, no block, no registry write) rather than failing half-way.
func (s *starter) checkBackup(ctx context.Context, stored string) error {
	var why error
	if BackupBase(s.db, s.o.BackupDir) == "" {
		why = errors.New("SERVICE_BACKUP_DIR is not set: a PostgreSQL database is backed up before migrating " +
			"with pg_dump into that directory (on the host of this node); set it, or set SERVICE_BACKUP=off " +
			"once you have a backup of your own (docs/postgres.md, \"Upgrading\")")
	} else if err := s.db.CanBackup(); err != nil {
		why = fmt.Errorf("%w; or set SERVICE_BACKUP=off once you have a backup of your own", err)
	} else {
		return nil
	}
	s.log.Log(ctx, LevelCritical, "start refused: the data must be migrated and backed up first, and the backup cannot be taken",
		"db", s.db.Path(), "db_version", stored, "service_version", s.o.Version, "reason", why.Error())
	return fmt.Errorf("%w: %w", ErrBackupRefused, why)
}
