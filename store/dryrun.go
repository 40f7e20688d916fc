package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
)

// A dry-run load never takes the database's writer. It reads the database through one
// read transaction (a snapshot that never waits for or holds the writer) and writes
// into a private database: a file of its own, with the service's table layout, in a
// fresh directory under the system's temporary directory (TMPDIR), removed when the
// dry run ends. The load runs there exactly as a real load runs (the same loader and
// apply path, in one transaction that is rolled back), so its report is the one a real
// load of the same entries gives on the snapshot.
//
// The private database starts with what every entry may read whatever it names: the
// definition tables (schemas, fields, permissions), the configuration and registry, and
// the rows of the built-in classes (users, roles, groups, keys, enumerations,
// pipelines: what permission checks and enum values read). Every other row is copied
// from the snapshot when an entry may first read it, before the entry is applied, and
// once per dry run:
//   - the entry's own object (its keyname as given, trimmed, in lower case and, for a
//     dotted IPv4 address, as its hexip keyname);
//   - the objects its reference fields name (given values and defaults), in the
//     fields' target classes;
//   - the collected addresses (ipam_ip) of its IPv4 fields;
//   - for a _schema entry, every object of the class it defines (a schema change may
//     count or rewrite them all).
//
// So the work is in proportion to the entries, not to the database: a few indexed
// lookups per entry, plus the built-in rows and definitions once. Copied rows get
// new ids in the private database (a load's report does not depend on ids).
//
// Memory: the rows live in the private file, not in memory (SQLite's page cache
// bounds what is held); in memory the dry run keeps the set of keys it copied or
// found absent (one string per looked-up key: O(entries)), as a real load's batch
// keeps its known keys. Disk: the private file holds the copied and written rows, of
// the order of the load's own size.

