package bootstrap_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"dataservice/bootstrap"
	"dataservice/builtin"
	"dataservice/internal/testkit"
	"dataservice/store"
)

// The code version the tests start with: the version of the newest migration block.
const (
	testVersion     = "4.9.0"
	testVersionDate = "2026-01-15"
	// oldTime is the created_at/updated_at of rows the tests insert by SQL, so a
	// rewrite by the start-up sequence shows as a changed updated_at.
	oldTime = testkit.OldTime
)

// blocksStarted lists the "block" attribute of every "migration block start" record.
func blocksStarted(r *testkit.Recorder) []string {
	var out []string
	for _, e := range r.Find(slog.LevelInfo, "migration block start") {
		out = append(out, e.Attrs["block"])
	}
	return out
}

// tickingClock is a fixed clock that moves one second at every reading, so any
// write the start-up sequence makes shows in created_at/updated_at.
func tickingClock() func() time.Time {
	return testkit.TickingClock(time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC))
}

// openDB opens (creating) the database at path with the ticking clock; it is
// closed when the test ends.
func openDB(tb testing.TB, path string) *store.DB {
	tb.Helper()
	return testkit.Open(tb, path, testkit.Options{Logger: slog.New(slog.DiscardHandler), Clock: tickingClock(),
		IgnoreCloseError: true})
}

// newDB opens a new, empty database (a file in a fresh temporary directory, or a
// new PostgreSQL database on the kit's PostgreSQL pass).
func newDB(tb testing.TB) *store.DB {
	tb.Helper()
	return openDB(tb, testkit.NewAddress(tb, "data.db"))
}

// options are the start-up options of the tests: the test version, the embedded
// built-in files, no backup, the recorder's logger, and a Sleep that fails the test
// (only a refused start may wait).
func options(t *testing.T, rec *testkit.Recorder) bootstrap.Options {
	return bootstrap.Options{
		Version:     testVersion,
		VersionDate: testVersionDate,
		Init:        builtin.Init(),
		Logger:      rec.Logger(t),
		Sleep: func(ctx context.Context, d time.Duration) {
			t.Errorf("Sleep(%v) called by a start that was not refused", d)
		},
	}
}

