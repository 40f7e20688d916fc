package testkit

import (
	"context"
	"database/sql"
	"net/url"
	"path/filepath"
	"testing"

	"dataservice/store"
)

// OpenFloorDB makes a new database file with the product's table layout and opens it
// as plain database/sql with the store's writer pragmas and one connection: the
// connection a benchmark's floor writes through. It is closed when the benchmark ends.
// On the PostgreSQL pass it is a new database of the test cluster with the product's
// layout, opened with plain pgx (database/sql, the "pgx" driver) and one connection:
// its statements take PostgreSQL's $N placeholders.
func OpenFloorDB(tb testing.TB) *sql.DB {
	tb.Helper()
	if Postgres() {
		return openPostgresFloorDB(tb)
	}
	path := filepath.Join(tb.TempDir(), "floor.db")
	layout, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	layout.Close()
	q := url.Values{}
	for _, p := range []string{"busy_timeout(15000)", "foreign_keys(1)", "synchronous(NORMAL)", "journal_mode(WAL)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		tb.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	tb.Cleanup(func() { db.Close() })
	return db
}

// FloorReindex is what a store write transaction runs right before it commits, to keep
// the search index: a floor that writes instances runs it at the end of each
// transaction, so it does the same SQL as the product.
var FloorReindex = append([]string{store.SearchDirtyCheck}, store.SearchReindex...)

// openPostgresFloorDB is OpenFloorDB on the PostgreSQL pass.
func openPostgresFloorDB(tb testing.TB) *sql.DB {
	tb.Helper()
	addr := NewAddress(tb, "floor")
	layout, err := store.Open(context.Background(), addr, store.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	layout.Close()
	db, err := sql.Open("pgx", addr)
	if err != nil {
		tb.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	// Registered after NewAddress's drop, so it runs first.
	tb.Cleanup(func() { db.Close() })
	return db
}
