package cli

import (
	"context"
	"database/sql"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// restoredTables are the tables whose rows a restore gives back (nodes aside: the
// archive's heartbeats are forgotten).
var restoredTables = []string{"registry", "configuration", "permissions", "schemas", "schema_fields", "instances",
	"revisions", "sessions", "tasks", "throttle", "node_salt", "schema_generation", "instance_counts",
	"instance_count_deltas", "instance_ids", "instance_id_deletes", "ipam_blocks", "ipam_block_deltas",
	"layout_version", "layout_versions"}

// tableRows are every row of the tables, as text, in order.
func tableRows(t *testing.T, raw *sql.DB) map[string][]string {
	t.Helper()
	all := map[string][]string{}
	for _, table := range restoredTables {
		rows, err := raw.Query(fmt.Sprintf("SELECT CAST(x AS text) FROM %s x ORDER BY 1", table))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			all[table] = append(all[table], s)
		}
		rows.Close()
	}
	return all
}

// openIdleless opens the database keeping no connection idle: a restore refuses
// while another session is connected.
func openIdleless(t *testing.T, addr string) *sql.DB {
	t.Helper()
	raw, err := sql.Open("pgx", addr)
	if err != nil {
		t.Fatal(err)
	}
	raw.SetMaxIdleConns(0)
	t.Cleanup(func() { raw.Close() })
	return raw
}

func pgDump(t *testing.T, addr, file string, args ...string) {
	t.Helper()
	args = append([]string{"--format=custom", "--file=" + file, "--dbname=" + addr}, args...)
	if out, err := exec.Command("pg_dump", args...).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v %s", err, out)
	}
}

// TestPostgresRestoreRoundTrip: backup, changes, restore gives back every row of
// every table exactly, the maintained counts match the instances, and the restored
// database opens and takes new instances and schemas (its sequences set).
func TestPostgresRestoreRoundTrip(t *testing.T) {
	addr, _ := postgresWithData(t)
	fakeTools(t, "")
	env := testEnv(t)
	env["SERVICE_DB"] = addr
	raw := openIdleless(t, addr)
	want := tableRows(t, raw)
	file := filepath.Join(t.TempDir(), "b.dump")
	if code, out, stderr := runCLI(t, env, "backup", file); code != 0 {
		t.Fatalf("backup: %s%s", out, stderr)
	}
	loadDoc(t, env, "- {classname: box, keyname: after_backup, note: x}\n- {classname: _schema, keyname: later, note: {dataformat: string}}\n")
	if _, err := raw.Exec("UPDATE configuration SET value = '7' WHERE keyname = 'DATA_DEFAULT_SIZE'"); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := runCLI(t, env, "restore", file); code != 0 {
		t.Fatalf("restore: exit %d: %s%s", code, out, stderr)
	}
	got := tableRows(t, raw)
	for _, table := range restoredTables {
		if !reflect.DeepEqual(got[table], want[table]) {
			t.Errorf("%s after the restore:\n%q\nwant the backup's\n%q", table, got[table], want[table])
		}
	}
	if n := testkit.QueryInt(t, testkit.Pool(raw), `SELECT count(*) FROM
		(SELECT classname, count(*) AS n FROM instances GROUP BY classname) a
		FULL JOIN (SELECT classname, sum(n) AS n FROM (SELECT classname, n FROM instance_counts
			UNION ALL SELECT classname, n FROM instance_count_deltas) d GROUP BY classname) c USING (classname)
		WHERE coalesce(a.n, 0) <> coalesce(c.n, 0)`); n != 0 {
		t.Fatalf("%d classes whose instance_counts differ from their instances", n)
	}
	if n := testkit.QueryInt(t, testkit.Pool(raw), "SELECT count(*) FROM instances"); n == 0 {
		t.Fatal("no instances restored")
	}
	loadDoc(t, env, "- {classname: box, keyname: after_restore, note: y}\n- {classname: _schema, keyname: later, note: {dataformat: string}}\n")
}

