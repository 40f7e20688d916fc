package store_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
)

// TestMain removes the kit's template databases after the run.
func TestMain(m *testing.M) {
	code := m.Run()
	testkit.Cleanup()
	os.Exit(code)
}

// The shared helpers of the test kit, under the names these tests use.
var (
	// fixedNow is the clock of every test database.
	fixedNow = testkit.Now
	// newTestDB opens a fresh database file in t.TempDir() with the built-in
	// definitions loaded as bootstrap loads them.
	newTestDB = testkit.NewBuiltinDB
	parse     = testkit.Parse
	load      = testkit.Load
	mustLoad  = testkit.MustLoad
	instance  = testkit.Instance
	queryInt  = testkit.QueryInt
	// queryString reads one text value (NULL reads as "<null>").
	queryString = testkit.QueryString
	// exec runs a raw statement in a write transaction (to set up states loads cannot).
	exec = testkit.Exec
)

// openEmptyDB opens a fresh database file without any definitions.
func openEmptyDB(tb testing.TB) *store.DB {
	tb.Helper()
	return testkit.OpenEmpty(tb, testkit.Options{})
}

// counts renders the outcome counters of a result, for comparisons.
func counts(r *store.LoadResult) string {
	return fmt.Sprintf("created=%d updated=%d unchanged=%d deleted=%d enabled=%d disabled=%d skipped=%d errors=%d",
		r.Created, r.Updated, r.Unchanged, r.Deleted, r.Enabled, r.Disabled, r.Skipped, r.Errors)
}

// messages joins the per-entry error messages of a result.
func messages(r *store.LoadResult) string {
	var parts []string
	for _, m := range r.Messages {
		parts = append(parts, m.String())
	}
	return strings.Join(parts, "\n")
}

// absent fails the test when the instance exists.
func absent(tb testing.TB, db *store.DB, cls, key string) {
	tb.Helper()
	_, err := db.Instance(context.Background(), cls, key)
	if got, want := store.ErrorCode(err), model.ENotFound; got != want {
		tb.Fatalf("read %s %s: error code %q (%v), want %q", cls, key, got, err, want)
	}
}

// userAuth is a user context holding exactly perms.
func userAuth(perms ...string) *model.Auth {
	return &model.Auth{Kind: "user", Name: "tester", User: "tester", Perms: perms}
}

// fmtValue renders a stored value with its Go type, so 1 and "1" differ.
func fmtValue(v any) string { return fmt.Sprintf("%T(%v)", v, v) }

// serverSchema is a user schema used by many tests.
const serverSchema = `
- classname: _schema
  keyname: site
  displayname: Sites
  city: {dataformat: string}
- classname: _schema
  keyname: server
  displayname: Servers
  hostname: {dataformat: string}
  port: {dataformat: int, dataformat_ext: gte_1 lte_65535}
  mgmt_ip: {dataformat: ipv4}
  tags: {dataformat: string, cardinal_max: 0}
  site: {dataformat: schema, dataformat_ext: site}
  site_city: {dataformat: external, dataformat_ext: site city}
`

// layout10Triggers are the search index's triggers as layout step 10 made them.
var layout10Triggers = []string{
	`CREATE TRIGGER instances_search_insert AFTER INSERT ON instances BEGIN
	INSERT INTO instances_search_dirty(id) VALUES(NEW.id) ON CONFLICT(id) DO NOTHING;
END`,
	`CREATE TRIGGER instances_search_delete AFTER DELETE ON instances BEGIN
	INSERT INTO instances_search_dirty(id) VALUES(OLD.id) ON CONFLICT(id) DO NOTHING;
END`,
	`CREATE TRIGGER instances_search_update AFTER UPDATE OF id, keyname, displayname, data ON instances
	WHEN OLD.id IS NOT NEW.id OR OLD.keyname IS NOT NEW.keyname OR OLD.displayname IS NOT NEW.displayname
		OR OLD.data IS NOT NEW.data BEGIN
	INSERT INTO instances_search_dirty(id) VALUES(OLD.id) ON CONFLICT(id) DO NOTHING;
	INSERT INTO instances_search_dirty(id) VALUES(NEW.id) ON CONFLICT(id) DO NOTHING;
END`,
}

// layout16Update is the search index's update trigger as layout step 16 made it.
const layout16Update = `CREATE TRIGGER instances_search_update AFTER UPDATE OF id, keyname, displayname, data ON instances
	WHEN OLD.id IS NOT NEW.id OR OLD.keyname IS NOT NEW.keyname OR OLD.displayname IS NOT NEW.displayname
		OR OLD.data IS NOT NEW.data BEGIN
	INSERT INTO instances_search_dirty(id, listed_at) VALUES(OLD.id, CAST(unixepoch('subsec') * 1000 AS INTEGER)) ON CONFLICT(id) DO NOTHING;
	INSERT INTO instances_search_dirty(id, listed_at) VALUES(NEW.id, CAST(unixepoch('subsec') * 1000 AS INTEGER)) ON CONFLICT(id) DO NOTHING;
END`

