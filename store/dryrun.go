package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"dataservice/store/model"
)

// A dry-run load never takes the database's writer. It reads the database through one
// read transaction (a snapshot that never waits for or holds the writer) and writes
// into a private database: an SQLite file of its own, with the service's table
// layout, in a fresh owner-only directory in the database's DB.TempDir (beside an
// SQLite file, <db>.dryrun-*; the system's temporary directory for PostgreSQL,
// dataservice-dryrun-*), removed when the dry run ends. On PostgreSQL the snapshot
// is a REPEATABLE READ read-only transaction on a connection of its own and the
// private database is SQLite all the same: the snapshot's statements use the
// database's dialect, the private database's SQLite's. The load runs there exactly as a real load runs (the same loader and
// apply path, in one transaction that is rolled back), so its report is the one a real
// load of the same entries gives on the snapshot.
//
// The private database is an overlay of the snapshot. It starts with what every entry
// may read whatever it names: the definition tables (schemas, fields, permissions), the
// configuration and registry, and the rows of the built-in classes (users, roles,
// groups, keys, enumerations, pipelines: what permission checks and enum values read).
// Every other instance row is copied from the snapshot, once, by the read or write of
// the load that first names it, before that read or write runs: the transaction's
// reads and writes of one instance (Tx.Instance, instanceExists, Tx.write, the
// collected addresses of collectIPs) copy that row, those that take a whole class
// (Tx.Instances, DeleteField, deleteSchema) copy the class, and those that select rows
// by their content (the references a cascading rename checks and rewrites:
// checkRenameReach, rewriteReferences) copy the rows of the class that match, found
// by the same condition in the snapshot. A row the dry run has
// copied, written or found absent is never copied again: from then on the private
// database is the truth for it.
//
// So the work is in proportion to the entries, not to the database: one indexed
// snapshot lookup per instance the load names, plus the built-in rows and definitions
// once (and a class's rows when a schema change takes them all, as the real load's
// statement does). Copied rows get new ids in the private database (a load's report
// does not depend on ids).
//
// Memory: the rows live in the private file, not in memory (SQLite's page cache
// bounds what is held). In memory the dry run keeps the keys it has looked up, at most
// defaultMaxDryKeys of them: past that it forgets them and asks the private database instead
// (is the row there, or did the run delete it: temp.dry_gone, kept by triggers), so a
// dry run of any size holds a bounded amount. Disk: the private file holds the copied
// and written rows, of the order of the load's own size.

// dryRun is a dry-run load's snapshot of the database and the private database it
// writes in.
type dryRun struct {
	// snap is the read transaction on the real database, on snapConn when set.
	snap     *Tx
	snapConn *sql.DB
	priv     *DB
	dir      string
	// lock holds the flock on dir's lock file while the run uses dir.
	lock *os.File
	// copied holds "class\x00keyname" of objects looked up in the snapshot (copied, or
	// found absent), at most maxKeys; forgot is set once it was emptied for the
	// bound. whole holds the classes copied entirely.
	copied  map[string]struct{}
	maxKeys int
	forgot  bool
	whole   map[string]bool
	// lookups counts the snapshot lookups (tests check it stays in proportion).
	lookups int
	entries int
	// tx is the load's transaction in the private database, once begun.
	tx   *Tx
	hook func(n int)
}

// SetDryRunHook makes every later dry-run load on db call fn before each entry with
// the number of entries begun so far (1 for the first); nil removes it. Tests use it
// to hold a dry run mid-run.
func (db *DB) SetDryRunHook(fn func(n int)) {
	if fn == nil {
		db.dryHook.Store(nil)
		return
	}
	db.dryHook.Store(&fn)
}

// dryHookOf is the hook set on db, or nil.
func dryHookOf(p *atomic.Pointer[func(int)]) func(int) {
	if f := p.Load(); f != nil {
		return *f
	}
	return nil
}

