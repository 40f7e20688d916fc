package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// sqliteDialect is SQLite's SQL (the CGO-free modernc.org/sqlite driver): the engine
// every database of this program uses.
var sqliteDialect = &dialect{
	name:        "sqlite",
	driver:      "sqlite",
	dsn:         sqliteDSN,
	readOnlyDSN: sqliteReadOnlyDSN,
	openPool:    func(dsn string) (*sql.DB, error) { return sql.Open("sqlite", dsn) },
	// BEGIN IMMEDIATE (sqliteDSN) takes the write lock at once; the turnstile
	// orders the processes waiting for it.
	turnstile: true,
	// `?` and `?N` are SQLite's own placeholders.
	rebind: func(query string) string { return query },

	isUnique:   sqliteIsUnique,
	isBusy:     sqliteIsBusy,
	isDiskFull: sqliteIsDiskFull,
	// SQLite stores any text, NUL characters included.
	isBadText: func(error) bool { return false },

	insertID:       sqliteInsertID,
	convertKeyname: "UPDATE OR IGNORE instances SET keyname = ?, displayname = ?, updated_at = ? WHERE id = ?",

	jsonValue:  func(doc, path string) string { return "json_extract(" + doc + ", " + path + ")" },
	jsonText:   func(doc, path string) string { return doc + " ->> " + path },
	jsonType:   func(doc, path string) string { return "json_type(" + doc + ", " + path + ")" },
	jsonHolds:  sqliteJSONHolds,
	jsonSet:    func(doc, path, value string) string { return "json_set(" + doc + ", " + path + ", " + value + ")" },
	jsonRemove: func(doc, path string) string { return "json_remove(" + doc + ", " + path + ")" },
	jsonSort:   func(doc, path string) []string { return []string{"json_extract(" + doc + ", " + path + ")"} },

	contains: func(text, sub string) string { return "instr(" + text + ", " + sub + ") > 0" },
	// SQLite's LIKE ignores the case of ASCII letters.
	like: func(col, pat string) string { return col + " LIKE " + pat + ` ESCAPE '\'` },
	hexKeyname: func(col string) string {
		return "length(" + col + ") = 8 AND " + col + " NOT GLOB '*[^0-9a-f]*'"
	},
	rowOrder: "rowid",
	// SQLite's max with two arguments is the scalar one.
	greatest: func(a, b string) string { return "max(" + a + ", " + b + ")" },

	// The layout's triggers keep the counts in the rows themselves: SQLite writes a
	// row's new version in place, whatever the number of updates in a transaction.
	countInstances: "SELECT n FROM instance_counts WHERE classname = ?",
	countBlocks:    "SELECT coalesce(sum(n), 0) FROM ipam_blocks WHERE block >= ? AND block <= ?",
	beforeCommit:   []string{},
	countDeltas:    map[string]string{},
	foldedRead:     map[string]string{},

	searchBacklog:     SearchBacklogCheck,
	searchLag:         "SELECT count(*) FROM instances_search_dirty",
	listSearch:        SearchListSQL,
	searchMergeStart:  sqliteMergeStart,
	searchMergeMore:   sqliteMergeMore,
	totalChanges:      "SELECT total_changes()",
	listSearchWhere:   sqliteListWhere,
	rawListingOn:      sqliteRawListingOn,
	rawListingOff:     sqliteRawListingOff,
	reindexUpTo:       sqliteCatchUp,
	searchFrom:        "instances_search CROSS JOIN instances i",
	searchWhere:       "instances_search MATCH ? AND i.id = instances_search.rowid AND i.classname = ?",
	searchID:          "instances_search.rowid",
	searchUnlisted:    " AND instances_search.rowid NOT IN (SELECT id FROM instances_search_dirty)",
	searchListedFrom:  "instances_search_dirty d CROSS JOIN instances i",
	searchListedWhere: "d.staged <> 1 AND i.id = d.id AND i.classname = ?",
	searchListedID:    "d.id",
	stageWaiting:      sqliteStageWaiting,
	stageListed:       sqliteStage,
	// The staged index's candidates, each checked staged in the list, then read.
	searchStagedFrom:  "instances_search_staged CROSS JOIN instances_search_dirty d CROSS JOIN instances i",
	searchStagedWhere: "instances_search_staged MATCH ? AND d.id = instances_search_staged.rowid AND d.staged = 1 AND i.id = d.id AND i.classname = ?",
	searchStagedID:    "instances_search_staged.rowid",
	searchQuery:       indexQuery,

	layout:                 sqliteLayout,
	insertInstance:         sqliteInsertInstance,
	insertInstanceIfAbsent: sqliteInsertInstance + " ON CONFLICT(classname, keyname) DO NOTHING",
	readLayoutVersion:      sqliteLayoutVersion,
	setLayoutVersion:       func(n int) string { return fmt.Sprintf("PRAGMA user_version = %d", n) },
	layoutVersionsTable:    layoutVersionsTable,
	hasLayoutVersions:      "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'layout_versions')",
	reservedPrefix:         "sqlite_",

	backup:      sqliteBackup,
	lockStartup: sqliteLockStartup,
}

