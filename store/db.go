// Package store keeps everything dataservice knows in one SQLite file: the registry,
// configuration, schemas and fields, instances, permissions, revisions and tasks. It
// validates every value it writes, loads documents in the load format and hashes secrets.
package store

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the CGO-free SQLite driver

	"dataservice/store/model"
)

// DB is the SQLite file. Writes go through one connection; reads use a small pool.
type DB struct {
	path string
	w    *sql.DB
	r    *sql.DB
	log  *slog.Logger
	// inUse holds the shared in-use lock on the database file while it is open.
	inUse *os.File
	// turn is the turnstile every write transaction passes (turnstile.go); nil when
	// the file is open read-only.
	turn *turnstile
	// Now is the clock; tests replace it.
	Now func() time.Time

	mu      sync.RWMutex
	schemas map[string]*model.Schema // read cache, dropped whenever a transaction touches schemas
	// schemaGen is the schema_generation the cache was filled at; local counts local drops.
	schemaGen int64
	local     uint64
	verify    sync.Map // verified-secret cache, see secret.go
	// derivationHook runs before each derivation of a credential not verified before
	// (SetDerivationHook): tests hold derivations at that point.
	derivationHook atomic.Pointer[func(name string)]
	// config caches the configuration values at configGen (same counter as schemas).
	config    map[string]string
	configGen int64
	// rstmts are statements prepared once on the read pool (query -> *sql.Stmt).
	rstmts sync.Map
	// commits counts the write transactions this process committed (see genMemo).
	commits atomic.Uint64
	// diskFull is set by a write that failed for lack of space and cleared by the next
	// commit: one disk-full episode is logged once (diskfull.go).
	diskFull atomic.Bool
	// throttle counts refused credentials (throttle.go), made at first use.
	throttleOnce sync.Once
	throttle     *Throttle
	// dryHook is called before each entry of a dry-run load (SetDryRunHook).
	dryHook atomic.Pointer[func(int)]
	// hold is the test hold of the batched writers (DB.SetTestHold); zero: the
	// process's (SetTestHold).
	hold atomic.Int64
	// maxDryKeys is the bound of the keys a dry run remembers in memory; zero:
	// defaultMaxDryKeys. Only tests lower it (to reach the bound with little data).
	maxDryKeys int
}

// rstmt returns query prepared on the read pool, prepared on first use.
func (db *DB) rstmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if s, ok := db.rstmts.Load(query); ok {
		return s.(*sql.Stmt), nil
	}
	s, err := db.r.PrepareContext(context.WithoutCancel(ctx), query)
	if err != nil {
		return nil, err
	}
	if prev, loaded := db.rstmts.LoadOrStore(query, s); loaded {
		s.Close()
		return prev.(*sql.Stmt), nil
	}
	return s, nil
}

// rqueryRow runs a read-pool statement prepared once.
func (db *DB) rqueryRow(ctx context.Context, query string, args ...any) *sql.Row {
	s, err := db.rstmt(ctx, query)
	if err != nil {
		return db.r.QueryRowContext(ctx, query, args...)
	}
	return s.QueryRowContext(ctx, args...)
}

// rquery runs a read-pool query prepared once.
func (db *DB) rquery(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	s, err := db.rstmt(ctx, query)
	if err != nil {
		return db.r.QueryContext(ctx, query, args...)
	}
	return s.QueryContext(ctx, args...)
}

// generation reads the committed schema_generation counter.
// Inside a request scope it is read once (see genMemo).
func (db *DB) generation(ctx context.Context) (int64, error) {
	m, gen, fresh := db.memoOf(ctx)
	if fresh {
		return gen, nil
	}
	commits := db.commits.Load()
	if err := db.rqueryRow(ctx, "SELECT generation FROM schema_generation").Scan(&gen); err != nil {
		return 0, fmt.Errorf("read schema generation: %w", err)
	}
	if m != nil {
		m.remember(gen, commits)
	}
	return gen, nil
}