// dryRun is a dry-run load's snapshot of the database and the private database it
// writes in.
type dryRun struct {
	// snap is the read transaction on the real database, on snapConn when set.
	snap     *Tx
	snapConn *sql.DB
	priv     *DB
	dir      string
	// copied holds "class\x00keyname" of every object looked up in the snapshot
	// (copied, or found absent); whole holds the classes copied entirely.
	copied map[string]struct{}
	whole  map[string]bool
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

// dryTables are the tables a dry run copies whole before its first entry.
var dryTables = []string{"registry", "configuration", "schemas", "schema_fields", "permissions"}

// newDryRun opens the snapshot and the private database and copies what every entry
// may read into it.
func newDryRun(ctx context.Context, db *DB) (_ *dryRun, err error) {
	dir, err := os.MkdirTemp("", "dataservice-dryrun-*")
	if err != nil {
		return nil, fmt.Errorf("dry run: %w", err)
	}
	d := &dryRun{dir: dir, copied: map[string]struct{}{}, whole: map[string]bool{}, hook: dryHookOf(&db.dryHook)}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	if d.priv, err = Open(ctx, filepath.Join(dir, "dryrun.db"), Options{ReadConns: 1}); err != nil {
		return nil, fmt.Errorf("dry run: %w", err)
	}
	d.priv.Now = db.Now
	if err := d.openSnapshot(ctx, db); err != nil {
		return nil, err
	}
	tx, err := d.priv.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("dry run: %w", err)
	}
	defer tx.Rollback()
	for i := len(dryTables) - 1; i >= 0; i-- {
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+dryTables[i]); err != nil {
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
	if err := d.snap.QueryRowContext(ctx, `SELECT max((SELECT high FROM instance_ids),
		coalesce((SELECT max(id) FROM instances), 0))`).Scan(&high); err != nil {
		return nil, fmt.Errorf("dry run: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE instance_ids SET high = max(high, ?)", high); err != nil {
		return nil, fmt.Errorf("dry run: %w", err)
	}
	tx.schemasChanged()
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("dry run: %w", err)
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
	conn, err := sql.Open("sqlite", dsn(db.path, true))
	if err != nil {
		return fmt.Errorf("dry run: %w", err)
	}
	conn.SetMaxOpenConns(1)
	d.snapConn = conn
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("dry run: begin read: %w", err)
	}
	d.snap = &Tx{Tx: tx, db: db, began: ctx, txState: &txState{schemas: map[string]*Schema{}, stmts: map[string]*sql.Stmt{}}}
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
}

// copyRows inserts the rows query reads from the snapshot into table, column by name.
func (d *dryRun) copyRows(ctx context.Context, tx *Tx, table, query string, args ...any) error {
	rows, err := d.snap.QueryContext(ctx, query, args...)
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
		if _, err := tx.exec(ctx, q, vals...); err != nil {
			return fmt.Errorf("dry run: copy %s: %w", table, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dry run: read %s: %w", table, err)
	}
	return nil
}

// instanceCopy copies one snapshot row into the private database under a new id. A row
// is copied before any entry may write it, so the conflict clause never applies; it
// only guards the private state, which wins.
const instanceCopy = `INSERT INTO instances(id, classname, keyname, displayname, is_enabled, data, created_at, updated_at)
	VALUES(` + nextInstanceID + `, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(classname, keyname) DO NOTHING`

// before copies, into tx, the snapshot rows entry e may read (see the comment at the
// top), each once per dry run.
func (d *dryRun) before(ctx context.Context, tx *Tx, e *Entry) error {
	d.entries++
	d.tx = tx
	if d.hook != nil {
		d.hook(d.entries)
	}
	if e.Classname == "_schema" {
		return d.copyClass(ctx, tx, e.Keyname)
	}
	if strings.HasPrefix(e.Classname, "_") {
		return nil // built-in rows and definitions are copied whole
	}
	s, err := tx.Schema(ctx, e.Classname)
	if IsNotFound(err) {
		return nil // the entry fails for its unknown class
	}
	if err != nil {
		return err
	}
	own := map[string]bool{}
	addWords(own, e.Keyname)
	if strings.HasPrefix(s.KeynameMode, "hexip") {
		addWords(own, e.Displayname) // the keyname derives from it
	}
	if err := d.copyKeys(ctx, tx, s.Keyname, own); err != nil {
		return err
	}
	var ips map[string]bool
	if s.Keyname != "ipam_ip" && len(s.ipv4AddressFields()) > 0 {
		// Addresses are collected from the whole new state: an update keeps the
		// stored object's addresses the entry does not give.
		ips = map[string]bool{}
		for k := range own {
			in, err := tx.Instance(ctx, s.Keyname, k)
			if IsNotFound(err) {
				continue
			}
			if err != nil {
				return err
			}
			for _, f := range s.ipv4AddressFields() {
				walkText(in.Data[f.Keyname], func(t string) { addWords(ips, t) })
			}
		}
	}
	for _, f := range s.Fields {
		v, given := e.Fields[f.Keyname]
		switch {
		case f.Dataformat == "schema":
			target := strings.Fields(f.DataformatExt)
			if len(target) == 0 || strings.HasPrefix(target[0], "_") {
				continue
			}
			words := map[string]bool{}
			if given {
				walkText(v, func(t string) { addWords(words, t) })
			}
			walkText(f.Default, func(t string) { addWords(words, t) })
			if err := d.copyKeys(ctx, tx, target[0], words); err != nil {
				return err
			}
		case f.Dataformat == "ipv4" && !strings.Contains(f.DataformatExt, "subnet") && given:
			if ips == nil {
				ips = map[string]bool{}
			}
			walkText(v, func(t string) { addWords(ips, t) })
		}
	}
	if ips != nil && s.Keyname != "ipam_ip" {
		return d.copyKeys(ctx, tx, "ipam_ip", ips)
	}
	return nil
}

// copyKeys copies the snapshot rows of class cls named by any of keys.
func (d *dryRun) copyKeys(ctx context.Context, tx *Tx, cls string, keys map[string]bool) error {
	if d.whole[cls] {
		return nil
	}
	for k := range keys {
		id := cls + "\x00" + k
		if _, ok := d.copied[id]; ok {
			continue
		}
		d.copied[id] = struct{}{}
		d.lookups++
		var r snapRow
		err := d.snap.queryRow(ctx, `SELECT displayname, is_enabled, data, created_at, updated_at
			FROM instances WHERE classname = ? AND keyname = ?`, cls, k).Scan(&r.displayname, &r.enabled, &r.data, &r.created, &r.updated)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return fmt.Errorf("dry run: read %s %s: %w", cls, k, err)
		}
		if _, err := tx.exec(ctx, instanceCopy, cls, k, r.displayname, r.enabled, r.data, r.created, r.updated); err != nil {
			return fmt.Errorf("dry run: copy %s %s: %w", cls, k, err)
		}
	}
	return nil
}

// copyClass copies every snapshot row of class cls not copied yet.
func (d *dryRun) copyClass(ctx context.Context, tx *Tx, cls string) error {
	if d.whole[cls] || strings.HasPrefix(cls, "_") {
		return nil
	}
	d.whole[cls] = true
	rows, err := d.snap.QueryContext(ctx, `SELECT keyname, displayname, is_enabled, data, created_at, updated_at
		FROM instances WHERE classname = ? ORDER BY id`, cls)
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
		if _, ok := d.copied[cls+"\x00"+key]; ok {
			continue // copied before: the dry run's own state wins
		}
		if _, err := tx.exec(ctx, instanceCopy, cls, key, r.displayname, r.enabled, r.data, r.created, r.updated); err != nil {
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

// addWords adds s, its lower case and, for a dotted IPv4 address, its hexip keyname.
func addWords(words map[string]bool, s string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return
	}
	words[s] = true
	words[strings.ToLower(s)] = true
	if IsDottedIPv4(s) {
		if h, err := HexIP(s); err == nil {
			words[h] = true
		}
	}
}

// walkText calls fn with every scalar of v as text.
func walkText(v any, fn func(string)) {
	switch x := v.(type) {
	case string:
		fn(x)
	case []any:
		for _, y := range x {
			walkText(y, fn)
		}
	case map[string]any:
		for _, y := range x {
			walkText(y, fn)
		}
	case float64:
		fn(strconv.FormatFloat(x, 'f', -1, 64))
	case int:
		fn(strconv.Itoa(x))
	case int64:
		fn(strconv.FormatInt(x, 10))
	case bool:
		fn(strconv.FormatBool(x))
	case nil:
	default:
		fn(fmt.Sprint(x))
	}
}
