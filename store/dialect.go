package store

import (
	"context"
	"database/sql"
	"errors"
	"syscall"
)

// dialect is the SQL of one database engine, for every statement whose text differs
// between engines. The store's statements are written once, inline next to their
// Scan; where engines differ, they take the text (a whole statement, or a fragment
// such as a JSON access) from the dialect chosen at Open, as goqite picks its SQL
// flavour per statement and River keeps one driver per engine. Callers never branch
// on the engine: a new engine is a new dialect value, not an edit of its callers.
//
// Placeholders: every statement is written with SQLite's `?` (and `?N` where one
// argument is used twice); rebind turns it into the engine's form inside the one set
// of exec/query helpers (conn, Tx) every statement runs through, so no caller
// rebinds.
//
// Upserts: `INSERT ... ON CONFLICT(...) DO UPDATE SET c = excluded.c` and `ON
// CONFLICT(...) DO NOTHING` mean the same on the engines this store targets and are
// written inline; SQLite's own forms (UPDATE OR IGNORE, INSERT OR REPLACE) appear only
// in the SQLite dialect's files.
//
// JSON: data is stored as JSON text; its access goes through the json* fragments,
// whose paths are SQL/JSON path text ($.name, $."name"), given as an argument or a
// literal.
//
// Bookkeeping (instance counts, per-/16 address counts, the id high-water mark, the
// search index's list of rows to re-index) is kept by triggers in SQLite's layout
// steps, so every write path keeps it; it is part of an engine's layout.
//
// SQLite (dialect_sqlite.go) is the only engine; its file-level machinery (the
// turnstile, the in-use lock, the schema-object check, dry runs' private files) stays
// SQLite's, reached through the fields below; the files holding SQLite's own SQL are
// named *_sqlite.go.
type dialect struct {
	// name is the engine's name in messages and metrics ("sqlite", "postgres").
	name string
	// driver is the database/sql driver name.
	driver string
	// dsn is the connection string of the database at path: the settings every
	// connection applies (the PRAGMAs, for SQLite) and how a write transaction starts
	// (BEGIN IMMEDIATE, SQLite's _txlock), for the writer pool or the read pool.
	dsn func(path string, readOnly bool) string
	// readOnlyDSN is the connection string of a database this process may not write
	// (Options.ReadOnly).
	readOnlyDSN func(path string) string
	// openPool opens a pool on a connection string of dsn's or readOnlyDSN's (a
	// second pool on the same database: a dry run's snapshot).
	openPool func(dsn string) (*sql.DB, error)

	// turnstile tells whether write transactions of every process pass the file's
	// turnstile (turnstile.go) before they start: SQLite has one writer per file and
	// no queue of its own for it. An engine with row locks needs none.
	turnstile bool
	// lockWriter is the statement every write transaction runs first, taking the
	// engine's writer lock ("" where beginning the transaction takes it).
	lockWriter string

	// writeTx are the options of every write transaction (beginWriter, withWriter):
	// READ COMMITTED on PostgreSQL, set explicitly whatever the database's
	// default_transaction_isolation, because the writer lock is taken by the
	// transaction's first statement: under REPEATABLE READ its snapshot would date
	// from before the wait and miss what the previous holder committed. nil for
	// SQLite, where a write transaction sees the database as its lock finds it.
	writeTx *sql.TxOptions
	// snapshot are the options of a read transaction that sees one snapshot of the
	// database from its first read to its end (BeginRead, an indexed search, a dry
	// run's snapshot); nil for SQLite, where every read transaction does.
	snapshot *sql.TxOptions

	// rebind turns a statement written with `?` placeholders into the engine's.
	rebind func(query string) string

	// isUnique reports a UNIQUE or PRIMARY KEY violation; isBusy a lock the engine
	// refused at once (try again shortly); isDiskFull a write refused for lack of
	// space. Each classifies by the engine's error codes, never by message text.
	isUnique, isBusy, isDiskFull func(error) bool
	// isBadText reports text the engine refused to store or compare: a character
	// it cannot hold (PostgreSQL's text holds no NUL). Such input is the caller's
	// error, not the service's.
	isBadText func(error) bool

	// insertID runs an INSERT of one row and returns the row's id, with inserted
	// false when the statement wrote no row (ON CONFLICT DO NOTHING).
	insertID func(ctx context.Context, c rowRunner, query string, args ...any) (id int64, inserted bool, err error)
	// insertInstance inserts an instance (args: classname, keyname, displayname,
	// is_enabled, data, created_at, updated_at) under an id above every id ever given
	// out (the layout's instance_ids); insertInstanceIfAbsent writes nothing when
	// the class holds the keyname already.
	insertInstance, insertInstanceIfAbsent string
	// convertKeyname is the statement changing an instance's keyname, displayname
	// and updated_at (args in that order, then the id) that changes nothing, without
	// error, when another instance of the class holds the keyname.
	convertKeyname string

	// JSON access, each a SQL expression over the text of a JSON document doc (a
	// column) and a path expression (a `?` or a quoted literal such as '$.name'):
	// jsonValue is the value at path as SQL (NULL when missing); jsonText the value
	// as text when it is text, the JSON text otherwise; jsonType its JSON type name
	// (NULL when missing); jsonHolds is a condition true when the value at path is
	// value or is a list holding value; jsonSet and jsonRemove are doc with the
	// value at path set or removed.
	jsonValue, jsonText, jsonType func(doc, path string) string
	jsonHolds                     func(doc, path, value string) string
	jsonSet                       func(doc, path, value string) string
	jsonRemove                    func(doc, path string) string
	// jsonSort are the ORDER BY keys ordering rows by the value at path as SQLite
	// orders json_extract's values: missing and null first, then numbers (and
	// booleans, as 1 and 0) by value, then text by its bytes.
	jsonSort func(doc, path string) []string

	// contains is a condition true when text holds sub (a cheap filter before an
	// exact test); like is the condition that col matches the LIKE pattern pat
	// (ESCAPE '\') ignoring the case of ASCII letters only (a search's test);
	// hexKeyname is a condition true when the
	// keyname column col holds 8 lowercase hex digits (ipam_ip keynames); rowOrder is
	// the column giving a table's rows in insertion order.
	contains   func(text, sub string) string
	like       func(col, pat string) string
	hexKeyname func(col string) string
	rowOrder   string
	// skipLocked ends a queue's claim subquery (SELECT ... LIMIT 1): it locks the row
	// it picks and skips rows another transaction has locked, so concurrent claims
	// never wait on one another and never pick the same row ("" where a write
	// transaction holds the whole database, as SQLite's does).
	skipLocked string
	// greatest is the larger of the values of two SQL expressions (a scalar, not
	// the aggregate max).
	greatest func(a, b string) string

	// countInstances reads the maintained number of instances of a class (arg: the
	// class; no row or NULL: none); countBlocks the sum of the maintained address
	// counts of the /16 blocks from `?` to `?`. beforeCommit are the statements a
	// write transaction runs last, folding what the engine's triggers noted during it
	// into the maintained counts (none where the triggers keep the counts
	// themselves).
	countInstances, countBlocks string
	beforeCommit                []string
	// countDeltas names, for a maintained table, the table its triggers note changes
	// in until beforeCommit folds them: a copy that replaces the maintained table's
	// rows clears those notes too.
	countDeltas map[string]string
	// foldedRead is, for a maintained table, a query giving its rows as the next
	// commit's fold would leave them (what SQL outside the store wrote is not folded
	// yet): what a copy reads from a source of this engine.
	foldedRead map[string]string

	// Full-text search (search.go, searchindex.go). searchBacklog counts the rows
	// listed for the index and not indexed yet, up to `?`; searchLag is their number; both
	// "" where the engine maintains its
	// index in every write. reindexUpTo are the statements indexing the listed rows with
	// ids up to `?`, the last of them (no argument) flushing the index. searchFrom and
	// searchWhere replace a scan's FROM and class condition by the index's candidates
	// (args: the index query, then the class); searchID is the id column of those
	// candidates; searchUnlisted (appended to searchWhere) keeps the candidates not
	// listed, searchListed is the FROM and class condition (arg: the class) of the
	// listed rows, searchListedID their id column.
	searchBacklog, searchLag            string
	reindexUpTo                         []string
	searchFrom, searchWhere             string
	searchID                            string
	searchUnlisted                      string
	searchListedFrom, searchListedWhere string
	searchListedID                      string
	// listSearch lists the ids of the JSON array `?` for the index (staged ones made
	// stale), as the store's updates of instances list theirs (Tx.listForSearch);
	// listSearchWhere lists the instances a condition (%s) selects; rawListingOn and
	// rawListingOff create and drop the connection's trigger listing what statements
	// run as written update (searchlist.go). All "" where the engine maintains its index.
	listSearch, listSearchWhere string
	rawListingOn, rawListingOff string
	// searchMergeStart begins merging the index into one segment and does a bounded
	// part of it, searchMergeMore goes on with a merge begun; totalChanges reads the
	// connection's count of changed rows, which tells whether they worked
	// (searchmerge.go). "" where the engine maintains its index.
	searchMergeStart, searchMergeMore, totalChanges string
	// The staged index of listed rows (searchstage.go), SQLite only. stageWaiting
	// reads, over the first `?` listed rows, how many they are and how many of them
	// are not staged; stageListed are the statements staging the `?` newest listed
	// rows not staged, the last of them setting staged (its rows affected: how many).
	// searchStagedFrom and searchStagedWhere are the FROM and the condition (args: the
	// index query, then the class) of the staged rows the staged index gives as
	// candidates, searchStagedID their id column.
	stageWaiting                        string
	stageListed                         []string
	searchStagedFrom, searchStagedWhere string
	searchStagedID                      string
	// searchQuery is the index's query for a search, ok false where the index
	// cannot narrow it exactly as LIKE would.
	searchQuery func(search string) (q string, ok bool)

	// layout is the engine's append-only list of table-layout steps (tables,
	// indexes, and the triggers that keep the counts, the id high-water mark and the
	// search index's dirty list). readLayoutVersion and setLayoutVersion read and
	// record how many of layout's steps the file has run.
	layout            []string
	readLayoutVersion func(ctx context.Context, q querier) (int, error)
	setLayoutVersion  func(n int) string
	// layoutVersionsTable creates, where missing, the table of the registered
	// owners' layout versions; hasLayoutVersions reads whether it exists.
	layoutVersionsTable, hasLayoutVersions string
	// reservedPrefix starts the names of the tables the engine keeps for itself: no
	// table owner may take one (RegisterLayout).
	reservedPrefix string
	// checkFile refuses a file holding schema objects the layout does not create
	// (schemacheck_sqlite.go), before anything writes to it.
	checkFile func(ctx context.Context, pool *sql.DB) error

	// lockStartup takes the start-up lock of db (DB.LockStartup), waiting until it
	// is free or ctx ends.
	lockStartup func(ctx context.Context, db *DB) (unlock func(), err error)
	// backup writes a consistent copy of the database, as it is now, to the empty
	// file path (an online backup: writers go on meanwhile).
	backup func(ctx context.Context, c conn, path string) error

	// resetIdentities sets every identity column's sequence past the ids the table
	// holds, after Copy wrote rows with their ids; nil where the engine numbers new
	// rows from the largest id (SQLite).
	resetIdentities func(ctx context.Context, tx *Tx) error
	// deferIndexes drops the indexes of table Copy is about to fill and returns the
	// function re-creating them once it is filled (building an index at once costs
	// less than row by row); nil where the engine gains nothing worth it.
	deferIndexes func(ctx context.Context, tx *Tx, table string) (func() error, error)
}