// defaultMaxDryKeys bounds the keys a dry run remembers in memory (about 100 bytes
// each), unless the database sets another bound (DB.maxDryKeys, tests only).
const defaultMaxDryKeys = 200000

// dryTables are the tables a dry run copies whole before its first entry.
var dryTables = []string{"registry", "configuration", "schemas", "schema_fields", "permissions"}

// newDryRun opens the snapshot and the private database and copies what every entry
// may read into it.
func newDryRun(ctx context.Context, db *DB) (_ *dryRun, err error) {
	dir, err := makeDryDir(db)
	if err != nil {
		return nil, err
	}
	d := &dryRun{dir: dir, copied: map[string]struct{}{}, whole: map[string]bool{}, hook: dryHookOf(&db.dryHook),
		maxKeys: cmp.Or(db.maxDryKeys, defaultMaxDryKeys)}
	defer func() {
		if err != nil {
			err = dryNoSpace(dir, err)
			d.close()
		}
	}()
	if d.lock, err = lockDryDir(dir); err != nil {
		return nil, err
	}
	if d.priv, err = Open(ctx, filepath.Join(dir, "dryrun.db"), Options{ReadConns: 1, private: true}); err != nil {
		return nil, fmt.Errorf("dry run: %w", err)
	}
	d.priv.Now = db.Now
	d.priv.keys = db.keys // secrets seal and open as in the database itself
	d.priv.hold.Store(db.hold.Load())
	if err := d.openSnapshot(ctx, db); err != nil {
		return nil, err
	}
	tx, err := d.priv.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("dry run: %w", err)
	}
	defer tx.Rollback()
	for i := len(dryTables) - 1; i >= 0; i-- {
		if _, err := tx.execContext(ctx, "DELETE FROM "+dryTables[i]); err != nil {
			return nil, fmt.Errorf("dry run: %w", err)
		}
	}
	for _, name := range dryTables {
		if err := d.copyRows(ctx, tx, name, "SELECT * FROM "+name); err != nil {
			return nil, err
		}
	}
	// Built-in objects keep their ids (sessions and tasks name users by id); every
	// later row gets an id above all the snapshot's.
	if err := d.copyRows(ctx, tx, "instances", `SELECT * FROM instances WHERE classname LIKE '\_%' ESCAPE '\'`); err != nil {
		return nil, err
	}
	var high int64
	if err := d.snap.queryRowContext(ctx, "SELECT "+db.dia.greatest("(SELECT high FROM instance_ids)",
		"coalesce((SELECT max(id) FROM instances), 0)")).Scan(&high); err != nil {
		return nil, fmt.Errorf("dry run: %w", err)
	}
	if _, err := tx.execContext(ctx, "UPDATE instance_ids SET high = "+d.priv.dia.greatest("high", "?"), high); err != nil {
		return nil, fmt.Errorf("dry run: %w", err)
	}
	tx.schemasChanged()
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("dry run: %w", err)
	}
	if err := recordGone(ctx, d.priv.writer()); err != nil {
		return nil, err
	}
	return d, nil
}

// openSnapshot begins the dry run's read transaction. It has a connection of its own
// (closed with the dry run) so that a long dry run takes none of the read pool's few
// connections from other readers; a database opened read-only has only its pool.
func (d *dryRun) openSnapshot(ctx context.Context, db *DB) error {
	if db.w == db.r {
		var err error
		d.snap, err = db.BeginRead(ctx)
		return err
	}
	// The real address (db.path is a PostgreSQL URL without its password), opened
	// as the engine opens its pools.
	conn, err := db.dia.openPool(db.dia.dsn(db.addr, true))
	if err != nil {
		return fmt.Errorf("dry run: %w", err)
	}
	conn.SetMaxOpenConns(1)
	d.snapConn = conn
	tx, err := conn.BeginTx(ctx, db.dia.snapshot)
	if err != nil {
		return fmt.Errorf("dry run: begin read: %w", err)
	}
	d.snap = &Tx{sqlTx: tx, db: db, began: ctx, txState: &txState{schemas: map[string]*model.Schema{}, stmts: map[string]*sql.Stmt{}}}
	return nil
}

