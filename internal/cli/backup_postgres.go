package cli

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"time"

	"dataservice/bootstrap"
	"dataservice/internal/clip"
	"dataservice/store"
)

// backupPostgres is `dataservice backup FILE` on PostgreSQL: a pg_dump archive
// (pg_dump -Fc) of the whole database, taken while nodes keep writing.
func (c *cli) backupPostgres(ctx context.Context, s *settings, file string) error {
	db, err := store.Open(ctx, s.DB, store.Options{Logger: c.logger(s), AsIs: true, SecretKeyFile: s.SecretKeyFile})
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Backup(ctx, file); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "backup written to %s\n", file)
	c.tellSealed(ctx, db, "backed up", keepKeyAdvice)
	return nil
}

// restorePostgres is `dataservice restore FILE` on PostgreSQL: FILE is a pg_dump
// archive, whose DB_VERSION is read first (refused when newer than this code); with
// no other session connected, the current contents are dumped beside FILE as
// <database>.before-restore.<timestamp>.dump, pg_restore replaces them in one
// transaction, and the result is checked for schema objects the service does not
// create. --force (SQLite's repair of a backup's triggers, views and indexes) does not
// apply.
func (c *cli) restorePostgres(ctx context.Context, s *settings, file string, force bool) error {
	if force {
		return fmt.Errorf("--force repairs a SQLite backup only: a PostgreSQL archive holding schema objects the service does not create is refused; restore another backup")
	}
	src, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	if st, err := os.Stat(src); err != nil {
		return fmt.Errorf("backup %s: %w", src, err)
	} else if !st.Mode().IsRegular() {
		return fmt.Errorf("backup %s: not a regular file", src)
	}
	dbv, err := store.PostgresArchiveVersion(ctx, src)
	if err != nil {
		return fmt.Errorf("backup %s: %w", src, err)
	}
	if bootstrap.Newer(dbv, s.Version) {
		return fmt.Errorf("backup %s: DB_VERSION %s is newer than this code (%s): restore it with that release", src, clip.Quote(dbv), s.Version)
	}
	name := "database"
	if u, err := url.Parse(s.DB); err == nil && path.Base(u.Path) != "/" && path.Base(u.Path) != "." {
		name = path.Base(u.Path)
	}
	keep := filepath.Join(filepath.Dir(src), fmt.Sprintf("%s.before-restore.%s.dump", name, time.Now().UTC().Format("20060102T150405.000Z")))
	if err := store.RestorePostgres(ctx, s.DB, src, keep); err != nil {
		return err
	}
	shown := store.RedactURL(s.DB)
	fmt.Fprintf(c.stdout, "restored %s (DB_VERSION %s) into %s\n", src, dbv, shown)
	fmt.Fprintf(c.stdout, "the previous database is kept as %s\n", keep)
	if dbv != s.Version {
		fmt.Fprintf(c.stdout, "the next `dataservice migrate` (or `serve`) migrates it from %s to %s; other commands refuse it until then\n", clip.Text(dbv), s.Version)
	}
	return nil
}
