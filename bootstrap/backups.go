package bootstrap

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"dataservice/store"
)

// scheduledSuffix ends the names of scheduled backups; only these are pruned.
const scheduledSuffix = ".scheduled.bak"

// backupName is `<db>.<DB_VERSION>.<UTC timestamp, ms><suffix>`, with -2, -3… before the
// suffix when the name exists (the naming of the backup before migrating, whose suffix
// is ".bak").
func backupName(dbPath, dbVersion string, now time.Time, suffix string) string {
	base := fmt.Sprintf("%s.%s.%s", dbPath, dbVersion, now.UTC().Format("20060102T150405.000Z"))
	dest := base + suffix
	for i := 2; fileExists(dest); i++ {
		dest = fmt.Sprintf("%s-%d%s", base, i, suffix)
	}
	return dest
}

// BackupBase is the path the names of db's automatic backups start with (the backup
// before migrating, scheduled backups): in dir (SERVICE_BACKUP_DIR) when set, the
// SQLite file's name or the PostgreSQL database's; without dir, the SQLite file
// itself (its backups are beside it), and "" on PostgreSQL: a server's database has
// no place on this host by default.
func BackupBase(db *store.DB, dir string) string {
	switch {
	case db.IsFile() && dir == "":
		return db.Path()
	case db.IsFile():
		return filepath.Join(dir, filepath.Base(db.Path()))
	case dir == "":
		return ""
	}
	name := "dataservice"
	if u, err := url.Parse(db.Path()); err == nil && strings.Trim(u.Path, "/") != "" {
		name = filepath.Base(strings.Trim(u.Path, "/"))
	}
	return filepath.Join(dir, name)
}

// backupFile is one automatic backup.
type backupFile struct {
	path string
	mod  time.Time
}

// backups lists the complete backups named after base (`<base>.*.bak`; `.partial`
// leftovers are not backups), newest first; scheduledOnly keeps the scheduled ones.
func backups(basePath string, scheduledOnly bool) ([]backupFile, error) {
	dir, base := filepath.Dir(basePath), filepath.Base(basePath)+"."
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []backupFile
	for _, e := range ents {
		n := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(n, base) || !strings.HasSuffix(n, ".bak") {
			continue
		}
		if scheduledOnly && !strings.HasSuffix(n, scheduledSuffix) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, backupFile{path: filepath.Join(dir, n), mod: info.ModTime()})
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].mod.Equal(out[j].mod) {
			return out[i].mod.After(out[j].mod)
		}
		return out[i].path > out[j].path
	})
	return out, nil
}

// LastBackup returns the modification time of the newest complete backup named after
// base (BackupBase: scheduled, before-migration or any other `<base>.*.bak`); ok is
// false when there is none or base is "".
func LastBackup(base string) (t time.Time, ok bool) {
	if base == "" {
		return time.Time{}, false
	}
	list, err := backups(base, false)
	if err != nil || len(list) == 0 {
		return time.Time{}, false
	}
	return list[0].mod, true
}

// ScheduledBackup takes a scheduled backup when BACKUP_INTERVAL_HOURS is not 0 and the
// newest scheduled backup is at least that old, then keeps the newest BACKUP_KEEP
// scheduled backups. They are in dir (SERVICE_BACKUP_DIR) when set, else beside the
// file. It returns the new file ("" when none was due).
func ScheduledBackup(ctx context.Context, db *store.DB, dir string, now time.Time, log *slog.Logger) (string, error) {
	hours := db.ConfigInt(ctx, store.ConfigBackupIntervalHours)
	if hours <= 0 || !db.IsFile() {
		// PostgreSQL: no file to copy beside; BackupLoop says so once.
		return "", nil
	}
	base := BackupBase(db, dir)
	list, err := backups(base, true)
	if err != nil {
		return "", fmt.Errorf("scheduled backup: %w", err)
	}
	if len(list) > 0 && now.Sub(list[0].mod) < time.Duration(hours)*time.Hour {
		return "", nil
	}
	dbv, err := db.Registry(ctx, store.RegDBVersion)
	if err != nil {
		return "", fmt.Errorf("scheduled backup: %w", err)
	}
	dest := backupName(base, dbv, now, scheduledSuffix)
	if err := db.Backup(ctx, dest); err != nil {
		return "", fmt.Errorf("scheduled backup: %w", err)
	}
	log.Info("scheduled backup written", "file", dest)
	keep := db.ConfigInt(ctx, store.ConfigBackupKeep)
	if list, err = backups(base, true); err != nil {
		return dest, fmt.Errorf("prune scheduled backups: %w", err)
	}
	for i := keep; i < len(list); i++ {
		if list[i].path == dest {
			continue
		}
		if err := os.Remove(list[i].path); err != nil {
			return dest, fmt.Errorf("prune scheduled backups: %w", err)
		}
		log.Info("old scheduled backup deleted", "file", list[i].path)
	}
	return dest, nil
}

// BackupLoop calls ScheduledBackup (backups in dir, or beside the file when dir is "")
// every tick until ctx ends; failures are logged and passed to result (metrics), as
// are successes (err nil, a file written).
func BackupLoop(ctx context.Context, db *store.DB, dir string, tick time.Duration, log *slog.Logger, result func(file string, err error)) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if !db.IsFile() {
		log.Info("scheduled backups are off: the database is PostgreSQL, whose backups are pg_dump's or the server's (BACKUP_INTERVAL_HOURS applies to SQLite files)",
			"db", db.Path())
		return
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		file, err := ScheduledBackup(ctx, db, dir, db.Now(), log)
		if err != nil && ctx.Err() == nil {
			log.Error("scheduled backup failed", "error", err)
		}
		if (err != nil || file != "") && result != nil && ctx.Err() == nil {
			result(file, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