// rowRunner runs a statement, or a query returning one row: a transaction's or a
// connection's.
type rowRunner interface {
	execContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	queryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// dialects are the engines this program knows. Error classification goes through all
// of them: an error carries the driver's own type, so no database is needed at hand.
var dialects = []*dialect{sqliteDialect, postgresDialect}

// isUnique reports whether err is a UNIQUE or PRIMARY KEY violation.
func isUnique(err error) bool {
	return anyDialect(err, func(d *dialect) func(error) bool { return d.isUnique })
}

// isBusy reports whether err is a lock the engine refused at once.
func isBusy(err error) bool {
	return anyDialect(err, func(d *dialect) func(error) bool { return d.isBusy })
}

// isDiskFull reports whether err is a write refused for lack of space: the engine's
// code or the system's ENOSPC.
func isDiskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || anyDialect(err, func(d *dialect) func(error) bool { return d.isDiskFull })
}

// isBadText reports text the engine cannot hold (a NUL character on PostgreSQL).
func isBadText(err error) bool {
	return anyDialect(err, func(d *dialect) func(error) bool { return d.isBadText })
}

func anyDialect(err error, test func(*dialect) func(error) bool) bool {
	if err == nil {
		return false
	}
	for _, d := range dialects {
		if test(d)(err) {
			return true
		}
	}
	return false
}

// sqlRunner is what *sql.DB, *sql.Tx and *sql.Conn share.
type sqlRunner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// querier runs read statements written with `?` placeholders: a conn or a *Tx.
type querier interface {
	queryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	queryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// conn runs the store's statements on a pool, transaction or connection: each passes
// the dialect's rebind first. It is the one place a statement meets database/sql.
type conn struct {
	raw sqlRunner
	dia *dialect
}

func (c conn) execContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return c.raw.ExecContext(ctx, c.dia.rebind(query), args...)
}

func (c conn) queryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return c.raw.QueryContext(ctx, c.dia.rebind(query), args...)
}

func (c conn) queryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return c.raw.QueryRowContext(ctx, c.dia.rebind(query), args...)
}

func (c conn) prepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return c.raw.PrepareContext(ctx, c.dia.rebind(query))
}

// reader runs statements on the read pool; writer on the writer pool (outside any
// transaction: a statement there is a transaction of its own).
func (db *DB) reader() conn { return conn{db.r, db.dia} }
func (db *DB) writer() conn { return conn{db.w, db.dia} }
