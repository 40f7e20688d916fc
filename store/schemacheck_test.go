package store_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// A file holding a schema object the layout does not create, or one it creates with
// other SQL, is refused by every open before anything is written, with a message
// naming it; CheckFileSchema with repair fixes what can be fixed.
func TestOpenRefusesSchemaObjectsTheLayoutDoesNotCreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	long := strings.Repeat("x", 5000)
	cases := []struct {
		name, sql, want string
		repairable      bool
	}{
		{"trigger on instances", `CREATE TRIGGER grant_admin AFTER UPDATE ON instances BEGIN
			UPDATE instances SET data = json_set(data, '$.permissions', json_array('role:role_admin')) WHERE classname = '_apikey'; END`,
			"unexpected trigger grant_admin on instances", true},
		{"trigger on permissions", `CREATE TRIGGER p AFTER INSERT ON permissions BEGIN DELETE FROM sessions; END`,
			"unexpected trigger p on permissions", true},
		{"view", `CREATE VIEW v AS SELECT * FROM instances`, "unexpected view v: ", true},
		{"index with an expression", `CREATE INDEX x ON instances(json_extract(data, '$.` + long + `'))`,
			"unexpected index x on instances", true},
		// Tables are never dropped, even by a repair: their rows are the data.
		{"table", `CREATE TABLE extra(a)`, "unexpected table extra", false},
		// A file whose layout version was lowered holds tables its claimed version does
		// not create: every one is unexpected, and a repair that dropped them would
		// leave an empty database.
		{"layout version lowered", `PRAGMA user_version = 0`,
			"the file claims layout 0, schedule_runs 1, tasks 1 but holds tables that later layout versions create (", false},
		{"changed trigger", `DROP TRIGGER instances_count_insert; CREATE TRIGGER instances_count_insert AFTER INSERT ON instances BEGIN
			INSERT INTO instance_counts(classname, n) VALUES(NEW.classname, 1) ON CONFLICT(classname) DO UPDATE SET n = n + 1;
			UPDATE instances SET is_enabled = 1 WHERE classname = '_apikey'; END`,
			"changed trigger instances_count_insert on instances", true},
		{"missing trigger", `DROP TRIGGER instances_id_fresh`, "missing trigger instances_id_fresh on instances", true},
		{"table with another DEFAULT", `DROP TABLE sessions; CREATE TABLE sessions (
	id         INTEGER PRIMARY KEY,
	token_hash TEXT NOT NULL UNIQUE,
	user_id    INTEGER NOT NULL DEFAULT 1,
	login      TEXT NOT NULL,
	csrf       TEXT NOT NULL,
	address    TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	last_seen  INTEGER NOT NULL,
	expires_at INTEGER NOT NULL
); CREATE INDEX sessions_user ON sessions(user_id)`, "changed table sessions", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "crafted.db")
			db := testkit.Open(t, path, testkit.Options{})
			db.Close()
			testkit.ExecFile(t, path, c.sql)
			before := fileString(t, path, "SELECT group_concat(name || sql, ';') FROM (SELECT name, coalesce(sql, '') AS sql FROM sqlite_schema ORDER BY name)")
			for _, ro := range []bool{false, true} {
				db, err := store.Open(ctx, path, store.Options{ReadOnly: ro})
				if err == nil {
					db.Close()
					t.Fatalf("read-only %v: opened", ro)
				}
				var se *store.SchemaError
				if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("read-only %v: error %v, want a schema error naming %q", ro, err, c.want)
				}
				if len(err.Error()) > 4000 {
					t.Fatalf("message of %d bytes: SQL is quoted without bound", len(err.Error()))
				}
			}
			if _, err := store.CheckFileSchema(ctx, path, false); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("check: %v", err)
			}
			if got := fileString(t, path, "SELECT group_concat(name || sql, ';') FROM (SELECT name, coalesce(sql, '') AS sql FROM sqlite_schema ORDER BY name)"); got != before {
				t.Fatal("a refused open changed the schema")
			}
			done, err := store.CheckFileSchema(ctx, path, true)
			if !c.repairable {
				if err == nil || !strings.Contains(err.Error(), "cannot be repaired") || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("repair of an unrepairable file: %v %v", done, err)
				}
				if got := fileString(t, path, "SELECT group_concat(name || sql, ';') FROM (SELECT name, coalesce(sql, '') AS sql FROM sqlite_schema ORDER BY name)"); got != before {
					t.Fatal("a refused repair changed the schema")
				}
				return
			}
			if err != nil || len(done) == 0 {
				t.Fatalf("repair: %v %v", done, err)
			}
			testkit.Open(t, path, testkit.Options{})
		})
	}
}

// What SQLite creates itself is accepted: the statistics ANALYZE writes.
func TestOpenAcceptsSQLiteStatistics(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "analyzed.db")
	db := testkit.Open(t, path, testkit.Options{})
	db.Close()
	testkit.ExecFile(t, path, "ANALYZE")
	if n := fileString(t, path, "SELECT count(*) FROM sqlite_schema WHERE name = 'sqlite_stat1'"); n != "1" {
		t.Fatalf("ANALYZE made no sqlite_stat1 (%s)", n)
	}
	testkit.Open(t, path, testkit.Options{})
}

// fileString reads one text value from the file at path without store (which would
// refuse or migrate it).
func fileString(t *testing.T, path, query string) string {
	t.Helper()
	r, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	return testkit.QueryString(t, testkit.Pool(r), query)
}