// Options tune Open.
type Options struct {
	Logger *slog.Logger
	// ReadConns is the size of the read pool (default 4).
	ReadConns int
	// ReadOnly opens an existing file for reading only (SQLite mode=ro): nothing is
	// created, migrated or written, and every write fails. For files the process may
	// not write (a read-only copy, another user's file): reads still work.
	ReadOnly bool
	// AsIs opens an existing file and writes nothing at open, for commands that must
	// not do what only the start-up sequence does: a missing file is not created, and a
	// file whose layout steps are pending is refused with ErrLayoutPending.
	AsIs bool
	// private marks a dry run's private database: it sweeps no leftover dry runs.
	private bool
}

func dsn(path string, readOnly bool) string {
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
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// Open opens (creating if missing) the database at path and brings its table layout up to date.
func Open(ctx context.Context, path string, opts Options) (*DB, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ReadConns <= 0 {
		opts.ReadConns = 4
	}
	if path == "" {
		return nil, fmt.Errorf("open database: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if st, err := os.Stat(abs); err == nil && st.IsDir() {
		return nil, fmt.Errorf("open database %s: is a directory", path)
	}
	if opts.ReadOnly {
		return openReadOnly(ctx, abs, path, opts)
	}
	// A new database file is created owner-only before SQLite opens it: SQLite gives
	// the -wal and -shm files the mode of the database file. AsIs creates nothing.
	if opts.AsIs {
		if _, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("open database %s: %w", path, err)
		}
	} else if f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !os.IsExist(err) {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	inUse, err := holdShared(ctx, abs)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if !opts.AsIs && !opts.private {
		sweepDryRuns(abs, opts.Logger)
	}
	turn := openTurnstile(abs, opts.Logger)
	w, err := sql.Open("sqlite", dsn(abs, false))
	if err != nil {
		turn.close()
		inUse.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	db := &DB{path: abs, w: w, log: opts.Logger, Now: time.Now, inUse: inUse, turn: turn}
	fail := func(err error) (*DB, error) {
		w.Close()
		turn.close()
		inUse.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	layoutStep := db.migrateLayout
	if opts.AsIs {
		layoutStep = db.requireLayout
	}
	if err := layoutStep(ctx); err != nil {
		return fail(err)
	}
	// AsIs writes nothing at open: rows written by SQL outside the store stay listed
	// for the search index (searches scan meanwhile) until the next commit indexes them.
	if !opts.AsIs {
		if err := db.reindexLeftovers(ctx); err != nil {
			return fail(err)
		}
	}
	r, err := sql.Open("sqlite", dsn(abs, true))
	if err != nil {
		return fail(err)
	}
	r.SetMaxOpenConns(opts.ReadConns)
	r.SetMaxIdleConns(opts.ReadConns)
	db.r = r
	return db, nil
}

// openReadOnly opens abs with mode=ro for both pools; its table layout must be current.
func openReadOnly(ctx context.Context, abs, path string, opts Options) (*DB, error) {
	if _, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	// A WAL database read without write access needs its -shm file, which only a
	// writer creates. Without a -wal file no writer is active (a clean close removes
	// it), so the file is read as immutable; otherwise through the writer's -shm.
	ro := "&mode=ro"
	if _, err := os.Stat(abs + "-wal"); os.IsNotExist(err) {
		ro = "&immutable=1"
	}
	r, err := sql.Open("sqlite", dsn(abs, true)+ro)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	r.SetMaxOpenConns(opts.ReadConns)
	r.SetMaxIdleConns(opts.ReadConns)
	if err := checkSchema(ctx, r); err != nil {
		r.Close()
		return nil, fmt.Errorf("open database %s read-only: %w", path, err)
	}
	if err := checkLayout(ctx, r); err != nil {
		r.Close()
		return nil, fmt.Errorf("open database %s read-only: %w", path, err)
	}
	return &DB{path: abs, w: r, r: r, log: opts.Logger, Now: time.Now}, nil
}

// Path is the absolute path of the database file.
func (db *DB) Path() string { return db.path }

// Close closes both pools, then releases the in-use lock.
func (db *DB) Close() error {
	db.rstmts.Range(func(k, v any) bool {
		v.(*sql.Stmt).Close()
		db.rstmts.Delete(k)
		return true
	})
	err := db.w.Close()
	if db.r != nil && db.r != db.w {
		if rerr := db.r.Close(); err == nil {
			err = rerr
		}
	}
	db.turn.close()
	db.turn = nil
	if db.inUse != nil {
		db.inUse.Close()
		db.inUse = nil
	}
	return err
}

// Reader is the read pool, for packages that run their own read queries.
func (db *DB) Reader() *sql.DB { return db.r }

// now returns the current UTC time as stored: RFC 3339 text.
func (db *DB) now() string { return db.Now().UTC().Format(time.RFC3339) }

// Revisions is how a write transaction records the changes it makes: the author its
// revision rows name ("system" when empty), or no rows at all (Off: start-up
// migrations write none). It is fixed when the transaction begins.
type Revisions struct {
	Author string
	Off    bool
	// Observe, when set, is given every change the transaction records as a revision
	// row (Before and After as stored: secrets masked), rolled back or not: a dry-run
	// load reports with it what would change.
	Observe func(Revision)
}

// Tx is a write transaction. It remembers whether it changed schemas so the schema
// cache is dropped when it ends, and caches prepared statements for hot loops. Its
// revision choice is fixed: withRevisions gives a view of the same transaction that
// records its changes differently.
type Tx struct {
	*sql.Tx
	db *DB
	// began is the context the transaction began with. Only Commit uses it (for the
	// schema generation bump): Commit and Rollback keep database/sql's signatures;
	// every other method takes the ctx of its call.
	began context.Context
	rev   Revisions
	// migration marks the view Apply uses for a migration write (ApplyOptions.Migration).
	migration bool
	*txState
}

// txState is what every view of a transaction shares.
type txState struct {
	schemas map[string]*model.Schema
	touched bool
	stmts   map[string]*sql.Stmt
	// writes counts the statements exec ran (every instance, revision and permission
	// write): a caller compares it before and after a step to learn whether the step wrote.
	writes int
	// known caches instances known to exist in this transaction ("class\x00key") for
	// reference checks and address collection; dropped on delete and rename.
	known map[string]struct{}
	// writer marks a write transaction (BeginAs): its Commit re-indexes the instances
	// it wrote for search (reindexDirty).
	writer bool
	// release returns the writer connection to the pool once the transaction ended.
	release func()
	// dry is set in a dry-run load's private database: reads and writes of instances
	// first copy what they name from the dry run's snapshot (dryrun.go).
	dry *dryRun
}

// Begin starts a write transaction (BEGIN IMMEDIATE) whose revisions name "system".
func (db *DB) Begin(ctx context.Context) (*Tx, error) { return db.BeginAs(ctx, Revisions{}) }

// BeginAs starts a write transaction that records its changes as rev says. It passes
// the turnstile (turnstile.go), so a writer in another process waiting for the lock
// gets it before this one.
func (db *DB) BeginAs(ctx context.Context, rev Revisions) (*Tx, error) {
	tx, done, err := db.beginWriter(ctx)
	if err != nil {
		return nil, db.NoSpace(fmt.Errorf("begin: %w", err))
	}
	return &Tx{Tx: tx, db: db, began: ctx, rev: rev,
		txState: &txState{schemas: map[string]*model.Schema{}, stmts: map[string]*sql.Stmt{}, writer: true, release: done}}, nil
}

// withRevisions is a view of the transaction that records its changes as rev says.
func (tx *Tx) withRevisions(rev Revisions) *Tx {
	v := *tx
	v.rev = rev
	return &v
}

// Revisions is how the transaction records its changes.
func (tx *Tx) Revisions() Revisions { return tx.rev }

// BeginRead starts a transaction on the read pool: it sees one snapshot, never waits
// for or holds the writer, and any write in it fails. Dry runs that write nothing
// (a pipeline's dry-run batch) use it, so real writers never wait behind them.
func (db *DB) BeginRead(ctx context.Context) (*Tx, error) {
	tx, err := db.r.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin read: %w", err)
	}
	return &Tx{Tx: tx, db: db, began: ctx, txState: &txState{schemas: map[string]*model.Schema{}, stmts: map[string]*sql.Stmt{}}}, nil
}

// DB is the database the transaction belongs to.
func (tx *Tx) DB() *DB { return tx.db }

// Commit commits and ends the transaction.
func (tx *Tx) Commit() error {
	err := tx.commit()
	if err == nil && tx.writer {
		tx.db.committed()
	}
	return tx.db.NoSpace(err)
}

func (tx *Tx) commit() error {
	tx.closeStmts()
	if tx.touched {
		// Other processes (a CLI load next to the server) see the bump and drop their cache.
		if _, err := tx.ExecContext(tx.began, "UPDATE schema_generation SET generation = generation + 1"); err != nil {
			return fmt.Errorf("bump schema generation: %w", err)
		}
	}
	if tx.writer {
		// Last before the commit: FTS5 flushes its pending rows at every later
		// statement savepoint.
		if err := reindexDirty(tx.began, tx.Tx); err != nil {
			return err
		}
	}
	err := tx.Tx.Commit()
	tx.db.commits.Add(1)
	tx.end()
	return err
}

// Rollback aborts the transaction; it is safe to call after Commit.
func (tx *Tx) Rollback() error {
	tx.closeStmts()
	err := tx.Tx.Rollback()
	tx.end()
	return err
}

func (tx *Tx) closeStmts() {
	for k, s := range tx.stmts {
		s.Close()
		delete(tx.stmts, k)
	}
}

func (tx *Tx) end() {
	if tx.release != nil {
		tx.release()
		tx.release = nil
	}
	if tx.touched {
		tx.db.dropSchemaCache()
		tx.touched = false
	}
}

// stmt returns a prepared statement for query, prepared once per transaction.
func (tx *Tx) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if s, ok := tx.stmts[query]; ok {
		return s, nil
	}
	s, err := tx.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	tx.stmts[query] = s
	return s, nil
}

// exec runs a cached prepared statement.
func (tx *Tx) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	s, err := tx.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	tx.writes++
	return s.ExecContext(ctx, args...)
}

// queryRow runs a cached prepared statement returning one row.
func (tx *Tx) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	s, err := tx.stmt(ctx, query)
	if err != nil {
		// Surface the prepare error through the Row by running it unprepared.
		return tx.QueryRowContext(ctx, query, args...)
	}
	return s.QueryRowContext(ctx, args...)
}

