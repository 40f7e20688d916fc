package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"
)

// The check of a file's schema objects is SQLite's (the SQLite dialect's checkFile):
// it reads sqlite_schema and rebuilds SQLite's layout in memory.
//
// A database file holds code as well as data: triggers run on every write, views and
// index expressions on reads, DEFAULT and CHECK expressions in a table's own SQL on
// inserts. A crafted file (a backup handed to restore, a file copied in place) could
// carry a trigger that grants a key role_admin at the next ordinary load. So every
// open compares the file's schema objects with those its own layout version creates,
// built in an in-memory database from the same layout steps, before any layout step
// writes, and refuses a file holding anything else.

// SchemaObject is one row of a file's sqlite_schema: an object's kind (table, index,
// trigger or view), its name, the table it belongs to and the CREATE text as SQLite
// stored it (empty for the indexes SQLite makes for UNIQUE and PRIMARY KEY).
type SchemaObject struct {
	Type, Name, Table, SQL string
}

func (o SchemaObject) String() string {
	s := o.Type + " " + o.Name
	if o.Table != o.Name {
		s += " on " + o.Table
	}
	if o.SQL != "" {
		s += ": " + quoteSQL(o.SQL)
	}
	return s
}

// quoteSQL is text for a message: whitespace runs collapsed, at most about 200
// characters, quoted so control characters show escaped.
func quoteSQL(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	const max = 200
	if utf8.RuneCountInString(text) > max {
		r := []rune(text)
		text = string(r[:max]) + "…"
	}
	return fmt.Sprintf("%q", text)
}

// SchemaError is the error for a file whose schema objects are not those the
// service's layout creates at the file's layout version.
type SchemaError struct {
	// Layout names the layout version compared with ("layout 10, tasks 1").
	Layout string
	// Unexpected are objects the layout does not create; Changed are objects the
	// layout creates under that name, as the file has them (other SQL, kind or
	// table); Missing are objects the layout creates that the file lacks.
	Unexpected, Changed, Missing []SchemaObject
	// tables names a table (or an index SQLite made for one) that the layout does
	// not create, or that differs or is missing: the file cannot be repaired, its
	// rows are the data.
	tables string
	// later are the unexpected tables that a later layout version creates: the file
	// claims a layout version lower than its tables imply.
	later []string
}

// Repairable reports whether CheckFileSchema can repair the file: no table is
// unexpected, differs or is missing.
func (e *SchemaError) Repairable() bool { return e.tables == "" }

// maxListed bounds how many objects an error message lists.
const maxListed = 20

func (e *SchemaError) Error() string {
	var parts []string
	n := 0
	add := func(what string, objs []SchemaObject) {
		for _, o := range objs {
			if n < maxListed {
				parts = append(parts, what+" "+o.String())
			}
			n++
		}
	}
	if len(e.later) > 0 {
		listed := e.later
		if len(listed) > maxListed {
			listed = append(listed[:maxListed:maxListed], "…")
		}
		parts = append(parts, fmt.Sprintf("the file claims %s but holds tables that later layout versions create (%s): "+
			"its layout version is lower than its tables imply (a damaged or crafted file)", e.Layout, strings.Join(listed, ", ")))
	}
	// The tables named in that clause, their triggers and indexes, are not listed
	// again.
	named := make(map[string]bool, len(e.later))
	for _, name := range e.later {
		named[name] = true
	}
	var unexpected []SchemaObject
	for _, o := range e.Unexpected {
		if !named[o.Table] {
			unexpected = append(unexpected, o)
		}
	}
	add("unexpected", unexpected)
	add("changed", e.Changed)
	add("missing", e.Missing)
	if n > maxListed {
		parts = append(parts, fmt.Sprintf("and %d more", n-maxListed))
	}
	return fmt.Sprintf("schema objects differ from what the service creates at %s "+
		"(a file holds data, not code): %s", e.Layout, strings.Join(parts, "; "))
}

