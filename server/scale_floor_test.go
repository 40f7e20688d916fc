package server_test

import (
	"net/url"
	"strings"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// scaleFloorSQL is what BenchmarkScale's floor runs on the pass's engine: its read-only
// pool's driver and connection string, and the statements the product runs for each
// request, as the product sends them.
type scaleFloorSQL struct {
	driver, dsn string
	// page is a page of rows (args: class, after, limit, offset); one is one instance
	// (class, keyname); dirty counts the rows awaiting indexing (arg: the bound), run
	// before a search ("" where the engine maintains its index); search is the indexed search (args: match(v), class, then the LIKE
	// pattern three times, limit).
	page, one, dirty, search string
	match                    func(v string) string
}

// scaleFloor is the floor's SQL for the database at addr: SQLite's on a file, the
// PostgreSQL dialect's (placeholders $N) on the PostgreSQL pass.
func scaleFloor(addr string) scaleFloorSQL {
	const cols = "id, classname, keyname, displayname, is_enabled, data, created_at, updated_at"
	if testkit.Postgres() {
		return postgresScaleFloor(addr, cols)
	}
	return scaleFloorSQL{
		driver: "sqlite",
		dsn:    "file:" + addr + "?mode=ro&_pragma=busy_timeout(15000)&_pragma=query_only(1)",
		page:   "SELECT " + cols + " FROM instances WHERE classname = ? AND id > ? ORDER BY id LIMIT ? OFFSET ?",
		one:    "SELECT " + cols + " FROM instances WHERE classname = ? AND keyname = ?",
		dirty:  store.SearchBacklogCheck,
		// The product's search query: the index's candidates joined to their rows in id
		// order, LIKE deciding (after the same count of the rows awaiting indexing).
		search: `SELECT i.id, i.classname, i.keyname, i.displayname, i.is_enabled, i.data, i.created_at, i.updated_at
		FROM instances_search CROSS JOIN instances i WHERE instances_search MATCH ? AND i.id = instances_search.rowid
		AND i.classname = ? AND (i.keyname LIKE ? ESCAPE '\' OR i.displayname LIKE ? ESCAPE '\' OR i.data LIKE ? ESCAPE '\')
		ORDER BY instances_search.rowid LIMIT ?`,
		// The FTS5 query: every trigram of the digits.
		match: func(v string) string {
			var match []string
			for i := 0; i+3 <= len(v); i++ {
				match = append(match, `"`+v[i:i+3]+`"`)
			}
			return strings.Join(match, " AND ")
		},
	}
}

// readOnlyURL is the PostgreSQL URL addr whose sessions are read-only, as the store's
// read pool is.
func readOnlyURL(addr string) string {
	u, err := url.Parse(addr)
	if err != nil {
		return addr
	}
	q := u.Query()
	q.Set("default_transaction_read_only", "on")
	u.RawQuery = q.Encode()
	return u.String()
}