// close ends the snapshot and removes the private database.
func (d *dryRun) close() {
	if d.snap != nil {
		d.snap.Rollback()
	}
	if d.snapConn != nil {
		d.snapConn.Close()
	}
	if d.priv != nil {
		d.priv.Close()
	}
	os.RemoveAll(d.dir)
	if d.lock != nil {
		d.lock.Close()
	}
}

// dryNoSpace reports a full disk met by a dry run as the dry run's own: it names the
// directory of its private database and leaves the database's disk-full episode
// alone (the database took no write: /readyz must not say it is full).
func dryNoSpace(dir string, err error) error {
	if err == nil || !isDiskFull(err) {
		return err
	}
	var e *model.Error
	if errors.As(err, &e) && (e.Code != model.EDiskFull || dryRunFull(err)) {
		return err
	}
	return &dryDiskFull{model.DiskFullError("the dry run's private database in "+dir, err)}
}

// copyRows inserts the rows query reads from the snapshot into table, column by name.
func (d *dryRun) copyRows(ctx context.Context, tx *Tx, table, query string, args ...any) error {
	rows, err := d.snap.queryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("dry run: read %s: %w", table, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return fmt.Errorf("dry run: read %s: %w", table, err)
	}
	q := "INSERT INTO " + table + "(" + strings.Join(cols, ", ") + ") VALUES(?" + strings.Repeat(", ?", len(cols)-1) + ")"
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return fmt.Errorf("dry run: read %s: %w", table, err)
		}
		textOf(d.snap.db.dia, vals)
		if _, err := tx.exec(ctx, q, vals...); err != nil {
			return fmt.Errorf("dry run: copy %s: %w", table, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dry run: read %s: %w", table, err)
	}
	return nil
}

// textOf turns the bytes another engine's driver gives for a text-like column
// (PostgreSQL's json, read into an any) into text, so the private SQLite database
// stores text, as the real one holds, and never a blob. From SQLite, values are
// copied as they are.
func textOf(from *dialect, vals []any) {
	if from == sqliteDialect {
		return
	}
	for i, v := range vals {
		if b, ok := v.([]byte); ok {
			vals[i] = string(b)
		}
	}
}

// before runs before each entry: it counts the entry and calls the test hook.
func (d *dryRun) before() {
	d.entries++
	if d.hook != nil {
		d.hook(d.entries)
	}
}

// fromSnapshot copies the snapshot's row (cls, key) into the dry run's private
// database before the transaction reads or writes it; outside a dry run it does
// nothing.
func (tx *Tx) fromSnapshot(ctx context.Context, cls, key string) error {
	if tx.dry == nil || strings.HasPrefix(cls, "_") {
		return nil // built-in rows are copied whole at the start
	}
	return tx.dry.copyKey(ctx, tx, cls, key)
}

// classFromSnapshot copies every snapshot row of class cls not copied yet; outside a
// dry run it does nothing.
func (tx *Tx) classFromSnapshot(ctx context.Context, cls string) error {
	if tx.dry == nil || strings.HasPrefix(cls, "_") {
		return nil
	}
	return tx.dry.copyClass(ctx, tx, cls)
}

// whereFromSnapshot copies the snapshot rows of class cls for which cond holds (an SQL
// condition on a row of instances, with args) before a statement of the transaction
// reads the rows of cls by that condition; outside a dry run it does nothing. A read
// that selects rows by their content (the references to a renamed object) must see
// the rows never named by the load, which only the snapshot holds.
//
// cond gives the condition in an engine's SQL: the snapshot's engine may not be the
// private database's (a dry run on PostgreSQL writes into SQLite).
func (tx *Tx) whereFromSnapshot(ctx context.Context, cls string, cond func(*dialect) string, args ...any) error {
	if tx.dry == nil || strings.HasPrefix(cls, "_") || tx.dry.whole[cls] {
		return nil
	}
	return tx.dry.copyWhere(ctx, tx, cls, cond(tx.dry.snap.db.dia), args...)
}