// WithTx runs fn in a write transaction, committing when it returns nil.
func (db *DB) WithTx(ctx context.Context, fn func(tx *Tx) error) error {
	return db.WithTxAs(ctx, Revisions{}, fn)
}

// WithTxAs is WithTx with the transaction recording its changes as rev says.
func (db *DB) WithTxAs(ctx context.Context, rev Revisions, fn func(tx *Tx) error) error {
	tx, err := db.BeginAs(ctx, rev)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return db.NoSpace(err)
	}
	return tx.Commit()
}

// Backup writes a consistent copy of the database to dest with VACUUM INTO. The copy
// is written under a temporary name beside dest (`<dest>.*.partial`) and renamed when
// complete: a crash mid-copy must not leave a truncated file under a backup's name.
func (db *DB) Backup(ctx context.Context, dest string) error {
	if _, err := os.Stat(dest); err == nil {
		return model.Errorf(model.EConflict, "backup %s: file exists", dest)
	}
	// VACUUM INTO accepts an existing file only when it is empty.
	f, err := os.CreateTemp(filepath.Dir(dest), filepath.Base(dest)+".*.partial")
	if err != nil {
		return fmt.Errorf("backup %s: %w", dest, err)
	}
	tmp := f.Name()
	f.Close()
	if err := db.vacuumInto(ctx, tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("backup %s: %w", dest, err)
	}
	if err := os.Rename(tmp, dest); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("backup %s: %w", dest, err)
	}
	return nil
}

// vacuumInto copies the database into the empty file path and syncs it.
func (db *DB) vacuumInto(ctx context.Context, path string) error {
	if _, err := db.w.ExecContext(ctx, "VACUUM INTO ?", path); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
