package cli

import (
	"database/sql"
	"dataservice/internal/testkit"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The two triggers of a crafted backup: the first makes the key "reader" admin at
// the next update of any instance, the second re-enables the disabled key "gone".
const (
	escalateTrigger = `CREATE TRIGGER escalate AFTER UPDATE ON instances BEGIN
	UPDATE instances SET data = json_set(data, '$.permissions', json_array('role:role_admin'))
		WHERE classname = '_apikey' AND keyname = 'reader';
END`
	reenableTrigger = `CREATE TRIGGER reenable AFTER UPDATE ON instances BEGIN
	UPDATE instances SET is_enabled = 1 WHERE classname = '_apikey' AND keyname = 'gone';
END`
)

// craftedBackup makes a database with the keys "reader" (read-only) and "gone"
// (disabled), backs it up, and adds the triggers to the backup.
func craftedBackup(t *testing.T, env map[string]string) string {
	t.Helper()
	loadVMs(t, env, "a", 3)
	for _, args := range [][]string{
		{"apikey", "create", "reader", "--readonly"},
		{"apikey", "create", "gone", "--readonly"},
	} {
		if code, _, stderr := runCLI(t, env, args...); code != 0 {
			t.Fatalf("%v: %s", args, stderr)
		}
	}
	disable := filepath.Join(t.TempDir(), "disable.yml")
	if err := os.WriteFile(disable, []byte("- {classname: _apikey, keyname: gone, is_enabled: false}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, env, "load", disable); code != 0 {
		t.Fatalf("disable gone: %s", stderr)
	}
	return backupWith(t, env, escalateTrigger, reenableTrigger)
}

// escalated reports what the crafted triggers did to the database at path: whether
// "reader" holds role_admin and whether "gone" is enabled.
func escalated(t *testing.T, path string) (admin, enabled bool) {
	t.Helper()
	perms := sqlText(t, path, "SELECT coalesce(json_extract(data, '$.permissions'), '') FROM instances WHERE classname = '_apikey' AND keyname = 'reader'")
	on := sqlText(t, path, "SELECT is_enabled FROM instances WHERE classname = '_apikey' AND keyname = 'gone'")
	return strings.Contains(perms, "role_admin"), on == "1"
}

// An ordinary load after the restore: it updates instances, which fires the triggers.
func ordinaryLoad(t *testing.T, env map[string]string) (int, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "ordinary.yml")
	if err := os.WriteFile(file, []byte("- {classname: vm, keyname: a000, ram: 4096}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, env, "load", file)
	return code, stderr
}

func TestRestoreRefusesABackupCarryingTriggers(t *testing.T) {
	testkit.SQLiteOnly(t, "restore checks and swaps an SQLite file (VACUUM INTO copies, integrity_check, crafted sqlite_schema objects); a PostgreSQL database is restored with pg_restore")
	t.Parallel()
	env := migratedEnv(t)
	dbPath := env["SERVICE_DB"]
	backup := craftedBackup(t, env)
	before := sqlText(t, dbPath, "SELECT count(*) FROM sqlite_schema")

	code, _, stderr := runCLI(t, env, "restore", backup)
	if code != 1 {
		t.Errorf("restore of a backup with triggers: exit %d, %s", code, stderr)
	}
	for _, want := range []string{"unexpected trigger escalate on instances", "role:role_admin", "unexpected trigger reenable on instances", "--force"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("restore's message does not name %q:\n%s", want, stderr)
		}
	}
	if got := sqlText(t, dbPath, "SELECT count(*) FROM sqlite_schema"); got != before {
		t.Errorf("refused restore changed the database's schema: %s objects, was %s", got, before)
	}
	if l := leftovers(t, dbPath); len(l) != 0 {
		t.Errorf("files left by a refused restore: %v", l)
	}

	// The same file put in place by hand: migrate and every command refuse to open it,
	// and the ordinary load that would fire the triggers never runs.
	b, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	placed := testEnv(t)
	if err := os.WriteFile(placed["SERVICE_DB"], b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"migrate"}, {"apikey", "list"}} {
		code, _, stderr := runCLI(t, placed, args...)
		if code != 1 || !strings.Contains(stderr, "unexpected trigger escalate on instances") || !strings.Contains(stderr, "unexpected trigger reenable on instances") {
			t.Errorf("%v on a file with the triggers: exit %d, %s", args, code, stderr)
		}
	}
	if code, stderr := ordinaryLoad(t, placed); code != 1 || !strings.Contains(stderr, "unexpected trigger escalate") {
		t.Errorf("load on a file with the triggers: exit %d, %s", code, stderr)
	}
	if admin, enabled := escalated(t, placed["SERVICE_DB"]); admin || enabled {
		t.Errorf("the triggers ran: reader admin %v, gone enabled %v", admin, enabled)
	}
}

func TestRestoreForceDropsForeignObjects(t *testing.T) {
	testkit.SQLiteOnly(t, "restore checks and swaps an SQLite file (VACUUM INTO copies, integrity_check, crafted sqlite_schema objects); a PostgreSQL database is restored with pg_restore")
	t.Parallel()
	env := migratedEnv(t)
	dbPath := env["SERVICE_DB"]
	backup := craftedBackup(t, env)
	code, stdout, stderr := runCLI(t, env, "restore", "--force", backup)
	if code != 0 {
		t.Fatalf("restore --force: exit %d, %s", code, stderr)
	}
	for _, want := range []string{"dropped trigger escalate on instances", "dropped trigger reenable on instances"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("restore --force does not report %q:\n%s", want, stdout)
		}
	}
	if got := sqlText(t, dbPath, "SELECT count(*) FROM sqlite_schema WHERE name IN ('escalate', 'reenable')"); got != "0" {
		t.Fatalf("restored file still holds %s of the triggers", got)
	}
	// The escalation scenario: the next ordinary load leaves both keys as they were.
	if code, stderr := ordinaryLoad(t, env); code != 0 {
		t.Fatalf("load after restore --force: %s", stderr)
	}
	if admin, enabled := escalated(t, dbPath); admin || enabled {
		t.Errorf("after restore and a load: reader admin %v, gone enabled %v", admin, enabled)
	}
	// The backup itself is never changed.
	if got := sqlText(t, backup, "SELECT count(*) FROM sqlite_schema WHERE name IN ('escalate', 'reenable')"); got != "2" {
		t.Errorf("restore --force changed the backup: %s triggers left", got)
	}
}

