package store

// PostgresFloorSQL is the SQL a PostgreSQL floor shares with the product, as the
// product sends it (placeholders $N): the writer lock every write transaction takes
// first, and the INSERT of a new instance under a new id (args: classname, keyname,
// displayname, is_enabled, data, created_at, updated_at). Benchmarks' floors take the
// product's text from here, so they stay the same SQL when it changes.
func PostgresFloorSQL() (lockWriter, insertInstance string) {
	return postgresDialect.lockWriter, postgresRebind(postgresDialect.insertInstance)
}