// The schema-object check reads layout versions through the dialect itself: set
// here, not in the literal, to break the initialization cycle.
func init() { sqliteDialect.checkFile = checkSchema }

// sqliteDSN sets, on every connection, the busy timeout, foreign keys and
// synchronous=NORMAL; the writer pool also WAL mode and BEGIN IMMEDIATE for its
// transactions (the write lock at once, never a deadlock on upgrade); the read pool
// is query_only.
func sqliteDSN(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(15000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Set("_txlock", "immediate")
	}
	return fileDSN(path, q.Encode())
}

// sqliteReadOnlyDSN opens the file with mode=ro, or immutable. A WAL database read
// without write access needs its -shm file, which only a writer creates. Without a
// -wal file no writer is active (a clean close removes it), so the file is read as
// immutable; otherwise through the writer's -shm.
func sqliteReadOnlyDSN(path string) string {
	ro := "&mode=ro"
	if _, err := os.Stat(path + "-wal"); os.IsNotExist(err) {
		ro = "&immutable=1"
	}
	return sqliteDSN(path, true) + ro
}

// sqliteIsUnique reports a UNIQUE or PRIMARY KEY violation by SQLite's extended
// result code, not the message text.
func sqliteIsUnique(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && (e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || e.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY)
}

// sqliteIsBusy reports SQLITE_BUSY (any extended code).
func sqliteIsBusy(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_BUSY
}

// sqliteIsDiskFull reports SQLITE_FULL (any extended code).
func sqliteIsDiskFull(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_FULL
}

// sqliteInsertID runs the INSERT and reads the row's id from the driver
// (last_insert_rowid): no RETURNING clause is needed.
func sqliteInsertID(ctx context.Context, c rowRunner, query string, args ...any) (int64, bool, error) {
	res, err := c.execContext(ctx, query, args...)
	if err != nil {
		return 0, false, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return 0, false, nil
	}
	id, _ := res.LastInsertId()
	return id, true, nil
}

// sqliteJSONHolds: json_each of a scalar is the scalar itself, of a list its items.
func sqliteJSONHolds(doc, path, value string) string {
	return "EXISTS (SELECT 1 FROM json_each(" + doc + ", " + path + ") WHERE json_each.value = " + value + ")"
}

// sqliteLayoutVersion reads PRAGMA user_version: how many layout steps have run.
func sqliteLayoutVersion(ctx context.Context, q querier) (int, error) {
	var have int
	err := q.queryRowContext(ctx, "PRAGMA user_version").Scan(&have)
	return have, err
}

// sqliteBackup copies the database with VACUUM INTO (a consistent snapshot that
// writers do not wait for) into the empty file path, then syncs the copy.
func sqliteBackup(ctx context.Context, c conn, path string) error {
	if _, err := c.execContext(ctx, "VACUUM INTO ?", path); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
