package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// Table is the door of a package that owns a table of its own (the task queue owns
// tasks): it runs that package's statements, written with `?` placeholders like the
// store's, through the dialect, inside a store transaction or on the read pool. A
// statement that writes anything but the owner's table is refused, so instances,
// schemas, permissions and revisions stay written through Apply alone. RegisterLayout
// hands out the one Table of each owner, named like the owner.
type Table struct {
	name string
}

// Name is the table's name.
func (t *Table) Name() string { return t.name }

// Exec runs a statement writing the table in the write transaction tx.
func (t *Table) Exec(ctx context.Context, tx *Tx, query string, args ...any) (sql.Result, error) {
	if err := t.check(query); err != nil {
		return nil, err
	}
	return tx.execContext(ctx, query, args...)
}

// QueryRow runs a query returning one row (a SELECT, or a write of the table with
// RETURNING) in the transaction tx.
func (t *Table) QueryRow(ctx context.Context, tx *Tx, query string, args ...any) *Row {
	if err := t.check(query); err != nil {
		return &Row{err: err}
	}
	return &Row{row: tx.queryRowContext(ctx, query, args...)}
}

// Read runs a query on the read pool of db (it sees committed rows only).
func (t *Table) Read(ctx context.Context, db *DB, query string, args ...any) (*sql.Rows, error) {
	if err := t.check(query); err != nil {
		return nil, err
	}
	return db.reader().queryContext(ctx, query, args...)
}

// ReadRow runs a query returning one row on the read pool of db.
func (t *Table) ReadRow(ctx context.Context, db *DB, query string, args ...any) *Row {
	if err := t.check(query); err != nil {
		return &Row{err: err}
	}
	return &Row{row: db.reader().queryRowContext(ctx, query, args...)}
}

// JSONValue is the SQL expression of the value at path (a `?` or a quoted literal
// such as '$.kind') in the JSON text of column doc, NULL when missing: the dialect's
// JSON access, for the owner's statements.
func (t *Table) JSONValue(db *DB, doc, path string) string { return db.dia.jsonValue(doc, path) }

// RowOrder is the column giving the table's rows in insertion order (a tie-breaker
// after a timestamp): the dialect's.
func (t *Table) RowOrder(db *DB) string { return db.dia.rowOrder }

// SkipLocked is the clause ending a claim's subquery (SELECT ... LIMIT 1) that picks
// one row to take: on PostgreSQL " FOR UPDATE SKIP LOCKED" (the picked row is locked
// until the claim commits; rows another transaction holds locked are passed over, not
// waited for), on SQLite "" (a write transaction holds the whole file). The
// dialect's.
func (t *Table) SkipLocked(db *DB) string { return db.dia.skipLocked }

// Row is one row of a table owner's query: database/sql's, or the door's refusal.
type Row struct {
	row *sql.Row
	err error
}

// Scan copies the row's columns into dest (sql.ErrNoRows when there is no row).
func (r *Row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	return r.row.Scan(dest...)
}

// check refuses a statement that writes anything but the table: one statement, a
// SELECT, or an INSERT INTO, UPDATE or DELETE FROM naming the table.
func (t *Table) check(query string) error {
	q := strings.TrimSpace(query)
	if strings.Contains(strings.TrimSuffix(q, ";"), ";") {
		return fmt.Errorf("table %s: one statement at a time", t.name)
	}
	words := strings.Fields(strings.ToUpper(q))
	target := ""
	switch {
	case len(words) >= 1 && words[0] == "SELECT":
		return nil
	case len(words) >= 3 && words[0] == "INSERT" && words[1] == "INTO",
		len(words) >= 3 && words[0] == "DELETE" && words[1] == "FROM":
		target = words[2]
	case len(words) >= 2 && words[0] == "UPDATE":
		target = words[1]
	}
	if name, _, _ := strings.Cut(target, "("); !strings.EqualFold(name, t.name) {
		return fmt.Errorf("table %s: statement refused: a table owner writes its own table only (%.40q)", t.name, q)
	}
	return nil
}