// TestPostgresRestoreRefusesCraftedArchive: the archive of a database whose owner
// added a function, a trigger calling it, an event trigger, a database setting and
// a table of its own with rows is refused before anything changes, naming them; no
// object of it exists afterwards (none was ever sent to the server).
func TestPostgresRestoreRefusesCraftedArchive(t *testing.T) {
	addr, _ := postgresWithData(t)
	fakeTools(t, "")
	env := testEnv(t)
	env["SERVICE_DB"] = addr
	raw := openIdleless(t, addr)
	var dbname string
	var super bool
	if err := raw.QueryRow("SELECT current_database(), rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&dbname, &super); err != nil {
		t.Fatal(err)
	}
	craft := []string{
		"CREATE TABLE loot (secret text)",
		"INSERT INTO loot VALUES ('x')",
		`CREATE FUNCTION evil_fn() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN INSERT INTO loot VALUES (NEW.keyname); RETURN NEW; END$$`,
		"CREATE TRIGGER evil_trg BEFORE INSERT ON instances FOR EACH ROW EXECUTE FUNCTION evil_fn()",
		fmt.Sprintf(`ALTER DATABASE %q SET work_mem = '128kB'`, dbname),
	}
	undo := []string{"DROP TRIGGER evil_trg ON instances", "DROP FUNCTION evil_fn()", "DROP TABLE loot",
		fmt.Sprintf(`ALTER DATABASE %q RESET work_mem`, dbname)}
	if super {
		craft = append(craft, `CREATE FUNCTION evil_evt() RETURNS event_trigger LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'evil'; END$$`,
			"CREATE EVENT TRIGGER evil_evt ON ddl_command_start EXECUTE FUNCTION evil_evt()")
		undo = append([]string{"DROP EVENT TRIGGER evil_evt", "DROP FUNCTION evil_evt()"}, undo...)
	}
	for _, q := range craft {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "crafted.dump")
	pgDump(t, addr, file, "--create")
	for _, q := range undo {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	loadDoc(t, env, "- {classname: box, keyname: after_backup, note: x}\n")
	before := tableRows(t, raw)
	code, out, stderr := runCLI(t, env, "restore", file)
	if code != 1 || !strings.Contains(stderr, "nothing was changed") {
		t.Fatalf("restore of a crafted archive: exit %d: %s%s", code, out, stderr)
	}
	for _, name := range []string{"FUNCTION public evil_fn()", "TRIGGER public instances evil_trg", "TABLE public loot"} {
		if !strings.Contains(stderr, name) {
			t.Errorf("the refusal does not name %s: %s", name, stderr)
		}
	}
	if !reflect.DeepEqual(tableRows(t, raw), before) {
		t.Error("the refused restore changed the database")
	}
	for q, what := range map[string]string{
		"SELECT count(*) FROM pg_proc WHERE proname IN ('evil_fn', 'evil_evt')":                                                      "functions",
		"SELECT count(*) FROM pg_event_trigger":                                                                                      "event triggers",
		"SELECT count(*) FROM pg_class WHERE relname = 'loot'":                                                                       "tables",
		"SELECT count(*) FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase WHERE d.datname = current_database()": "settings",
	} {
		if n := testkit.QueryInt(t, testkit.Pool(raw), q); n != 0 {
			t.Errorf("the archive's %s exist after the refused restore (%d)", what, n)
		}
	}
	if kept, _ := filepath.Glob(filepath.Join(dir, "*.before-restore.*")); len(kept) != 0 {
		t.Errorf("a refused restore left its copy of the unchanged database: %v", kept)
	}
}

// TestPostgresRestoreRefusesScriptLine: an archive whose data holds what is no row
// of the layout's tables (the rows of a table outside the layout in a data-only
// dump, a column the layout's table does not have) is refused naming the line of
// its script, and the database is unchanged.
func TestPostgresRestoreRefusesScriptLine(t *testing.T) {
	addr, _ := postgresWithData(t)
	fakeTools(t, "")
	env := testEnv(t)
	env["SERVICE_DB"] = addr
	raw := openIdleless(t, addr)
	dir := t.TempDir()
	for _, c := range []struct {
		name, craft, undo, want string
		args                    []string
	}{
		{"a table outside the layout", "CREATE TABLE aaa_loot (secret text); INSERT INTO aaa_loot VALUES ('x')", "DROP TABLE aaa_loot",
			`rows of the table "aaa_loot", which the service's layout`, []string{"--data-only"}},
		{"a column the layout does not have", "ALTER TABLE instances ADD COLUMN extra text", "ALTER TABLE instances DROP COLUMN extra",
			`rows of the table instances for a column "extra" it does not have`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := raw.Exec(c.craft); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".dump")
			pgDump(t, addr, file, c.args...)
			if _, err := raw.Exec(c.undo); err != nil {
				t.Fatal(err)
			}
			before := tableRows(t, raw)
			code, out, stderr := runCLI(t, env, "restore", file)
			if code != 1 || !strings.Contains(stderr, "nothing was changed") || !strings.Contains(stderr, ": line ") ||
				!strings.Contains(stderr, c.want) {
				t.Fatalf("restore: exit %d: %s%s", code, out, stderr)
			}
			if !reflect.DeepEqual(tableRows(t, raw), before) {
				t.Error("the refused restore changed the database")
			}
			db, err := store.Open(context.Background(), addr, store.Options{ReadOnly: true})
			if err != nil {
				t.Fatalf("open after the refused restore: %v", err)
			}
			db.Close()
		})
	}
}
