// Package store keeps everything dataservice knows in one SQLite file: the registry,
// configuration, schemas and fields, instances, permissions, revisions and tasks. It
// validates every value it writes, loads documents in the load format and hashes secrets.
// It holds the SQL: where engines differ, the statement text comes from the dialect
// chosen at Open (dialect.go; SQLite is the one engine). Outside store, writes of the
// data go through Apply (and a load), a table owner's statements through its Table,
// the start-up sequence's through Migration, and reads of raw rows through Reader.
package store

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the CGO-free SQLite driver (dialect_sqlite.go)

	"dataservice/store/model"
)

// DB is the SQLite file. Writes go through one connection; reads use a small pool.
type DB struct {
	// path is the database file's absolute path, or a PostgreSQL database's URL
	// without its password (for messages); addr is what the pools connect to.
	path string
	addr string
	w    *sql.DB
	r    *sql.DB
	// hb is the pool of a node's heartbeat (TouchNode, LeaveNodes): one connection
	// of its own, outside the writer lock, where the engine's row locks let the
	// update of the node's own row wait for nothing (PostgreSQL). A node whose write
	// transaction (or another node's) holds the writer lock longer than the liveness
	// window so still shows live. nil for SQLite, whose every write waits for the
	// file's one write lock, and for a read-only handle: the heartbeat writes through
	// the writer there.
	hb *sql.DB
	// dia is the engine's SQL where engines differ (dialect.go), chosen at Open.
	dia *dialect
	log *slog.Logger
	// inUse holds the shared in-use lock on the database file while it is open.
	inUse *os.File
	// turn is the turnstile every write transaction passes (turnstile.go); nil when
	// the file is open read-only, or when the turnstile could not be opened (writes
	// then go without it, with a warning).
	turn *turnstile
	// readOnly marks a file opened read-only (openReadOnly): nothing writes through it,
	// so the search catch-up does not run on it. A writable file whose turnstile could
	// not be opened (turn nil) is not read-only.
	readOnly bool
	// Now is the clock; tests replace it.
	Now func() time.Time

	mu      sync.RWMutex
	schemas map[string]*model.Schema // read cache, dropped whenever a transaction touches schemas
	// schemaGen is the schema_generation the cache was filled at; local counts local drops.
	schemaGen int64
	local     uint64
	// refFields caches every reference field (class, field, target class) at
	// refFieldsGen and refFieldsLocal, as the schema cache is kept (console.go).
	refFields      [][3]string
	refFieldsGen   int64
	refFieldsLocal uint64
	// classes caches the instances of the classes every console page reads
	// (classcache.go).
	classes classCache
	verify  sync.Map // verified-secret cache, see secret.go
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
	// maxDueQueues is the bound of the event queues a claim looks at; zero:
	// defaultMaxDueQueues. Only tests lower it (to reach the bound with few rules).
	maxDueQueues int
	// ruleCache holds the enabled event rules (event_record.go); onEvents is
	// Options.OnEvents.
	ruleCache ruleCache
	onEvents  func(recorded int)
	// keys holds the key of encrypted secrets (secretkey.go).
	keys *secretKeys
	// searchWake wakes the search index's catch-up after a commit (searchcatchup.go);
	// searchIndexed counts the rows it indexed; searchScanning is set while searches
	// read every row because the index lags too far (logged once per episode);
	// searchEmptyAt is the last moment (Unix nanoseconds) this process knew the list
	// of rows to index to be empty, or when it opened the database (SearchLag).
	searchWake     chan struct{}
	searchIndexed  atomic.Int64
	searchScanning atomic.Bool
	searchEmptyAt  atomic.Int64
	// searchMergedAt is searchIndexed when the index was last merged whole, and
	// searchMerging is set while a merge is under way (searchmerge.go); mergeAfter
	// replaces mergeAfterRows when above zero (tests).
	searchMergedAt atomic.Int64
	searchMerging  atomic.Bool
	mergeAfter     atomic.Int64
	// searchLimit replaces SearchBacklogLimit when above zero (tests reach it with
	// few rows).
	searchLimit int64
	// unlisted, when set (benchmarks only, UnlistedUpdatesForTest), stops the store
	// listing the instances it updates.
	unlisted atomic.Bool
	// searchSeen, when set (tests only), is given the query and arguments of every
	// indexed search's page before it runs (a test asks the engine for its plan).
	searchSeen func(query string, args []any)
}

