package testkit

import (
	"testing"

	"dataservice/store"
)

// Benchmarks that work on a large database build it once per test binary and give
// each iteration its own copy: Template and FromTemplate are the kit's template
// mechanism (a file copied on SQLite, CREATE DATABASE … TEMPLATE on PostgreSQL).

// Template returns the address of the template database named key, made by fill on a
// new database the first time it is asked for (with the real clock; fill may use
// Migrator and Bootstrap on it). Cleanup removes it at the end of the test binary.
func Template(key string, fill func(db *store.DB) error) (string, error) {
	return templateOf(key, fill)
}

// FromTemplate is the address of a new database made from the template src
// (Template): a copy of its file in tb.TempDir() on SQLite, a new database of the
// test cluster made by CREATE DATABASE … TEMPLATE on PostgreSQL, dropped when the
// test ends. No connection to src may be open.
func FromTemplate(tb testing.TB, src string) string {
	tb.Helper()
	return fromTemplate(tb, src, tb.TempDir(), 0o600)
}

// NextInstanceID is the id the next new instance of db takes: above every id ever
// given out (the layout's instance_ids). Benchmarks that insert many rows by SQL give
// them ids from it on both engines (PostgreSQL's instances.id has no default).
func NextInstanceID(tb testing.TB, db *store.DB) int64 {
	tb.Helper()
	return int64(QueryInt(tb, db, "SELECT "+NextInstanceIDSQL))
}

// DropSearchIndex stops db's search index from being kept, so writes cost what they
// cost without it (for benchmarks measuring its write cost; searches then read rows):
// on SQLite it drops the triggers that list the rows to re-index and stops the store
// listing the rows it updates, on PostgreSQL it drops the pg_trgm index the engine
// maintains in every write.
func DropSearchIndex(tb testing.TB, db *store.DB) {
	tb.Helper()
	if Postgres() {
		ExecAll(tb, db, "DROP INDEX instances_search")
		return
	}
	ExecAll(tb, db, "DROP TRIGGER instances_search_insert", "DROP TRIGGER instances_search_delete",
		"DROP TRIGGER instances_search_move")
	db.UnlistedUpdatesForTest()
}
