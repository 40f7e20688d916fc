package store_test

import (
	"dataservice/internal/testkit"
	"dataservice/store"
)

// loadFloorSQL is the SQL of BenchmarkLoadScale's floor on the pass's engine: the
// statements a write transaction starts with, the INSERT of an instance, the INSERT
// of its revision, the statements it ends with before COMMIT, and the is_enabled
// value passed. SQLite: BEGIN IMMEDIATE takes the writer (the floor pool's _txlock),
// the instance takes the next rowid, and the search index is re-indexed before the
// commit as a store transaction does. PostgreSQL: the product's advisory writer lock
// and its INSERT under the next id (store.PostgresFloorSQL); the engine maintains the
// pg_trgm index in every write, as it does for the product; plain pgx passes the
// integer flag as an integer (the store's pool turns Go bools into 0/1).
func loadFloorSQL() (begin []string, insert, revision string, end []string, enabled any) {
	if !testkit.Postgres() {
		return nil, `INSERT INTO instances(classname, keyname, displayname, is_enabled, data, created_at, updated_at)
	VALUES(?, ?, ?, ?, ?, ?, ?)`, `INSERT INTO revisions(classname, keyname, action, before, after, author, created_at)
		VALUES(?, ?, ?, ?, ?, ?, ?)`, testkit.FloorReindex, true
	}
	lock, ins := store.PostgresFloorSQL()
	return []string{lock}, ins, `INSERT INTO revisions(classname, keyname, action, before, after, author, created_at)
		VALUES($1, $2, $3, $4, $5, $6, $7)`, nil, 1
}
