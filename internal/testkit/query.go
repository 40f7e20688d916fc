package testkit

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"dataservice/store"
	"dataservice/store/codec"
)

// Querier is what the query helpers read through: a *store.DB (its read pool), or
// Pool(r) for a read-only *sql.DB opened beside a running process.
type Querier interface {
	Reader() store.Reader
}

// Pool makes a plain read pool (a *sql.DB) a Querier.
func Pool(r store.Reader) Querier { return pool{r} }

type pool struct{ r store.Reader }

func (p pool) Reader() store.Reader { return p.r }

// QueryInt runs a query returning one integer.
func QueryInt(tb testing.TB, q Querier, query string, args ...any) int {
	tb.Helper()
	var n int
	if err := q.Reader().QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
	return n
}

// QueryString runs a query returning one text value (NULL reads as "<null>").
func QueryString(tb testing.TB, q Querier, query string, args ...any) string {
	tb.Helper()
	var s sql.NullString
	if err := q.Reader().QueryRowContext(context.Background(), query, args...).Scan(&s); err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
	if !s.Valid {
		return "<null>"
	}
	return s.String
}

// Rows runs a query and returns its column names and every row, text columns as
// strings.
func Rows(tb testing.TB, q Querier, query string, args ...any) (cols []string, rows [][]any) {
	tb.Helper()
	rs, err := q.Reader().QueryContext(context.Background(), query, args...)
	if err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
	defer rs.Close()
	cols, err = rs.Columns()
	if err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
	for rs.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			tb.Fatalf("%s: %v", query, err)
		}
		for i, v := range vals {
			if b, ok := v.([]byte); ok {
				vals[i] = string(b)
			}
		}
		rows = append(rows, vals)
	}
	if err := rs.Err(); err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
	return cols, rows
}

// Exec runs one statement in a write transaction (to set up states loads cannot):
// the migration door's raw statement, the only one the store offers.
func Exec(tb testing.TB, db *store.DB, query string, args ...any) {
	tb.Helper()
	ctx := context.Background()
	err := Migrator(tb, db).Migrate(ctx, func(m *store.Migration) error { return m.Exec(ctx, query, args...) })
	if err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
}

// ExecAll runs statements in one write transaction.
func ExecAll(tb testing.TB, db *store.DB, stmts ...string) {
	tb.Helper()
	ctx := context.Background()
	err := Migrator(tb, db).Migrate(ctx, func(m *store.Migration) error {
		for _, q := range stmts {
			if err := m.Exec(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// ExecFile runs statements on the database at path (a file, or a PostgreSQL URL)
// through a plain database/sql connection, outside the store (as an older release or
// another tool would leave it): a file must not be open in the store meanwhile.
func ExecFile(tb testing.TB, path string, stmts ...string) {
	tb.Helper()
	driver := "sqlite"
	if !store.IsFileAddr(path) {
		driver = "pgx"
	}
	sdb, err := sql.Open(driver, path)
	if err != nil {
		tb.Fatal(err)
	}
	defer sdb.Close()
	for _, q := range stmts {
		if _, err := sdb.Exec(q); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
}

// NextInstanceIDSQL is, in a test's INSERT INTO instances on either engine, the id the
// store would give a new instance: above every id ever given out (the high-water mark
// of deleted ids, and every id in the table). PostgreSQL's instances take no id by
// themselves, as SQLite's rowid does.
const NextInstanceIDSQL = `(SELECT max(x) + 1 FROM (SELECT high AS x FROM instance_ids UNION ALL SELECT max(id) FROM instances) ids)`

// Row is an instance tests insert by SQL.
type Row struct {
	Keyname     string
	Displayname string
	Enabled     bool
	Data        map[string]any
}

// InsertInstances inserts instances of cls by SQL in one transaction, stamped
// OldTime: much faster than a load, and it bypasses validation.
func InsertInstances(tb testing.TB, db *store.DB, cls string, rows []Row) {
	tb.Helper()
	ctx := context.Background()
	const insert = `INSERT INTO instances(id, classname, keyname, displayname, is_enabled, data,
			created_at, updated_at) VALUES(` + NextInstanceIDSQL + `, ?, ?, ?, ?, ?, ?, ?)`
	err := Migrator(tb, db).Migrate(ctx, func(m *store.Migration) error {
		for _, r := range rows {
			data, err := json.Marshal(r.Data)
			if err != nil {
				return err
			}
			if err := m.Exec(ctx, insert, cls, r.Keyname, r.Displayname, r.Enabled, string(data), OldTime, OldTime); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("insert %s rows: %v", cls, err)
	}
}

// Instance reads an instance or fails the test.
func Instance(tb testing.TB, db *store.DB, cls, key string) *store.Instance {
	tb.Helper()
	in, err := db.Instance(context.Background(), cls, key)
	if err != nil {
		tb.Fatalf("read %s %s: %v", cls, key, err)
	}
	return in
}

// Rename renames the instance cls/from to to as a user does (a cascading rename), in
// one transaction committed when it succeeds; author, when not empty, signs the
// revisions.
func Rename(tb testing.TB, db *store.DB, author, cls, from, to string) (*store.RenameReport, error) {
	tb.Helper()
	var rep *store.RenameReport
	ctx := context.Background()
	mg := Migrator(tb, db)
	err := db.WithTxAs(ctx, store.Revisions{Author: author}, func(tx *store.Tx) error {
		s, err := tx.Schema(ctx, cls)
		if err != nil {
			return err
		}
		in, err := tx.Instance(ctx, cls, from)
		if err != nil {
			return err
		}
		rep, err = mg.Rename(ctx, tx, s, in, to)
		return err
	})
	return rep, err
}

// WideCSV is a CSV (delimiter ;) of keynames wide0, wide1, … and empty cells, with
// one cell more than codec.CSVMaxCells (rows × columns): the smallest body that passes
// the cell bound for its width.
func WideCSV() string {
	const cols = 2001
	var sb strings.Builder
	sb.WriteString("keyname")
	for i := 1; i < cols; i++ {
		fmt.Fprintf(&sb, ";c%d", i)
	}
	sb.WriteString("\n")
	for i := 0; i < codec.CSVMaxCells/cols+1; i++ {
		fmt.Fprintf(&sb, "wide%d%s\n", i, strings.Repeat(";", cols-1))
	}
	return sb.String()
}