// layout19Update is the update trigger of layout step 19, which step 20 dropped.
const layout19Update = `CREATE TRIGGER instances_search_update AFTER UPDATE OF id, keyname, displayname, data ON instances
	WHEN OLD.id IS NOT NEW.id OR OLD.keyname IS NOT NEW.keyname OR OLD.displayname IS NOT NEW.displayname
		OR OLD.data IS NOT NEW.data BEGIN
	INSERT INTO instances_search_dirty(id) VALUES(NEW.id) ON CONFLICT(id) DO UPDATE
		SET staged = 2 WHERE staged = 1;
END`

// layout17Triggers are the search index's triggers as layout steps 16 and 17 left them.
var layout17Triggers = []string{
	`CREATE TRIGGER instances_search_insert AFTER INSERT ON instances BEGIN
	INSERT INTO instances_search_dirty(id, listed_at) VALUES(NEW.id, CAST(unixepoch('subsec') * 1000 AS INTEGER)) ON CONFLICT(id) DO NOTHING;
END`,
	`CREATE TRIGGER instances_search_delete AFTER DELETE ON instances BEGIN
	INSERT INTO instances_search_dirty(id, listed_at) VALUES(OLD.id, CAST(unixepoch('subsec') * 1000 AS INTEGER)) ON CONFLICT(id) DO NOTHING;
END`,
	`CREATE TRIGGER instances_search_update AFTER UPDATE OF id, keyname, displayname, data ON instances
	WHEN OLD.id IS NOT NEW.id OR OLD.keyname IS NOT NEW.keyname OR OLD.displayname IS NOT NEW.displayname
		OR OLD.data IS NOT NEW.data BEGIN
	INSERT INTO instances_search_dirty(id, listed_at) VALUES(NEW.id, CAST(unixepoch('subsec') * 1000 AS INTEGER)) ON CONFLICT(id) DO NOTHING;
	INSERT INTO instances_search_dirty(id, listed_at) SELECT OLD.id, CAST(unixepoch('subsec') * 1000 AS INTEGER)
		WHERE OLD.id IS NOT NEW.id ON CONFLICT(id) DO NOTHING;
END`,
}

// layoutsAfter are the statements that set a file made by this program back to its
// shape at layout version v (3 to 10): they drop what the later layout steps created,
// and set the version. Data the later steps wrote (rows, not objects) is left.
func layoutsAfter(v int) []string {
	drops := map[int][]string{
		4:  {"DROP TRIGGER instances_count_insert", "DROP TRIGGER instances_count_delete", "DROP TRIGGER instances_count_move", "DROP TABLE instance_counts"},
		5:  {"DROP TRIGGER configuration_insert", "DROP TRIGGER configuration_update", "DROP TRIGGER configuration_delete"},
		6:  {"DROP TRIGGER instances_id_high", "DROP TRIGGER instances_id_fresh", "DROP TABLE instance_ids"},
		8:  {"DROP TRIGGER ipam_blocks_insert", "DROP TRIGGER ipam_blocks_delete", "DROP TRIGGER ipam_blocks_move", "DROP TABLE ipam_blocks"},
		9:  {"DROP INDEX revisions_class"},
		10: {"DROP TRIGGER instances_search_insert", "DROP TRIGGER instances_search_delete", "DROP TRIGGER instances_search_update", "DROP TABLE instances_search_dirty", "DROP TABLE instances_search"},
		11: {"DROP TABLE nodes", "DROP TABLE node_salt"},
		12: {"DROP TABLE throttle"},
		14: {"DROP TABLE events"},
		15: {"DROP INDEX events_due", "DROP INDEX events_next", "DROP INDEX events_lease"},
		16: append([]string{"DROP TRIGGER instances_search_insert", "DROP TRIGGER instances_search_delete",
			"DROP TRIGGER instances_search_update", "ALTER TABLE instances_search_dirty DROP COLUMN listed_at"}, layout10Triggers...),
		17: {"DROP TRIGGER instances_search_update", layout16Update},
		18: {"ALTER TABLE revisions DROP COLUMN delta"},
		19: append([]string{"DROP TRIGGER instances_search_move", "DROP TRIGGER instances_search_insert",
			"DROP TRIGGER instances_search_delete", "DROP TRIGGER instances_search_update",
			"ALTER TABLE instances_search_dirty DROP COLUMN staged", "DROP TABLE instances_search_staged",
			"ALTER TABLE instances_search_dirty ADD COLUMN listed_at INTEGER NOT NULL DEFAULT 0"}, layout17Triggers...),
		20: {layout19Update},
	}
	var stmts []string
	for step := 20; step > v; step-- { // the last layout step
		stmts = append(stmts, drops[step]...)
	}
	return append(stmts, fmt.Sprintf("PRAGMA user_version = %d", v))
}
