package store

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
)

// openPostgres opens the PostgreSQL database at the URL addr: a writer pool of one
// connection (this process's write transactions queue there; the advisory writer lock
// orders them with every other node's), a read pool whose transactions are
// read-only, and the table layout brought up to date (or checked, under AsIs and
// ReadOnly). An unreachable server or a refused connection fails here, naming the
// host, before anything is written.
func openPostgres(ctx context.Context, addr string, opts Options) (*DB, error) {
	shown := RedactURL(addr)
	if _, err := url.Parse(addr); err != nil {
		return nil, fmt.Errorf("open database %s: the URL does not parse", shown)
	}
	dia := postgresDialect
	writeDSN := dia.dsn(addr, false)
	if opts.ReadOnly {
		writeDSN = dia.readOnlyDSN(addr)
	}
	w, err := openPostgresPool(writeDSN)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", shown, redactErr(err, addr))
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	fail := func(err error) (*DB, error) {
		w.Close()
		return nil, fmt.Errorf("open database %s: %w", shown, redactErr(err, addr))
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = w.PingContext(pctx)
	cancel()
	if err != nil {
		return fail(err)
	}
	db := &DB{path: shown, addr: addr, w: w, dia: dia, log: opts.Logger, Now: time.Now, onEvents: opts.OnEvents}
	switch {
	case opts.ReadOnly:
		if err := dia.checkFile(ctx, w); err != nil {
			return fail(err)
		}
		if err := checkLayout(ctx, db.writer()); err != nil {
			return fail(err)
		}
		db.r = w
		return db, nil
	case opts.AsIs:
		if err := db.requireLayout(ctx); err != nil {
			return fail(err)
		}
	default:
		if err := db.migrateLayoutLocked(ctx); err != nil {
			return fail(err)
		}
		// Dry runs' private files live in the temporary directory (DB.TempDir): the
		// ones killed runs left there go, as an SQLite file's do at its open.
		sweepDryRuns("", opts.Logger)
	}
	r, err := openPostgresPool(dia.dsn(addr, true))
	if err != nil {
		return fail(err) // fail redacts
	}
	r.SetMaxOpenConns(opts.ReadConns)
	r.SetMaxIdleConns(opts.ReadConns)
	db.r = r
	// The heartbeat's connection is made at the first heartbeat: commands that run
	// none never open it.
	hb, err := openPostgresPool(dia.dsn(addr, false))
	if err != nil {
		r.Close()
		return fail(err)
	}
	hb.SetMaxOpenConns(1)
	hb.SetMaxIdleConns(1)
	db.hb = hb
	if !opts.AsIs {
		// The salt exists from the first open on, so the throttle reads it where a
		// write would fail.
		if _, err := db.NodeSalt(ctx); err != nil {
			db.Close()
			return nil, fmt.Errorf("open database %s: %w", shown, redactErr(err, addr))
		}
	}
	return db, nil
}

// migrateLayoutLocked applies the pending layout steps under the start-up lock
// (startlock_postgres.go), taken before their transactions begin. Nodes opening a new
// database together so run each step once; and a transaction begun after the lock
// sees the tables the previous holder made, where one begun before waiting on the
// writer lock could still answer from catalog entries of before the wait and create
// a table twice. An up-to-date layout takes no lock: opening never waits for another
// node's start-up sequence.
func (db *DB) migrateLayoutLocked(ctx context.Context) error {
	if checkLayout(ctx, db.writer()) == nil {
		return db.migrateLayout(ctx) // only checks the schema's objects
	}
	unlock, err := postgresLockStartup(ctx, db)
	if err != nil {
		return err
	}
	defer unlock()
	return db.migrateLayout(ctx)
}

// redactErr is err with the passwords of addr (urlSecrets) removed from its text,
// should the driver or a tool have quoted the URL or the password.
func redactErr(err error, addr string) error {
	if err == nil {
		return nil
	}
	secrets := urlSecrets(addr)
	if len(secrets) == 0 {
		return err
	}
	return redacted{err, secrets}
}

type redacted struct {
	err     error
	secrets []string
}

func (r redacted) Error() string {
	text := r.err.Error()
	for _, s := range r.secrets {
		text = strings.ReplaceAll(text, s, "xxxxx")
	}
	return text
}
func (r redacted) Unwrap() error { return r.err }

// Engine is the database engine's name: "sqlite" or "postgres".
func (db *DB) Engine() string { return db.dia.name }

// IsFile reports whether the database is a file (SQLite): file modes, free disk
// space, the WAL and backups beside it make sense for it only.
func (db *DB) IsFile() bool { return db.dia == sqliteDialect }

// TempDir is where the store and its callers spool data for the database (request
// bodies, dry runs' private files): beside the file for SQLite, so a full disk shows
// as the database's; the system's temporary directory for PostgreSQL.
func (db *DB) TempDir() string {
	if db.IsFile() {
		return filepath.Dir(db.path)
	}
	return os.TempDir()
}

// postgresCheckSchema refuses a database holding schema objects the service's layout
// does not create (schemacheck_postgres.go).
func postgresCheckSchema(ctx context.Context, pool *sql.DB) error {
	return checkPostgresSchema(ctx, pool)
}

// openPostgresPool opens a pool on dsn whose connections encode a Go bool as 0 or 1
// where the column is an integer: the store's flags are integers on every engine (as
// SQLite keeps them), and its statements pass Go bools for them.
func openPostgresPool(dsn string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	return stdlib.OpenDB(*cfg, stdlib.OptionAfterConnect(func(_ context.Context, c *pgx.Conn) error {
		m := c.TypeMap()
		m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{wrapBool}, m.TryWrapEncodePlanFuncs...)
		return nil
	})), nil
}

// intBool is a Go bool as an integer (1 or 0) or a boolean, whichever the column is.
type intBool bool

func (b intBool) Int64Value() (pgtype.Int8, error) {
	n := int64(0)
	if b {
		n = 1
	}
	return pgtype.Int8{Int64: n, Valid: true}, nil
}

func (b intBool) BoolValue() (pgtype.Bool, error) {
	return pgtype.Bool{Bool: bool(b), Valid: true}, nil
}

// wrapBool is the encode-plan wrapper turning a bool into an intBool.
func wrapBool(value any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	if b, ok := value.(bool); ok {
		return &intBoolPlan{}, intBool(b), true
	}
	return nil, nil, false
}

type intBoolPlan struct{ next pgtype.EncodePlan }

func (p *intBoolPlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *intBoolPlan) Encode(value any, buf []byte) ([]byte, error) {
	return p.next.Encode(intBool(value.(bool)), buf)
}
