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

// FloorLoadSQL is the SQL of a load's floor (plain database/sql on OpenFloorDB, rows
// inserted in transactions) on the pass's engine: the statements a write transaction
// starts with, the INSERT of an instance and of its revision (args, each: classname,
// keyname, displayname, is_enabled, data, created_at, updated_at; classname, keyname,
// action, before, after, author, created_at), and the is_enabled value to pass.
type FloorLoadSQL struct {
	Begin              []string
	Instance, Revision string
	Enabled            any
}

// FloorLoad is the load floor's SQL. SQLite: BEGIN IMMEDIATE takes the writer (the
// floor pool's _txlock) and the instance takes the next rowid; the layout's triggers
// list it for the search index, whose catch-up runs outside the write as the
// product's does.
// PostgreSQL: the product's advisory writer lock and its INSERT under the next id
// (store.PostgresFloorSQL); the engine maintains the pg_trgm index in every write, as
// it does for the product; plain pgx passes the integer flag as an integer (the
// store's pool turns Go bools into 0/1).
func FloorLoad() FloorLoadSQL {
	if !Postgres() {
		return FloorLoadSQL{
			Instance: `INSERT INTO instances(classname, keyname, displayname, is_enabled, data, created_at, updated_at)
	VALUES(?, ?, ?, ?, ?, ?, ?)`,
			Revision: `INSERT INTO revisions(classname, keyname, action, before, after, author, created_at)
		VALUES(?, ?, ?, ?, ?, ?, ?)`,
			Enabled: true,
		}
	}
	lock, ins := store.PostgresFloorSQL()
	return FloorLoadSQL{
		Begin:    []string{lock},
		Instance: ins,
		Revision: `INSERT INTO revisions(classname, keyname, action, before, after, author, created_at)
		VALUES($1, $2, $3, $4, $5, $6, $7)`,
		Enabled: 1,
	}
}