// A backup taken by the service restores as it always did, with or without --force,
// and reports nothing dropped.
func TestRestoreOfAPlainBackupDropsNothing(t *testing.T) {
	testkit.SQLiteOnly(t, "restore checks and swaps an SQLite file (VACUUM INTO copies, integrity_check, crafted sqlite_schema objects); a PostgreSQL database is restored with pg_restore")
	t.Parallel()
	env := migratedEnv(t)
	loadVMs(t, env, "a", 5)
	backup := filepath.Join(t.TempDir(), "plain.bak")
	if code, _, stderr := runCLI(t, env, "backup", backup); code != 0 {
		t.Fatalf("backup: %s", stderr)
	}
	for _, args := range [][]string{{"restore", backup}, {"restore", "--force", backup}} {
		code, stdout, stderr := runCLI(t, env, args...)
		if code != 0 || strings.Contains(stdout, "dropped") {
			t.Fatalf("%v: exit %d, %s %s", args, code, stdout, stderr)
		}
	}
	if code, stderr := ordinaryLoad(t, env); code != 0 {
		t.Fatalf("load after restore: %s", stderr)
	}
}

// backupWith backs up the database of env and runs stmts on the backup.
func backupWith(t *testing.T, env map[string]string, stmts ...string) string {
	t.Helper()
	backup := filepath.Join(t.TempDir(), "edited.bak")
	if code, _, stderr := runCLI(t, env, "backup", backup); code != 0 {
		t.Fatalf("backup: %s", stderr)
	}
	db, err := sql.Open("sqlite", sqliteDSN(backup, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return backup
}

// A table is never dropped, even with --force: its rows are the data. A backup whose
// layout version was lowered to 0 holds tables its claimed version does not create;
// dropping them all would swap an empty database in. It is refused, naming the
// lowered version, and the database is left as it was.
func TestRestoreForceNeverDropsTables(t *testing.T) {
	testkit.SQLiteOnly(t, "restore checks and swaps an SQLite file (VACUUM INTO copies, integrity_check, crafted sqlite_schema objects); a PostgreSQL database is restored with pg_restore")
	t.Parallel()
	env := migratedEnv(t)
	dbPath := env["SERVICE_DB"]
	loadVMs(t, env, "a", 3)
	cases := []struct {
		name  string
		stmts []string
		want  []string
	}{
		{"layout version lowered", []string{"PRAGMA user_version = 0"},
			[]string{"the file claims layout 0", "holds tables that later layout versions create (", "ipam_blocks", "its layout version is lower than its tables imply"}},
		{"extra table", []string{"CREATE TABLE extra(a)", "INSERT INTO extra VALUES(1)"},
			[]string{"unexpected table extra"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			backup := backupWith(t, env, c.stmts...)
			before := sqlText(t, dbPath, "SELECT count(*) FROM instances")
			for _, args := range [][]string{{"restore", "--force", backup}, {"restore", backup}} {
				code, stdout, stderr := runCLI(t, env, args...)
				if code != 1 || strings.Contains(stdout, "restored") || strings.Contains(stdout, "dropped") {
					t.Fatalf("%v: exit %d, %s %s", args, code, stdout, stderr)
				}
				for _, want := range append(c.want, "cannot be repaired: tables are never dropped or replaced, even by restore --force") {
					if !strings.Contains(stderr, want) {
						t.Errorf("%v: the message does not say %q:\n%s", args, want, stderr)
					}
				}
				if strings.Contains(stderr, "drops or replaces them") {
					t.Errorf("%v: the message suggests --force for a table:\n%s", args, stderr)
				}
				if got := sqlText(t, dbPath, "SELECT count(*) FROM instances"); got != before || before == "0" {
					t.Fatalf("%v: the database holds %s instances, had %s", args, got, before)
				}
				if l := leftovers(t, dbPath); len(l) != 0 {
					t.Errorf("%v: files left by a refused restore: %v", args, l)
				}
			}
		})
	}
}

// The query planner's statistics in a restored file are cleared: a crafted
// sqlite_stat1 could steer every query into full scans. The backup is not changed.
func TestRestoreClearsPlannerStatistics(t *testing.T) {
	testkit.SQLiteOnly(t, "restore checks and swaps an SQLite file (VACUUM INTO copies, integrity_check, crafted sqlite_schema objects); a PostgreSQL database is restored with pg_restore")
	t.Parallel()
	env := migratedEnv(t)
	dbPath := env["SERVICE_DB"]
	loadVMs(t, env, "a", 3)
	backup := backupWith(t, env, "ANALYZE",
		"INSERT INTO sqlite_stat1(tbl, idx, stat) VALUES('instances', 'instances_classname_id', '1 1000000 1000000')")
	if n := sqlText(t, backup, "SELECT count(*) FROM sqlite_stat1"); n == "0" {
		t.Fatal("the backup holds no statistics")
	}
	code, stdout, stderr := runCLI(t, env, "restore", backup)
	if code != 0 {
		t.Fatalf("restore: exit %d, %s", code, stderr)
	}
	if !strings.Contains(stdout, "cleared the backup's query-planner statistics") {
		t.Errorf("restore does not report the cleared statistics:\n%s", stdout)
	}
	if n := sqlText(t, dbPath, "SELECT count(*) FROM sqlite_stat1"); n != "0" {
		t.Errorf("the restored database holds %s rows of sqlite_stat1", n)
	}
	if n := sqlText(t, backup, "SELECT count(*) FROM sqlite_stat1"); n == "0" {
		t.Error("restore changed the backup")
	}
	if code, stderr := ordinaryLoad(t, env); code != 0 {
		t.Fatalf("load after restore: %s", stderr)
	}
}