// layoutVersion is how far a file has run store's layout and each owner's.
type layoutVersion struct {
	store  int
	owners map[string]int
}

func (v layoutVersion) String() string {
	s := fmt.Sprintf("layout %d", v.store)
	owners := make([]string, 0, len(v.owners))
	for o := range v.owners {
		owners = append(owners, o)
	}
	sort.Strings(owners)
	for _, o := range owners {
		s += fmt.Sprintf(", %s %d", o, v.owners[o])
	}
	return s
}

// layoutVersionsTable is the owners' version table, created by the first owned step
// a file runs (migrateOwnedStep) and by the reference layout the same way.
const layoutVersionsTable = `CREATE TABLE IF NOT EXISTS layout_versions (
	owner   TEXT PRIMARY KEY,
	version INTEGER NOT NULL
) WITHOUT ROWID`

// legacyOwned is how many of an owner's steps store's layout 1 ran as released,
// before the owner registered its own: files made then hold those tables with no
// layout_versions row (the SQL is the same, so the objects compare equal).
var legacyOwned = map[string]int{"tasks": 1}

// sqliteOwn are the tables SQLite itself creates (AUTOINCREMENT, ANALYZE), with the
// text it stores for them: expected in any file, and only with that text.
var sqliteOwn = map[string]string{
	"sqlite_sequence": "CREATE TABLE sqlite_sequence(name,seq)",
	"sqlite_stat1":    "CREATE TABLE sqlite_stat1(tbl,idx,stat)",
	"sqlite_stat4":    "CREATE TABLE sqlite_stat4(tbl,idx,neq,nlt,ndlt,sample)",
}

// schemaQuerier runs queries: *sql.DB, *sql.Tx and *sql.Conn.
type schemaQuerier = sqlRunner

// readSchema reads the file's layout version and its schema objects (main schema:
// temporary objects are the connection's own) in one read transaction, so that a
// process migrating the file beside it cannot make them disagree.
func readSchema(ctx context.Context, pool *sql.DB) (layoutVersion, []SchemaObject, error) {
	conn, err := pool.Conn(ctx)
	if err != nil {
		return layoutVersion{}, nil, err
	}
	defer conn.Close()
	// A plain BEGIN (deferred): reading takes no write lock, even on the writer pool
	// whose transactions begin immediate.
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		return layoutVersion{}, nil, err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	objs, err := schemaObjects(ctx, conn)
	if err != nil {
		return layoutVersion{}, nil, err
	}
	v, err := fileVersion(ctx, conn, objs)
	return v, objs, err
}

// schemaObjects lists the main schema's objects by name.
func schemaObjects(ctx context.Context, q schemaQuerier) ([]SchemaObject, error) {
	rows, err := q.QueryContext(ctx, "SELECT type, name, tbl_name, sql FROM main.sqlite_schema ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("read schema: %w", err)
	}
	defer rows.Close()
	var objs []SchemaObject
	for rows.Next() {
		var o SchemaObject
		var text sql.NullString
		if err := rows.Scan(&o.Type, &o.Name, &o.Table, &text); err != nil {
			return nil, fmt.Errorf("read schema: %w", err)
		}
		o.SQL = text.String
		objs = append(objs, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read schema: %w", err)
	}
	return objs, nil
}

// fileVersion reads store's layout version and each registered owner's.
func fileVersion(ctx context.Context, q schemaQuerier, objs []SchemaObject) (layoutVersion, error) {
	v := layoutVersion{owners: map[string]int{}}
	if err := q.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v.store); err != nil {
		return v, fmt.Errorf("read layout version: %w", err)
	}
	hasVersions := false
	for _, o := range objs {
		if o.Name == "layout_versions" && o.Type == "table" {
			hasVersions = true
		}
	}
	owners, _ := ownedLayouts()
	for _, owner := range owners {
		have := 0
		if hasVersions {
			var err error
			if have, err = ownedVersion(ctx, conn{q, sqliteDialect}, owner); err != nil {
				return v, err
			}
		}
		v.owners[owner] = have
	}
	return v, nil
}