// rstmt returns query prepared on the read pool, prepared on first use.
func (db *DB) rstmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if s, ok := db.rstmts.Load(query); ok {
		return s.(*sql.Stmt), nil
	}
	s, err := db.reader().prepareContext(context.WithoutCancel(ctx), query)
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
		return db.reader().queryRowContext(ctx, query, args...)
	}
	return s.QueryRowContext(ctx, args...)
}

// rquery runs a read-pool query prepared once.
func (db *DB) rquery(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	s, err := db.rstmt(ctx, query)
	if err != nil {
		return db.reader().queryContext(ctx, query, args...)
	}
	return s.QueryContext(ctx, args...)
}

// prepared is a querier over the read pool whose statements are prepared once
// (rquery, rqueryRow), for the reads of constant text every page makes (sessions,
// roles, revisions, references): the engine parses and plans each once, not per request.
type prepared struct{ db *DB }

func (p prepared) queryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return p.db.rquery(ctx, query, args...)
}

func (p prepared) queryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return p.db.rqueryRow(ctx, query, args...)
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
	// OnEvents, when set, is told after each commit of a write transaction that
	// recorded events how many it recorded (the events-recorded metric).
	OnEvents func(recorded int)
	// SecretKey is the 32-byte key that seals encrypted secrets (secret fields with
	// dataformat_ext encrypted); nil: read from SecretKeyFile.
	SecretKey []byte
	// SecretKeyFile is the file holding that key as 64 hex digits, mode 0600 (the
	// setting SERVICE_SECRET_KEY_FILE). "" on SQLite: the database's path plus ".key",
	// created at the first write that needs it; "" on PostgreSQL: no key, so such a
	// write fails naming the setting.
	SecretKeyFile string
	// private marks a dry run's private database: it sweeps no leftover dry runs.
	private bool
}

