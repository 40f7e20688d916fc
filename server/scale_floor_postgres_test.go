package server_test

import "dataservice/store"

// postgresScaleFloor is BenchmarkScale's floor on PostgreSQL: plain pgx (database/sql)
// and the product's statements as PostgreSQL runs them. The search is the dialect's:
// the pg_trgm index narrows by the ASCII-folded pattern over keyname, displayname and
// data (the index's expression), the same LIKE tests decide, in id order. The check
// that nothing awaits indexing is the dialect's constant one (the engine maintains the
// index), run as the product runs it.
func postgresScaleFloor(addr, cols string) scaleFloorSQL {
	where, like := store.PostgresSearchFloorSQL()
	return scaleFloorSQL{
		driver: "pgx",
		dsn:    readOnlyURL(addr),
		page:   "SELECT " + cols + " FROM instances WHERE classname = $1 AND id > $2 ORDER BY id LIMIT $3 OFFSET $4",
		one:    "SELECT " + cols + " FROM instances WHERE classname = $1 AND keyname = $2",
		search: `SELECT i.id, i.classname, i.keyname, i.displayname, i.is_enabled, i.data, i.created_at, i.updated_at
		FROM instances i WHERE ` + where + `
		AND (` + like("i.keyname", "$3") + " OR " + like("i.displayname", "$4") + " OR " + like("i.data", "$5") + `)
		ORDER BY i.id LIMIT $6`,
		// The index's pattern: the search as a LIKE pattern (digits: nothing to escape
		// or fold).
		match: func(v string) string { return "%" + v + "%" },
	}
}
