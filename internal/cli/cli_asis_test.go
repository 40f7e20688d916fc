package cli

import (
	"database/sql"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// sqliteFile opens a database file with database/sql, without the store (which would
// bring its layout up to date): read-only unless write.
func sqliteFile(t *testing.T, path string, write bool) *sql.DB {
	t.Helper()
	q := "_pragma=busy_timeout(10000)"
	if !write {
		q += "&mode=ro"
	}
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// rawDB opens the database at addr with database/sql, without the store (which would
// bring its layout up to date): an SQLite file (read-only unless write), or a
// PostgreSQL database through pgx.
func rawDB(t *testing.T, addr string, write bool) *sql.DB {
	t.Helper()
	if store.IsFileAddr(addr) {
		return sqliteFile(t, addr, write)
	}
	db, err := sql.Open("pgx", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// execOn runs statements on a database, beside any process that has it open.
func execOn(t *testing.T, addr string, stmts ...string) {
	t.Helper()
	db := rawDB(t, addr, true)
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	db.Close()
}

// fileState is what the start-up sequence would change in a database: the registry
// (DB_VERSION, LAST_START...), the admin account's row, the layout versions, and the
// backups a migration would write (SQLite: the names of the files beside the file;
// PostgreSQL: the files named after the database in the working directory, where its
// backup before migrating goes).
func fileState(t *testing.T, addr string) string {
	t.Helper()
	db := rawDB(t, addr, false)
	defer db.Close()
	var b strings.Builder
	rows, err := db.Query("SELECT key, value FROM registry ORDER BY key")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s=%s\n", k, v)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	var enabled, layout, tasks int
	var data string
	if err := db.QueryRow("SELECT is_enabled, CAST(data AS TEXT) FROM instances WHERE classname = '_user' AND keyname = 'admin'").
		Scan(&enabled, &data); err != nil {
		t.Fatal(err)
	}
	// The store's layout version and whether the owners' table exists (a database
	// from before the task queue owned its layout has no layout_versions: 0).
	layoutQ, ownedQ := "PRAGMA user_version", "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = 'layout_versions')"
	dir, prefix := filepath.Dir(addr), ""
	if !store.IsFileAddr(addr) {
		layoutQ, ownedQ = "SELECT version FROM layout_version", "SELECT to_regclass('layout_versions') IS NOT NULL"
		u, err := url.Parse(addr)
		if err != nil {
			t.Fatal(err)
		}
		dir, prefix = ".", strings.TrimPrefix(u.Path, "/")
	}
	if err := db.QueryRow(layoutQ).Scan(&layout); err != nil {
		t.Fatal(err)
	}
	var owned bool
	if err := db.QueryRow(ownedQ).Scan(&owned); err != nil {
		t.Fatal(err)
	}
	if owned {
		if err := db.QueryRow("SELECT version FROM layout_versions WHERE owner = 'tasks'").Scan(&tasks); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Fprintf(&b, "admin is_enabled=%d data=%s\nlayout store=%d tasks=%d\n", enabled, data, layout, tasks)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, prefix) && !strings.HasSuffix(n, "-wal") && !strings.HasSuffix(n, "-shm") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	fmt.Fprintf(&b, "files %s\n", strings.Join(names, " "))
	return b.String()
}

// backupState is fileState of the backup dest of the database at addr, as far as a
// backup holds it: an SQLite copy is a database file; of a pg_dump archive, the
// DB_VERSION its registry holds.
func backupState(t *testing.T, addr, dest string) string {
	t.Helper()
	if store.IsFileAddr(addr) {
		return fileState(t, dest)
	}
	v, err := store.PostgresArchiveVersion(t.Context(), dest)
	if err != nil {
		t.Fatalf("the archive %s: %v", dest, err)
	}
	return "DB_VERSION=" + v + "\n"
}

// tableCount is the number of tables in the PostgreSQL database at addr's schema.
func tableCount(t *testing.T, addr string) int {
	t.Helper()
	db := rawDB(t, addr, false)
	defer db.Close()
	return testkit.QueryInt(t, testkit.Pool(db), "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()")
}

// shellEnv is env as a shell beside the service often has it: the database, but not
// the service's admin password.
func shellEnv(env map[string]string) map[string]string {
	out := maps.Clone(env)
	delete(out, "SERVICE_ADMIN_PASSWORD")
	return out
}

// Every command other than serve and migrate opens the database as it is: next to a
// running server, a shell without SERVICE_ADMIN_PASSWORD neither locks admin out of the
// API nor writes LAST_START or a backup.
func TestCommandsBesideARunningServerLeaveStartUpStateAlone(t *testing.T) {
	t.Parallel()
	env := secEnv(t)
	s := startServe(t, env)
	admin := basicAuth("admin", "Adm1n-Pl41n-S3cret")
	s.want(200, "GET", "/api/conf/", admin, "")
	path := env["SERVICE_DB"]
	// A start-up sequence would overwrite it with the time.
	execOn(t, path, "UPDATE registry SET value = 'sentinel' WHERE key = 'LAST_START'")
	before := fileState(t, path)
	if !strings.Contains(before, "LAST_START=sentinel") || !strings.Contains(before, "admin is_enabled=1") {
		t.Fatalf("state before the commands:\n%s", before)
	}

	shell := shellEnv(env)
	schema := writeFile(t, "vm.yml", "- {classname: _schema, keyname: vm, ram: {dataformat: int}}\n- {classname: vm, keyname: a, ram: 1}\n")
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	for _, args := range [][]string{
		{"user", "list"}, {"apikey", "list"}, {"permission", "list"}, {"pipeline", "list"}, {"task", "list"},
		{"export", "--all"}, {"load", schema}, {"load", "--dryrun", schema},
		{"apikey", "create", "shellkey", "--permissions", "p_data_access"}, {"ipam", "collect"},
		{"pipeline", "run", "bulk_delete_disabled", "--schema", "vm", "--dryrun"}, {"backup", copyPath},
	} {
		if code, _, stderr := runCLI(t, shell, args...); code != 0 {
			t.Fatalf("%s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		if after := fileState(t, path); after != before {
			t.Fatalf("%s changed the start-up state:\nbefore:\n%safter:\n%s", strings.Join(args, " "), before, after)
		}
	}
	s.want(200, "GET", "/api/conf/", admin, "")
}

// A command other than serve and migrate refuses a file it would have to create or
// migrate, says what to run, and writes nothing; a file written by a newer version
// says so instead. A release candidate's re-run blocks do not count once its version
// is stored.
func TestCommandsRefuseADatabaseTheStartUpMustChange(t *testing.T) {
	t.Parallel()
	entry := writeFile(t, "e.yml", "- {classname: _schema, keyname: vm, ram: {dataformat: int}}\n")
	commands := [][]string{{"user", "list"}, {"load", entry}, {"apikey", "create", "k", "--permissions", "p_data_access"},
		{"task", "list"}, {"export", "--all"}}
	const migrateHint = "run `dataservice migrate` (or `serve`) first"

	t.Run("a missing or empty file", func(t *testing.T) {
		testkit.SQLiteOnly(t, "a missing file, an empty file and a missing directory are a file's; the PostgreSQL form is the subtest \"an empty database\"")
		for i, empty := range []bool{false, true, false} {
			env := testEnv(t)
			path := env["SERVICE_DB"]
			if i == 2 { // in a directory that does not exist either
				path = filepath.Join(t.TempDir(), "gone", "test.db")
				env["SERVICE_DB"] = path
			}
			if empty {
				if err := os.WriteFile(path, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			for _, args := range append(commands, []string{"backup", filepath.Join(t.TempDir(), "b.db")}) {
				code, _, stderr := runCLI(t, env, args...)
				want := "no database at " + path + ": " + migrateHint + "\n"
				if code != 1 || !strings.HasSuffix(stderr, want) {
					t.Fatalf("%s (empty file %v): exit %d, %q; want exit 1 ending %q", strings.Join(args, " "), empty, code, stderr, want)
				}
				st, err := os.Stat(path)
				if empty && (err != nil || st.Size() != 0) {
					t.Fatalf("%s wrote to the empty file (%v)", strings.Join(args, " "), err)
				}
				if !empty && !os.IsNotExist(err) {
					t.Fatalf("%s created the database (stat err %v)", strings.Join(args, " "), err)
				}
			}
		}
	})

	t.Run("an empty database", func(t *testing.T) {
		if !testkit.Postgres() {
			t.Skip("PostgreSQL's form of the subtest \"a missing or empty file\"")
		}
		env := testEnv(t)
		addr := env["SERVICE_DB"]
		for _, args := range append(commands, []string{"backup", filepath.Join(t.TempDir(), "b.db")}) {
			// A database without the service's tables is one whose every layout step
			// is pending.
			code, _, stderr := runCLI(t, env, args...)
			want := []string{"open database " + store.RedactURL(addr) + ": ", "table layout steps pending (layout versions: store 0 of ", migrateHint}
			for _, w := range want {
				if code != 1 || !strings.Contains(stderr, w) {
					t.Fatalf("%s: exit %d, %q; want exit 1 and %q", strings.Join(args, " "), code, stderr, w)
				}
			}
			if n := tableCount(t, addr); n != 0 {
				t.Fatalf("%s created %d tables in the empty database", strings.Join(args, " "), n)
			}
		}
	})

	pending, version := layoutPending()
	cases := []struct {
		name    string
		stmts   []string // applied to a migrated database
		want    []string // in the message
		notWant string
	}{
		{"an older DB_VERSION", []string{"UPDATE registry SET value = '4.8.0' WHERE key = 'DB_VERSION'"},
			[]string{`the data needs migrating: DB_VERSION "4.8.0", SERVICE_VERSION 4.9.0`, migrateHint}, ""},
		{"a release candidate's DB_VERSION", []string{"UPDATE registry SET value = '4.9.0-RC2' WHERE key = 'DB_VERSION'"},
			[]string{"the data needs migrating", migrateHint}, ""},
		{"no DB_VERSION", []string{"DELETE FROM registry WHERE key = 'DB_VERSION'"},
			[]string{"the data needs migrating: no DB_VERSION", migrateHint}, ""},
		{"a newer DB_VERSION", []string{"UPDATE registry SET value = '4.10.0' WHERE key = 'DB_VERSION'"},
			[]string{`written by a newer version of dataservice: DB_VERSION "4.10.0", this is 4.9.0`}, "migrate"},
		{"a DB_VERSION too old to migrate", []string{"UPDATE registry SET value = '3.9.0' WHERE key = 'DB_VERSION'"},
			[]string{"too old", "upgrade through a 4.0.x or 4.1.x release first"}, ""},
		{"store layout steps pending", pending,
			[]string{fmt.Sprintf("table layout steps pending (layout versions: store %d of ", version), migrateHint}, ""},
		{"task queue layout steps pending", []string{"DROP TABLE layout_versions", "DROP TABLE schedule_runs"},
			[]string{"table layout steps pending (layout versions: schedule_runs 0 of 1, tasks 0 of ", migrateHint}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := migratedEnv(t)
			path := env["SERVICE_DB"]
			execOn(t, path, c.stmts...)
			before := fileState(t, path)
			for _, args := range commands {
				code, _, stderr := runCLI(t, shellEnv(env), args...)
				if code != 1 {
					t.Fatalf("%s: exit %d, want 1: %s", strings.Join(args, " "), code, stderr)
				}
				for _, w := range c.want {
					if !strings.Contains(stderr, w) {
						t.Fatalf("%s: %q lacks %q", strings.Join(args, " "), stderr, w)
					}
				}
				if c.notWant != "" && strings.Contains(stderr, c.notWant) {
					t.Fatalf("%s: %q says %q", strings.Join(args, " "), stderr, c.notWant)
				}
				if after := fileState(t, path); after != before {
					t.Fatalf("%s changed the file:\nbefore:\n%safter:\n%s", strings.Join(args, " "), before, after)
				}
			}
		})
	}

	t.Run("backup copies a file that needs migrating", func(t *testing.T) {
		env := migratedEnv(t)
		path := env["SERVICE_DB"]
		execOn(t, path, "UPDATE registry SET value = '4.8.0' WHERE key = 'DB_VERSION'")
		before := fileState(t, path)
		dest := filepath.Join(t.TempDir(), "before-migrating.db")
		if code, _, stderr := runCLI(t, shellEnv(env), "backup", dest); code != 0 {
			t.Fatalf("backup: exit %d: %s", code, stderr)
		}
		if after := fileState(t, path); after != before {
			t.Fatalf("backup changed the file:\nbefore:\n%safter:\n%s", before, after)
		}
		if got := backupState(t, path, dest); !strings.Contains(got, "DB_VERSION=4.8.0\n") {
			t.Fatalf("the copy is not the file as it was:\n%s", got)
		}
	})

	t.Run("a release candidate's stored version is current", func(t *testing.T) {
		env := testEnv(t)
		env["SERVICE_VERSION"] = "4.9.0-RC1"
		migrateDB(t, env)
		path := env["SERVICE_DB"]
		execOn(t, path, "UPDATE registry SET value = 'sentinel' WHERE key = 'LAST_START'")
		before := fileState(t, path)
		for _, args := range commands {
			if code, _, stderr := runCLI(t, shellEnv(env), args...); code != 0 {
				t.Fatalf("%s: exit %d: %s", strings.Join(args, " "), code, stderr)
			}
		}
		if after := fileState(t, path); after != before {
			t.Fatalf("the commands ran the start-up sequence:\nbefore:\n%safter:\n%s", before, after)
		}
	})
}

// Commands other than serve and migrate log at warn unless told otherwise: their
// info lines would break the --wait progress line. --log-level and SERVICE_LOG_LEVEL
// still win; serve and migrate keep info.
func TestNonServingCommandsLogAtWarnByDefault(t *testing.T) {
	t.Parallel()
	env := migratedEnv(t)
	delete(env, "SERVICE_LOG_LEVEL")
	if code, _, stderr := runCLI(t, env, "load", writeFile(t, "vm.yml",
		"- {classname: _schema, keyname: vm, ram: {dataformat: int}}\n- {classname: vm, keyname: a, ram: 1, is_enabled: false}\n")); code != 0 {
		t.Fatalf("load: %s", stderr)
	}
	runWait := []string{"pipeline", "run", "bulk_delete_disabled", "--schema", "vm", "--dryrun", "--wait"}
	code, out, stderr := runCLI(t, env, runWait...)
	if code != 0 || stderr != "" || !strings.Contains(out, "succeeded") {
		t.Fatalf("run --wait at the default level: exit %d, stdout %q, stderr %q (want no log lines)", code, out, stderr)
	}
	for _, c := range []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"--log-level info", env, append([]string{"--log-level", "info"}, runWait...)},
		{"SERVICE_LOG_LEVEL=info", func() map[string]string {
			e := maps.Clone(env)
			e["SERVICE_LOG_LEVEL"] = "info"
			return e
		}(), runWait},
	} {
		if code, _, stderr := runCLI(t, c.env, c.args...); code != 0 || !strings.Contains(stderr, "msg=\"task start\"") {
			t.Fatalf("%s: exit %d, stderr %q lacks the task start line", c.name, code, stderr)
		}
	}
	if code, _, stderr := runCLI(t, env, "migrate"); code != 0 || !strings.Contains(stderr, "level=INFO msg=start-up") {
		t.Fatalf("migrate at the default level: exit %d, stderr %q lacks its info lines", code, stderr)
	}
}

// load --pipeline uses the API's load-time pipeline with its checks: a disabled
// pipeline is refused with the API's message and nothing is loaded; enabled, its
// rules run.
func TestLoadPipelineRefusesADisabledPipelineAsTheAPIDoes(t *testing.T) {
	t.Parallel()
	env := secEnv(t)
	defs := writeFile(t, "defs.yml", `- {classname: _schema, keyname: box, word: {dataformat: string}}
- classname: _pipeline
  keyname: shout
  is_enabled: false
  content: |
    - field_upper: ['', word]
`)
	if code, _, stderr := runCLI(t, env, "load", defs); code != 0 {
		t.Fatalf("load: %s", stderr)
	}
	entry := "- {classname: box, keyname: b1, word: quiet}\n"
	file := writeFile(t, "b1.yml", entry)
	code, out, stderr := runCLI(t, env, "load", "--pipeline", "shout", file)
	const msg = "pipeline shout is disabled"
	if code != 1 || out != "" || stderr != "dataservice load: "+msg+"\n" {
		t.Fatalf("load --pipeline with a disabled pipeline: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if _, exported, _ := runCLI(t, env, "export", "--schema", "box", "--format", "json"); strings.Contains(exported, "b1") {
		t.Fatalf("refused load wrote b1: %s", exported)
	}
	if code, _, stderr := runCLI(t, env, "load", "--pipeline", "nosuch", file); code != 1 || !strings.Contains(stderr, `pipeline "nosuch" not found`) {
		t.Fatalf("unknown pipeline: exit %d, %q", code, stderr)
	}

	s := startServe(t, env)
	admin := basicAuth("admin", "Adm1n-Pl41n-S3cret")
	s.wantErr(400, msg, "POST", "/api/load/?pipeline=shout", admin, entry)
	s.stop()

	if code, _, stderr := runCLI(t, env, "load", writeFile(t, "on.yml", "- {classname: _pipeline, keyname: shout, _action: enable}\n")); code != 0 {
		t.Fatalf("enable: %s", stderr)
	}
	if code, _, stderr := runCLI(t, env, "load", "--pipeline", "shout", file); code != 0 {
		t.Fatalf("load --pipeline with the pipeline enabled: exit %d: %s", code, stderr)
	}
	if _, exported, _ := runCLI(t, env, "export", "--schema", "box", "--format", "json"); !strings.Contains(exported, `"QUIET"`) {
		t.Fatalf("the pipeline's rule did not run: %s", exported)
	}
}

// layoutPending is the statements that turn a current database into one an older
// release made, with table layout steps pending, and the layout version it then
// claims. The later steps' objects go too: a database claiming an older layout but
// holding later objects is refused as foreign (see restore_schema_test.go). SQLite:
// layout 9, before the search index of layout 10, the nodes tables of 11 and the
// throttle of 12, the events outbox of 14 and 15 and the revisions' delta column of 18.
// PostgreSQL: layout 1, before the nodes tables of 2, the throttle of 3, the events
// outbox of 6 and 7 and the delta column of 8.
func layoutPending() (stmts []string, version int) {
	if testkit.Postgres() {
		return []string{"DROP TABLE events", "DROP TABLE throttle", "DROP TABLE nodes", "DROP TABLE node_salt",
			"ALTER TABLE revisions DROP COLUMN delta", "UPDATE layout_version SET version = 1"}, 1
	}
	return []string{"DROP TRIGGER instances_search_insert", "DROP TRIGGER instances_search_delete",
		"DROP TRIGGER instances_search_move", "DROP TABLE instances_search_staged",
		"DROP TABLE instances_search_dirty", "DROP TABLE instances_search", "DROP TABLE nodes", "DROP TABLE node_salt", "DROP TABLE throttle", "DROP TABLE events",
		"ALTER TABLE revisions DROP COLUMN delta", "PRAGMA user_version = 9"}, 9
}

// migrate --status reports and writes nothing: an empty file stays empty, and a
// database with table layout steps pending keeps its layout (it says the steps are
// pending).
func TestMigrateStatusWritesNoFileAndNoLayout(t *testing.T) {
	t.Parallel()
	t.Run("an empty file", func(t *testing.T) {
		testkit.SQLiteOnly(t, "an empty file is a file's; an empty PostgreSQL database is TestMigrateStatusChangesNothing's")
		env := testEnv(t)
		path := env["SERVICE_DB"]
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, stderr := runCLI(t, env, "migrate", "--status")
		if code != 0 || !strings.HasPrefix(out, "DB_VERSION: (none: empty database)\n") || !strings.Contains(out, "pending: bootstrap, ") {
			t.Fatalf("status of an empty file: exit %d, %q %s", code, out, stderr)
		}
		if st, err := os.Stat(path); err != nil || st.Size() != 0 {
			t.Fatalf("status wrote to the empty file (%v)", err)
		}
	})

	t.Run("layout steps pending", func(t *testing.T) {
		env := migratedEnv(t)
		path := env["SERVICE_DB"]
		pending, version := layoutPending()
		execOn(t, path, pending...)
		before := fileState(t, path)
		code, out, stderr := runCLI(t, env, "migrate", "--status")
		if want := fmt.Sprintf("pending: table layout steps (layout versions: store %d of ", version); code != 0 || !strings.Contains(out, want) {
			t.Fatalf("status of a database with layout steps pending: exit %d, %q %s; want %q", code, out, stderr, want)
		}
		if after := fileState(t, path); after != before {
			t.Fatalf("status changed the database:\nbefore:\n%safter:\n%s", before, after)
		}
	})
}