// Open opens (creating if missing) the database at path and brings its table layout up to date.
func Open(ctx context.Context, path string, opts Options) (*DB, error) {
	keys, err := newSecretKeys(path, opts)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	db, err := openDB(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	db.keys = keys
	return db, nil
}

// openDB is Open without the key of encrypted secrets.
func openDB(ctx context.Context, path string, opts Options) (*DB, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ReadConns <= 0 {
		opts.ReadConns = 4
	}
	if path == "" {
		return nil, fmt.Errorf("open database: empty path")
	}
	if isPostgresURL(path) {
		return openPostgres(ctx, path, opts)
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
	dia := sqliteDialect
	var turn *turnstile
	if dia.turnstile {
		turn = openTurnstile(abs, opts.Logger)
	}
	w, err := sql.Open(dia.driver, dia.dsn(abs, false))
	if err != nil {
		turn.close()
		inUse.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	db := &DB{path: abs, addr: abs, w: w, dia: dia, log: opts.Logger, Now: time.Now, inUse: inUse, turn: turn,
		onEvents: opts.OnEvents, searchWake: make(chan struct{}, 1)}
	db.searchEmptyAt.Store(time.Now().UnixNano())
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
	// Rows listed for the search index stay listed at open: the catch-up a serving
	// process runs indexes them (RunSearchCatchUp), and searches check them meanwhile.
	r, err := sql.Open(dia.driver, dia.dsn(abs, true))
	if err != nil {
		return fail(err)
	}
	r.SetMaxOpenConns(opts.ReadConns)
	r.SetMaxIdleConns(opts.ReadConns)
	db.r = r
	if !opts.AsIs {
		// The salt exists from the first open on, so the throttle reads it where a
		// write would fail (a full disk).
		if _, err := db.NodeSalt(ctx); err != nil {
			r.Close()
			return fail(err)
		}
	}
	return db, nil
}

// openReadOnly opens abs with mode=ro for both pools; its table layout must be current.
func openReadOnly(ctx context.Context, abs, path string, opts Options) (*DB, error) {
	if _, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	dia := sqliteDialect
	r, err := sql.Open(dia.driver, dia.readOnlyDSN(abs))
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	r.SetMaxOpenConns(opts.ReadConns)
	r.SetMaxIdleConns(opts.ReadConns)
	if err := dia.checkFile(ctx, r); err != nil {
		r.Close()
		return nil, fmt.Errorf("open database %s read-only: %w", path, err)
	}
	if err := checkLayout(ctx, conn{r, dia}); err != nil {
		r.Close()
		return nil, fmt.Errorf("open database %s read-only: %w", path, err)
	}
	db := &DB{path: abs, addr: abs, w: r, r: r, dia: dia, log: opts.Logger, Now: time.Now, readOnly: true}
	db.searchEmptyAt.Store(time.Now().UnixNano()) // SearchLag counts from the open, as a writable open's
	return db, nil
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
	if db.hb != nil {
		if herr := db.hb.Close(); err == nil {
			err = herr
		}
	}
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

// Reader is a read-only door onto the read pool, for tests and tools that read the
// file's tables directly: it runs queries written with `?` placeholders through the
// dialect, and offers no Exec, no transaction and no pool settings (the pool is
// query-only anyway). *sql.DB satisfies it too, for a pool opened beside the store.
type Reader interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Reader is the read pool's query functions (no writes, no raw pool).
func (db *DB) Reader() Reader { return readPool{db.reader()} }

// WithRead runs fn with the queries of one read transaction of the read pool: every
// query fn makes sees the same snapshot of the database, as a dry run's reads do. The
// read pool is query-only, so fn cannot write through it.
func (db *DB) WithRead(ctx context.Context, fn func(r Reader) error) error {
	tx, err := db.r.BeginTx(ctx, db.dia.snapshot)
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer tx.Rollback()
	return fn(readPool{conn{tx, db.dia}})
}

// readPool is DB.Reader: the read pool behind the dialect.
type readPool struct{ c conn }

func (p readPool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return p.c.queryContext(ctx, query, args...)
}

func (p readPool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return p.c.queryRowContext(ctx, query, args...)
}

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
	// Chain are the event rules whose pipeline actions caused this transaction, in
	// order (the task runner sets it from the task): a rule in it fires no event, and
	// a chain of MaxEventDepth rules fires none at all.
	Chain []string
}

// Tx is a write transaction. It remembers whether it changed schemas so the schema
// cache is dropped when it ends, and caches prepared statements for hot loops. Its
// revision choice is fixed: withRevisions gives a view of the same transaction that
// records its changes differently.
type Tx struct {
	// sqlTx is not embedded: every statement passes the dialect (execContext and the
	// other helpers below), and no package outside store runs SQL in a write
	// transaction except through a door (Apply, a table owner's Table, Migration).
	sqlTx *sql.Tx
	db    *DB
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
	// searchListed are the ids of the instances this transaction updated, listed for
	// the search index in one statement before it commits (listForSearch).
	searchListed []int64
	// rawListed: the transaction's connection has the temporary trigger listing what
	// its statements run as written update (rawListing).
	rawListed bool
	// known caches instances known to exist in this transaction ("class\x00key") for
	// reference checks and address collection; dropped on delete and rename.
	known map[string]struct{}
	// writer marks a write transaction (BeginAs): its Commit folds the counts and wakes
	// the search index's catch-up.
	writer bool
	// release returns the writer connection to the pool once the transaction ended.
	release func()
	// dry is set in a dry-run load's private database: reads and writes of instances
	// first copy what they name from the dry run's snapshot (dryrun.go).
	dry *dryRun
	// events are the event rules the transaction records by and what it recorded
	// (event_record.go).
	events txEvents
	// deltas builds the delta revision rows of the transaction's updates, its buffers
	// reused from one row to the next.
	deltas RevisionDeltas
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
	return &Tx{sqlTx: tx, db: db, began: ctx, rev: rev,
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
	tx, err := db.r.BeginTx(ctx, db.dia.snapshot)
	if err != nil {
		return nil, fmt.Errorf("begin read: %w", err)
	}
	return &Tx{sqlTx: tx, db: db, began: ctx, txState: &txState{schemas: map[string]*model.Schema{}, stmts: map[string]*sql.Stmt{}}}, nil
}

// DB is the database the transaction belongs to.
func (tx *Tx) DB() *DB { return tx.db }

// Commit commits and ends the transaction.
func (tx *Tx) Commit() error {
	err := tx.commit()
	if err == nil && tx.writer {
		tx.db.committed()
		tx.eventsCommitted()
		tx.db.wakeCatchUp()
	}
	return tx.db.NoSpace(err)
}

func (tx *Tx) commit() error {
	tx.closeStmts()
	if tx.touched {
		// Other processes (a CLI load next to the server) see the bump and drop their cache.
		if _, err := tx.execContext(tx.began, "UPDATE schema_generation SET generation = generation + 1"); err != nil {
			return fmt.Errorf("bump schema generation: %w", err)
		}
	}
	if err := tx.flushSearchListed(); err != nil {
		return err
	}
	if tx.writer {
		for _, q := range tx.db.dia.beforeCommit {
			if _, err := tx.execContext(tx.began, q); err != nil {
				return fmt.Errorf("fold counts: %w", err)
			}
		}
	}
	err := tx.sqlTx.Commit()
	tx.db.commits.Add(1)
	tx.end()
	return err
}

// Rollback aborts the transaction; it is safe to call after Commit.
func (tx *Tx) Rollback() error {
	tx.closeStmts()
	err := tx.sqlTx.Rollback()
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
	s, err := tx.conn().prepareContext(ctx, query)
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
		return tx.queryRowContext(ctx, query, args...)
	}
	return s.QueryRowContext(ctx, args...)
}

// execAny runs any statement in the transaction, prepared once when it has
// arguments: Migration.Exec's, the one exported door to it.
func (tx *Tx) execAny(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if len(args) == 0 {
		return tx.execContext(ctx, query)
	}
	s, err := tx.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return s.ExecContext(ctx, args...)
}

// conn is the transaction's statements through the dialect.
func (tx *Tx) conn() conn { return conn{tx.sqlTx, tx.db.dia} }

// counted runs the transaction's statements as cached prepared statements counted
// in its writes (exec, queryRow): a rowRunner for the dialect's insertID.
type counted struct{ tx *Tx }

func (c counted) execContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return c.tx.exec(ctx, query, args...)
}

func (c counted) queryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	c.tx.writes++
	return c.tx.queryRow(ctx, query, args...)
}

// execContext runs a statement once (not prepared, not counted in writes).
func (tx *Tx) execContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return tx.conn().execContext(ctx, query, args...)
}