// retiredSearchIndex is the trigram index that layout 4 created as built before the
// search index of layout 10 (files made by 11f92f6 hold it), kept by triggers that
// wrote it with every instance write. Layout 10 drops it. A file below layout 10 may
// hold it, with exactly this SQL.
const retiredSearchIndex = `
CREATE VIRTUAL TABLE instances_search USING fts5(keyname, displayname, data,
	content='instances', content_rowid='id', tokenize='trigram');
CREATE TRIGGER instances_search_insert AFTER INSERT ON instances BEGIN
	INSERT INTO instances_search(rowid, keyname, displayname, data)
		VALUES(NEW.id, NEW.keyname, NEW.displayname, NEW.data);
END;
CREATE TRIGGER instances_search_delete AFTER DELETE ON instances BEGIN
	INSERT INTO instances_search(instances_search, rowid, keyname, displayname, data)
		VALUES('delete', OLD.id, OLD.keyname, OLD.displayname, OLD.data);
END;
CREATE TRIGGER instances_search_update AFTER UPDATE OF keyname, displayname, data ON instances BEGIN
	INSERT INTO instances_search(instances_search, rowid, keyname, displayname, data)
		VALUES('delete', OLD.id, OLD.keyname, OLD.displayname, OLD.data);
	INSERT INTO instances_search(rowid, keyname, displayname, data)
		VALUES(NEW.id, NEW.keyname, NEW.displayname, NEW.data);
END;
`

// retiredFrom and retiredUntil are the layout versions a file may hold
// retiredSearchIndex at: from layout 4, which created it, until layout 10 drops it.
const retiredFrom, retiredUntil = 4, 10

// reference is what a file at one layout version holds: every object in want, and
// any of optional (with exactly its SQL).
type reference struct {
	want, optional []SchemaObject
}

// references caches the reference per layout version (String of it).
var references sync.Map

// referenceSchema is the list of schema objects the layout creates at version v,
// built once per process in an in-memory database by the same steps, in the order
// migrateLayout runs them (owners first).
func referenceSchema(ctx context.Context, v layoutVersion) (*reference, error) {
	key := v.String()
	if ref, ok := references.Load(key); ok {
		return ref.(*reference), nil
	}
	if v.store > len(sqliteLayout) {
		return nil, fmt.Errorf("table layout version %d is newer than this program knows (%d)", v.store, len(sqliteLayout))
	}
	mem, err := sql.Open("sqlite", "file:reference?mode=memory")
	if err != nil {
		return nil, fmt.Errorf("reference layout: %w", err)
	}
	defer mem.Close()
	mem.SetMaxOpenConns(1)
	run := func(what, q string) error {
		if _, err := mem.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("reference layout: %s: %w", what, err)
		}
		return nil
	}
	owners, steps := ownedLayouts()
	for _, owner := range owners {
		have := v.owners[owner]
		if have > len(steps[owner]) {
			return nil, fmt.Errorf("table layout version %d of %s is newer than this program knows (%d)", have, owner, len(steps[owner]))
		}
		if have == 0 && v.store > 0 {
			have = legacyOwned[owner]
		} else if have > 0 {
			if err := run("layout_versions", layoutVersionsTable); err != nil {
				return nil, err
			}
		}
		for i := 0; i < have; i++ {
			if err := run(fmt.Sprintf("layout %d of %s", i+1, owner), steps[owner][i]); err != nil {
				return nil, err
			}
		}
	}
	for i := 0; i < v.store; i++ {
		if err := run(fmt.Sprintf("layout %d", i+1), sqliteLayout[i]); err != nil {
			return nil, err
		}
	}
	ref := &reference{}
	if ref.want, err = schemaObjects(ctx, mem); err != nil {
		return nil, fmt.Errorf("reference layout: %w", err)
	}
	if v.store >= retiredFrom && v.store < retiredUntil {
		if err := run("retired search index", retiredSearchIndex); err != nil {
			return nil, err
		}
		all, err := schemaObjects(ctx, mem)
		if err != nil {
			return nil, fmt.Errorf("reference layout: %w", err)
		}
		ref.optional = newObjects(ref.want, all)
	}
	references.Store(key, ref)
	return ref, nil
}

