package store

// PostgresFloorSQL is the SQL a benchmark's floor on PostgreSQL shares with the
// product, as PostgreSQL receives it (placeholders $N): the writer lock every write
// transaction takes first, and the INSERT of a new instance under a new id (args:
// classname, keyname, displayname, is_enabled, data, created_at, updated_at). Floors
// take the product's text from here, as SQLite's take SearchDirtyCheck and
// SearchReindex, so they stay the same SQL when it changes.
func PostgresFloorSQL() (lockWriter, insertInstance string) {
	return postgresDialect.lockWriter, postgresRebind(postgresDialect.insertInstance)
}

// PostgresSearchFloorSQL is the search's condition as PostgreSQL receives it: the
// index's narrowing (args $1 the index's pattern, $2 the classname) and the exact
// per-column test, like(col, placeholder), that the product ANDs after it.
func PostgresSearchFloorSQL() (where string, like func(col, arg string) string) {
	return postgresRebind(postgresDialect.searchWhere), postgresDialect.like
}
