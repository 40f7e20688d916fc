package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// The statements a restore runs on database files that no DB has open: the backup's
// copy it checks and cleans, and the current file it folds up before the swap. They are
// SQLite's (VACUUM INTO, PRAGMA integrity_check, sqlite_stat tables, the WAL
// checkpoint), kept together here so another engine's restore has one place to differ.

// fileDSN is the connection string of the database file at path with the query given.
func fileDSN(path string, query string) string {
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + query
}

// CopyFile writes a consistent copy of the database file src into the empty file dest,
// through SQLite (VACUUM INTO) so that a WAL beside src is included, and syncs it. src
// is opened read-only and never changed.
func CopyFile(ctx context.Context, src, dest string) error {
	db, err := sql.Open("sqlite", fileDSN(src, "mode=ro&_pragma=busy_timeout(15000)"))
	if err != nil {
		return err
	}
	defer db.Close()
	return sqliteBackup(ctx, conn{db, sqliteDialect}, dest)
}

// CheckFileVersion checks the database file at path, read-only: PRAGMA integrity_check
// passes, and its registry is readable and holds a DB_VERSION, which it returns.
func CheckFileVersion(ctx context.Context, path string) (string, error) {
	db, err := sql.Open("sqlite", fileDSN(path, "mode=ro"))
	if err != nil {
		return "", err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return "", fmt.Errorf("integrity check: %w", err)
	}
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			rows.Close()
			return "", fmt.Errorf("integrity check: %w", err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("integrity check: %w", err)
	}
	if len(problems) > 0 {
		if len(problems) > 5 {
			problems = append(problems[:5], "...")
		}
		return "", fmt.Errorf("integrity check failed: %s", strings.Join(problems, "; "))
	}
	var dbv string
	err = db.QueryRowContext(ctx, "SELECT value FROM registry WHERE key = ?", RegDBVersion).Scan(&dbv)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && (dbv == "" || dbv == "0")) {
		return "", fmt.Errorf("no DB_VERSION in its registry: not a dataservice database")
	}
	if err != nil {
		return "", fmt.Errorf("registry not readable: %w", err)
	}
	return dbv, nil
}

// ClearStatistics deletes the rows of sqlite_stat1 and sqlite_stat4 (ANALYZE's
// statistics, which the query planner trusts) in the database file at path, and
// returns how many. A crafted file's statistics could make the planner choose full
// scans; without rows SQLite plans by its defaults, as on a file never analysed. The
// tables stay (the schema check accepts them), so nothing else changes.
func ClearStatistics(ctx context.Context, path string) (int64, error) {
	db, err := sql.Open("sqlite", fileDSN(path, "mode=rw"))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var n int64
	for _, table := range []string{"sqlite_stat1", "sqlite_stat4"} {
		var present int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?", table).Scan(&present); err != nil {
			return 0, err
		}
		if present == 0 {
			continue
		}
		res, err := tx.ExecContext(ctx, "DELETE FROM "+table)
		if err != nil {
			return 0, err
		}
		rows, err := res.RowsAffected()
		if err != nil {
			return 0, err
		}
		n += rows
	}
	if n == 0 {
		return 0, nil
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return n, db.Close()
}

// CheckpointFile folds the WAL of the database file at path into the file, so that the
// file is complete on its own (a restore keeps it as before-restore). The caller holds
// the file's in-use lock exclusively (LockExclusive): no process has it open.
func CheckpointFile(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", fileDSN(path, "_pragma=busy_timeout(15000)"))
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var busy, logN, done int
	if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logN, &done); err != nil {
		return err
	}
	if busy != 0 {
		return fmt.Errorf("checkpoint busy")
	}
	return db.Close()
}

// ForgetNodes deletes the heartbeat rows a restored copy at path holds: the nodes they
// name serve the database the backup was taken from, not the copy, and rows renewed
// moments before the backup would read as live nodes (of the backup's version) to the
// first start of the copy. It returns how many it deleted.
func ForgetNodes(ctx context.Context, path string) (int64, error) {
	db, err := sql.Open("sqlite", fileDSN(path, "mode=rw"))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var present int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'nodes'").Scan(&present); err != nil {
		return 0, err
	}
	if present == 0 {
		return 0, nil
	}
	res, err := db.ExecContext(ctx, "DELETE FROM nodes")
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	return n, db.Close()
}