// newObjects returns the objects of after whose name is not in before.
func newObjects(before, after []SchemaObject) []SchemaObject {
	had := make(map[string]bool, len(before))
	for _, o := range before {
		had[o.Name] = true
	}
	var added []SchemaObject
	for _, o := range after {
		if !had[o.Name] {
			added = append(added, o)
		}
	}
	return added
}

// compareSchema returns the differences between the file's objects and the
// reference's, nil when there are none.
func compareSchema(v layoutVersion, have []SchemaObject, r *reference) *SchemaError {
	want := r.want
	ref := make(map[string]SchemaObject, len(want))
	for _, o := range want {
		ref[o.Name] = o
	}
	optional := make(map[string]SchemaObject, len(r.optional))
	for _, o := range r.optional {
		optional[o.Name] = o
	}
	e := &SchemaError{Layout: v.String()}
	seen := map[string]bool{}
	for _, o := range have {
		seen[o.Name] = true
		w, ok := ref[o.Name]
		switch {
		case ok && w == o:
		case ok:
			e.Changed = append(e.Changed, o)
			if o.Type == "table" || w.Type == "table" || w.SQL == "" {
				e.tables = o.Type + " " + o.Name
			}
		case optional[o.Name] == o:
		case o.Type == "table" && sqliteOwn[o.Name] != "" && o.SQL == sqliteOwn[o.Name]:
		default:
			e.Unexpected = append(e.Unexpected, o)
			// Never dropped: an unexpected table may hold the data (a file whose
			// layout version was lowered makes every table unexpected). An index
			// SQLite made (no SQL) belongs to a table's constraints.
			if (o.Type == "table" || o.SQL == "") && e.tables == "" {
				e.tables = o.Type + " " + o.Name
			}
		}
	}
	for _, o := range want {
		if !seen[o.Name] {
			e.Missing = append(e.Missing, o)
			if o.Type == "table" || o.SQL == "" {
				e.tables = o.Type + " " + o.Name
			}
		}
	}
	if len(e.Unexpected)+len(e.Changed)+len(e.Missing) == 0 {
		return nil
	}
	return e
}

// checkSchema compares the file's schema objects with the layout at the file's own
// version; it writes nothing.
func checkSchema(ctx context.Context, pool *sql.DB) error {
	v, have, err := readSchema(ctx, pool)
	if err != nil {
		return err
	}
	ref, err := referenceSchema(ctx, v)
	if err != nil {
		return err
	}
	e := compareSchema(v, have, ref)
	if e == nil {
		return nil
	}
	latest, err := referenceSchema(ctx, latestVersion())
	if err != nil {
		return err
	}
	later := map[string]bool{}
	for _, o := range latest.want {
		if o.Type == "table" {
			later[o.Name] = true
		}
	}
	for _, o := range e.Unexpected {
		if o.Type == "table" && later[o.Name] {
			e.later = append(e.later, o.Name)
		}
	}
	return e
}

// latestVersion is the layout version this program migrates a file to.
func latestVersion() layoutVersion {
	owners, steps := ownedLayouts()
	v := layoutVersion{store: len(sqliteLayout), owners: map[string]int{}}
	for _, o := range owners {
		v.owners[o] = len(steps[o])
	}
	return v
}