// run runs the start-up sequence and fails the test on an error.
func run(t *testing.T, db *store.DB, o bootstrap.Options) {
	t.Helper()
	if err := bootstrap.Run(context.Background(), testkit.Migrator(t, db), o); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// migratedDB is a new database after one start with the test version.
func migratedDB(t *testing.T) (*store.DB, *testkit.Recorder) {
	t.Helper()
	db := newDB(t)
	rec := &testkit.Recorder{}
	run(t, db, options(t, rec))
	rec.Reset()
	return db, rec
}

// execSQL runs statements through one store transaction (how the tests build a
// database in an older shape).
var execSQL = testkit.ExecAll

// setRegistry writes one registry key through a store transaction.
func setRegistry(t *testing.T, db *store.DB, key, value string) {
	t.Helper()
	if err := db.SetRegistry(context.Background(), key, value); err != nil {
		t.Fatalf("set %s: %v", key, err)
	}
}

// insertPermission adds a built-in permission row, as an older release had it.
func insertPermission(t *testing.T, db *store.DB, key string) {
	t.Helper()
	testkit.Exec(t, db, "INSERT INTO permissions(keyname, displayname, description, is_builtin) VALUES(?, ?, '', 1)", key, key)
}

// insertInstance adds an instance row directly, bypassing validation, stamped oldTime.
func insertInstance(t *testing.T, db *store.DB, cls, key string, data map[string]any) {
	t.Helper()
	testkit.InsertInstances(t, db, cls, []testkit.Row{{Keyname: key, Displayname: key, Enabled: true, Data: data}})
}

// registry reads the whole registry table.
func registry(t *testing.T, db *store.DB) map[string]string {
	t.Helper()
	_, rows := testkit.Rows(t, db, "SELECT key, value FROM registry")
	out := map[string]string{}
	for _, r := range rows {
		out[r[0].(string)] = r[1].(string)
	}
	return out
}

// dbVersion reads DB_VERSION ("" when absent).
func dbVersion(t *testing.T, db *store.DB) string {
	t.Helper()
	return registry(t, db)[store.RegDBVersion]
}

// permission reads one permission row; ok is false when it is missing.
func permission(t *testing.T, db *store.DB, key string) (p store.Permission, ok bool) {
	t.Helper()
	err := db.Reader().QueryRowContext(context.Background(), "SELECT id, keyname, displayname, description, is_builtin FROM permissions WHERE keyname = ?", key).
		Scan(&p.ID, &p.Keyname, &p.Displayname, &p.Description, &p.IsBuiltin)
	if errors.Is(err, sql.ErrNoRows) {
		return p, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return p, true
}

// mustPermission reads a permission that must exist and be built-in.
func mustPermission(t *testing.T, db *store.DB, key string) store.Permission {
	t.Helper()
	p, ok := permission(t, db, key)
	if !ok {
		t.Fatalf("permission %s is missing", key)
	}
	if !p.IsBuiltin {
		t.Fatalf("permission %s: is_builtin = false, want true", key)
	}
	return p
}

// instance reads one instance; nil when it is missing.
func instance(t *testing.T, db *store.DB, cls, key string) *store.Instance {
	t.Helper()
	in, err := db.Instance(context.Background(), cls, key)
	if store.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("read %s %s: %v", cls, key, err)
	}
	return in
}

// mustInstance reads an instance that must exist.
func mustInstance(t *testing.T, db *store.DB, cls, key string) *store.Instance {
	t.Helper()
	in := instance(t, db, cls, key)
	if in == nil {
		t.Fatalf("%s %s is missing", cls, key)
	}
	return in
}

// field returns a stored field value as text ("" when absent).
func field(in *store.Instance, name string) string {
	switch v := in.Data[name].(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

// count runs a SELECT count(*) query.
var count = testkit.QueryInt

// snapshot renders every row of the data tables (all but the registry), so two
// snapshots are equal exactly when the start-up sequence wrote nothing in between.
func snapshot(t *testing.T, db *store.DB) string {
	t.Helper()
	var b strings.Builder
	for _, table := range []string{"configuration", "schemas", "schema_fields", "instances", "permissions", "revisions"} {
		cols, rows := testkit.Rows(t, db, "SELECT * FROM "+table+" ORDER BY 1")
		fmt.Fprintf(&b, "== %s %v\n", table, cols)
		for _, vals := range rows {
			fmt.Fprintf(&b, "%q\n", vals)
		}
	}
	return b.String()
}

// diffLines names the first line where two snapshots differ.
func diffLines(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(la) || i < len(lb); i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n before: %s\n after:  %s", i+1, x, y)
		}
	}
	return "no difference"
}

// assertRerunChangesNothing puts DB_VERSION back to from and starts again: running
// the blocks a second time must leave every data row as it was (every block is
// idempotent, because release-candidate builds re-run their own block at each start).
func assertRerunChangesNothing(t *testing.T, db *store.DB, o bootstrap.Options, from string) {
	t.Helper()
	before := snapshot(t, db)
	setRegistry(t, db, store.RegDBVersion, from)
	run(t, db, o)
	if after := snapshot(t, db); after != before {
		t.Fatalf("second run of the blocks from %s changed the data: %s", from, diffLines(before, after))
	}
	if got, want := dbVersion(t, db), o.Version; got != want {
		t.Fatalf("DB_VERSION after the second run = %q, want %q", got, want)
	}
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// setData sets fields of an instance's stored data behind the store's back, on either
// engine (a state an older release left, or a user's edit).
func setData(t *testing.T, db *store.DB, cls, key string, fields map[string]any) {
	t.Helper()
	for _, f := range sortedKeys(fields) {
		testkit.SetDataField(t, db, cls, key, f, fields[f])
	}
}

// failOn makes every insert or update (event) of a row of table for which cond holds
// abort with "injected failure": a trigger in SQLite's form or PostgreSQL's (PL/pgSQL).
// cond is an SQL condition on NEW that both engines read alike.
func failOn(t *testing.T, db *store.DB, name, event, table, cond string) {
	t.Helper()
	if testkit.Postgres() {
		execSQL(t, db,
			`CREATE FUNCTION `+name+`() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$`,
			`CREATE TRIGGER `+name+` BEFORE `+event+` ON `+table+` FOR EACH ROW WHEN (`+cond+`) EXECUTE FUNCTION `+name+`()`)
		return
	}
	execSQL(t, db, `CREATE TRIGGER `+name+` BEFORE `+event+` ON `+table+` WHEN `+cond+`
		BEGIN SELECT RAISE(ABORT, 'injected failure'); END`)
}

// dropFail removes a trigger failOn made on table.
func dropFail(t *testing.T, db *store.DB, name, table string) {
	t.Helper()
	if testkit.Postgres() {
		execSQL(t, db, "DROP TRIGGER "+name+" ON "+table, "DROP FUNCTION "+name+"()")
		return
	}
	execSQL(t, db, "DROP TRIGGER "+name)
}