// copyKey copies the snapshot row (cls, key), unless it was looked up before.
func (d *dryRun) copyKey(ctx context.Context, tx *Tx, cls, key string) error {
	if d.whole[cls] || !d.look(cls, key) {
		return nil
	}
	if d.forgot {
		// The key may have been looked up before: the private database knows it when
		// it holds the row or the run deleted it.
		known, err := d.known(ctx, tx, cls, key)
		if err != nil || known {
			return err
		}
	}
	d.lookups++
	var r snapRow
	err := d.snap.queryRow(ctx, `SELECT displayname, is_enabled, data, created_at, updated_at
		FROM instances WHERE classname = ? AND keyname = ?`, cls, key).Scan(&r.displayname, &r.enabled, &r.data, &r.created, &r.updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dry run: read %s %s: %w", cls, key, err)
	}
	if _, err := tx.exec(ctx, tx.db.dia.insertInstanceIfAbsent, cls, key, r.displayname, r.enabled, r.data, r.created, r.updated); err != nil {
		return fmt.Errorf("dry run: copy %s %s: %w", cls, key, err)
	}
	return nil
}

// look records that (cls, key) is looked up in the snapshot, within the bound on the
// keys kept in memory; it reports false when memory says it was looked up before.
func (d *dryRun) look(cls, key string) bool {
	id := cls + "\x00" + key
	if _, ok := d.copied[id]; ok {
		return false
	}
	if len(d.copied) >= d.maxKeys {
		d.copied, d.forgot = map[string]struct{}{}, true
	}
	d.copied[id] = struct{}{}
	return true
}

// copyClass copies every snapshot row of class cls not copied yet.
func (d *dryRun) copyClass(ctx context.Context, tx *Tx, cls string) error {
	if d.whole[cls] {
		return nil
	}
	d.whole[cls] = true
	return d.copyWhere(ctx, tx, cls, "")
}

// copyWhere copies the snapshot rows of class cls for which cond (an SQL condition on
// a row of instances, with args; "" for every row) holds and that the dry run has not
// looked up yet. With a condition, each row it reads counts as looked up (it is never
// copied again, even after the run deletes it).
func (d *dryRun) copyWhere(ctx context.Context, tx *Tx, cls, cond string, args ...any) error {
	q := `SELECT keyname, displayname, is_enabled, data, created_at, updated_at FROM instances WHERE classname = ?`
	if cond != "" {
		q += " AND (" + cond + ")"
	}
	rows, err := d.snap.queryContext(ctx, q+" ORDER BY id", append([]any{cls}, args...)...)
	if err != nil {
		return fmt.Errorf("dry run: read %s: %w", cls, err)
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var r snapRow
		if err := rows.Scan(&key, &r.displayname, &r.enabled, &r.data, &r.created, &r.updated); err != nil {
			return fmt.Errorf("dry run: read %s: %w", cls, err)
		}
		d.lookups++
		if cond == "" {
			if _, ok := d.copied[cls+"\x00"+key]; ok {
				continue // looked up before: the dry run's own state wins
			}
		} else if !d.look(cls, key) {
			continue
		}
		if d.forgot {
			known, err := d.known(ctx, tx, cls, key)
			if err != nil {
				return err
			}
			if known {
				continue
			}
		}
		if _, err := tx.exec(ctx, tx.db.dia.insertInstanceIfAbsent, cls, key, r.displayname, r.enabled, r.data, r.created, r.updated); err != nil {
			return fmt.Errorf("dry run: copy %s %s: %w", cls, key, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dry run: read %s: %w", cls, err)
	}
	return nil
}

// snapRow is an instance row as the snapshot holds it.
type snapRow struct {
	displayname   string
	enabled       bool
	data, created string
	updated       string
}