// CheckFileSchema compares the schema objects of the SQLite file at path (one no
// process has open: a backup's copy before restore swaps it in) with those the
// service's layout creates at the file's own layout version, as every open does. It
// returns a *SchemaError when they differ.
//
// With repair, it first changes the file so that it passes, in one transaction: it
// drops the triggers, views and indexes the layout does not create, and drops and
// re-creates, as the layout writes them, those that differ or are missing. Tables are
// never dropped nor replaced (their rows are the data): a table the layout does not
// create, or that differs or is missing, makes the file unrepairable, with or without
// repair the file is left unchanged and the error says so. (Which tables are
// unexpected depends on the layout version the file claims: a file whose version was
// lowered would otherwise lose every table.) It returns a line for each change.
func CheckFileSchema(ctx context.Context, path string, repair bool) ([]string, error) {
	mode := "mode=ro"
	if repair {
		mode = "mode=rw"
	}
	pool, err := sql.Open("sqlite", fileDSN(path, mode+"&_pragma=busy_timeout(15000)"))
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	pool.SetMaxOpenConns(1)
	err = checkSchema(ctx, pool)
	var e *SchemaError
	if !errors.As(err, &e) {
		return nil, err
	}
	if !e.Repairable() {
		return nil, fmt.Errorf("%w (%s cannot be repaired: tables are never dropped or replaced, even by restore --force, "+
			"their rows are the data; restore another backup)", e, e.tables)
	}
	if !repair {
		return nil, err
	}
	v, _, err := readSchema(ctx, pool)
	if err != nil {
		return nil, err
	}
	r, err := referenceSchema(ctx, v)
	if err != nil {
		return nil, err
	}
	ref := map[string]SchemaObject{}
	for _, o := range r.want {
		ref[o.Name] = o
	}
	tx, err := pool.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("repair schema: %w", err)
	}
	defer tx.Rollback()
	var done []string
	// Triggers first, then views, then indexes (Repairable: no table is unexpected).
	rank := map[string]int{"trigger": 0, "view": 1, "index": 2}
	drop := append([]SchemaObject(nil), e.Unexpected...)
	sort.SliceStable(drop, func(i, j int) bool { return rank[drop[i].Type] < rank[drop[j].Type] })
	for _, o := range drop {
		if err := dropObject(ctx, tx, o); err != nil {
			return nil, err
		}
		done = append(done, "dropped "+o.String())
	}
	for _, o := range e.Changed {
		if err := dropObject(ctx, tx, o); err != nil {
			return nil, err
		}
		w := ref[o.Name]
		if _, err := tx.ExecContext(ctx, w.SQL); err != nil {
			return nil, fmt.Errorf("repair schema: re-create %s %s: %w", w.Type, w.Name, err)
		}
		done = append(done, "replaced "+o.String()+" by the layout's "+w.Type+" "+w.Name)
	}
	for _, o := range e.Missing {
		if _, err := tx.ExecContext(ctx, o.SQL); err != nil {
			return nil, fmt.Errorf("repair schema: create %s %s: %w", o.Type, o.Name, err)
		}
		done = append(done, "created the layout's missing "+o.Type+" "+o.Name)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("repair schema: %w", err)
	}
	if err := checkSchema(ctx, pool); err != nil {
		return done, fmt.Errorf("after repair: %w", err)
	}
	return done, nil
}

// dropObject drops the trigger, view or index o if it still exists; never a table.
func dropObject(ctx context.Context, tx *sql.Tx, o SchemaObject) error {
	kind := strings.ToUpper(o.Type)
	switch o.Type {
	case "index", "trigger", "view":
	default:
		return fmt.Errorf("repair schema: %s %s: only triggers, views and indexes are dropped", o.Type, o.Name)
	}
	q := fmt.Sprintf(`DROP %s IF EXISTS "%s"`, kind, strings.ReplaceAll(o.Name, `"`, `""`))
	if _, err := tx.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("repair schema: drop %s %s: %w", o.Type, o.Name, err)
	}
	return nil
}