// queryContext runs a query once (not prepared).
func (tx *Tx) queryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return tx.conn().queryContext(ctx, query, args...)
}

// queryRowContext runs a one-row query once (not prepared).
func (tx *Tx) queryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return tx.conn().queryRowContext(ctx, query, args...)
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

// Backup writes a consistent copy of the database to dest (the dialect's online
// backup: VACUUM INTO for SQLite). The copy
// is written under a temporary name beside dest (`<dest>.*.partial`) and renamed when
// complete: a crash mid-copy must not leave a truncated file under a backup's name.
//
// On PostgreSQL it is pg_dump's archive (DumpPostgres).
func (db *DB) Backup(ctx context.Context, dest string) error {
	if !db.IsFile() {
		return DumpPostgres(ctx, db, dest)
	}
	if _, err := os.Stat(dest); err == nil {
		return model.Errorf(model.EConflict, "backup %s: file exists", dest)
	}
	// The copy goes to an empty file (VACUUM INTO accepts an existing file only then).
	f, err := os.CreateTemp(filepath.Dir(dest), filepath.Base(dest)+".*.partial")
	if err != nil {
		return fmt.Errorf("backup %s: %w", dest, err)
	}
	tmp := f.Name()
	f.Close()
	if err := db.dia.backup(ctx, db.writer(), tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("backup %s: %w", dest, err)
	}
	if err := os.Rename(tmp, dest); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("backup %s: %w", dest, err)
	}
	return nil
}
