package store

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"dataservice/store/model"
)

// PostgreSQL's backups are its own tools': pg_dump writes a custom-format archive
// (-Fc) of the whole database, pg_restore reads it back. The passwords of the URL
// (the user's, and the password and sslpassword query parameters) go to them in
// PGPASSWORD and PGSSLPASSWORD, never on their command line (where any user of the
// host sees it in the process list); the URL they get has none.

// ErrToolMissing is the error of a backup or restore on PostgreSQL when pg_dump or
// pg_restore is not on PATH.
var ErrToolMissing = errors.New("PostgreSQL's client tool is not installed")

// postgresTool finds a PostgreSQL client program on PATH, or says what to install.
func postgresTool(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%w: %s is not on PATH: install PostgreSQL's client tools (Debian: apt-get install postgresql-client, "+
			"the same major version as the server or later), or follow the manual recipe in docs/postgres.md (\"Backups and restore\")", ErrToolMissing, name)
	}
	return p, nil
}

// runPostgresTool runs a PostgreSQL client program, with the database of addr
// (when not empty) given as --dbname without its password, and the password in
// PGPASSWORD. It returns the program's output; a failure carries its error output,
// with the password removed should it appear.
func runPostgresTool(ctx context.Context, name, addr string, args ...string) ([]byte, error) {
	path, err := postgresTool(name)
	if err != nil {
		return nil, err
	}
	env := os.Environ()
	if addr != "" {
		u, err := url.Parse(addr)
		if err != nil {
			return nil, fmt.Errorf("%s: the database URL does not parse", name)
		}
		if u.User != nil {
			if pw, ok := u.User.Password(); ok {
				env = append(env, "PGPASSWORD="+pw)
				u.User = url.User(u.User.Username())
			}
		}
		// A password given as a query parameter goes the same way: the tools read
		// PGPASSWORD and PGSSLPASSWORD (the later of two same names wins in Env).
		u.RawQuery = mapSecretParams(u.RawQuery, func(name, value string) (string, bool) {
			env = append(env, secretParams[name]+"="+value)
			return "", false
		})
		// search_path is pgx's (a setting sent at connect), not a parameter libpq's
		// tools know; pg_dump and pg_restore set the search path themselves.
		q := u.Query()
		if q.Has("search_path") {
			q.Del("search_path")
			u.RawQuery = q.Encode()
		}
		args = append(args, "--dbname="+u.String())
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 2000 {
			msg = msg[:2000] + "…"
		}
		return nil, redactErr(fmt.Errorf("%s: %w: %s", name, err, msg), addr)
	}
	return stdout.Bytes(), nil
}

// DumpPostgres writes a pg_dump custom-format archive (-Fc) of the whole database db
// to path, which must not exist: under a temporary name beside it, owner-only, renamed
// when complete. It is PostgreSQL's backup: `dataservice backup` and the backup
// before migrating. pg_dump reads one snapshot while writers go on. Without pg_dump
// on PATH it fails with ErrToolMissing.
func DumpPostgres(ctx context.Context, db *DB, path string) error {
	if db.IsFile() {
		return fmt.Errorf("backup %s: %s is not a PostgreSQL database", path, db.Path())
	}
	if _, err := postgresTool("pg_dump"); err != nil {
		return fmt.Errorf("backup %s: %w", path, err)
	}
	return dumpPostgres(ctx, db.addr, path)
}

// CanBackup says whether Backup can run on this host, before anything depends on it:
// on PostgreSQL pg_dump must be on PATH (an error wrapping ErrToolMissing, saying what
// to install, otherwise); SQLite's copy needs no tool.
func (db *DB) CanBackup() error {
	if db.IsFile() {
		return nil
	}
	_, err := postgresTool("pg_dump")
	return err
}

func dumpPostgres(ctx context.Context, addr, path string) error {
	if _, err := os.Stat(path); err == nil {
		return model.Errorf(model.EConflict, "backup %s: file exists", path)
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.partial")
	if err != nil {
		return fmt.Errorf("backup %s: %w", path, err)
	}
	tmp := f.Name()
	f.Close()
	if _, err := runPostgresTool(ctx, "pg_dump", addr, "--format=custom", "--file="+tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("backup %s: %w", path, err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("backup %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("backup %s: %w", path, err)
	}
	return nil
}

// PostgresArchiveVersion reads the DB_VERSION of the service's registry in the
// pg_dump archive file, without restoring anything: it fails when file is no
// archive pg_restore reads, or holds no registry with a DB_VERSION (not a
// dataservice database).
func PostgresArchiveVersion(ctx context.Context, file string) (string, error) {
	if _, err := runPostgresTool(ctx, "pg_restore", "", "--list", file); err != nil {
		return "", fmt.Errorf("not a pg_dump archive (pg_dump -Fc): %w", err)
	}
	out, err := runPostgresTool(ctx, "pg_restore", "", "--data-only", "--table=registry", "--file=-", file)
	if err != nil {
		return "", err
	}
	// The rows of `COPY registry (key, value) FROM stdin;`, tab-separated, until `\.`.
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	in := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "COPY ") && strings.Contains(line, "registry"):
			in = true
		case line == `\.`:
			in = false
		case in:
			if k, v, ok := strings.Cut(line, "\t"); ok && k == RegDBVersion && v != "" && v != "0" {
				return v, nil
			}
		}
	}
	return "", fmt.Errorf("no DB_VERSION in its registry: not a dataservice database")
}
