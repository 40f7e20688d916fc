package cli

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// postgresWithData is a PostgreSQL database filled by copying copySource's SQLite
// database into it, and its URL with a password (the test cluster trusts local
// connections, so any password is accepted; none may show).
func postgresWithData(t *testing.T) (addr, secret string) {
	t.Helper()
	pg := testkit.NewPostgresAddress(t)
	u, err := url.Parse(pg)
	if err != nil {
		t.Fatal(err)
	}
	secret = "backup-pw-must-not-show"
	u.User = url.UserPassword(u.User.Username(), secret)
	addr = u.String()
	if code, _, stderr := runCLI(t, testEnv(t), "copy", "--from", copySource(t), "--to", addr); code != 0 {
		t.Fatalf("copy: %s", stderr)
	}
	return addr, secret
}

// fakeTools puts on PATH a pg_dump and a pg_restore that record their arguments and
// whether PGPASSWORD (PGSSLPASSWORD) holds the password, then run the real program.
func fakeTools(t *testing.T, secret string) (log string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "calls")
	for _, tool := range []string{"pg_dump", "pg_restore"} {
		real, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("%s not installed: %v", tool, err)
		}
		script := "#!/bin/sh\n" +
			"echo \"" + tool + " $*\" >> " + log + "\n" +
			"[ \"$PGPASSWORD\" = '" + secret + "' ] && echo 'PGPASSWORD set' >> " + log + "\n" +
			"[ \"$PGSSLPASSWORD\" = '" + secret + "' ] && echo 'PGSSLPASSWORD set' >> " + log + "\n" +
			"exec " + real + " \"$@\"\n"
		if err := os.WriteFile(filepath.Join(dir, tool), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return log
}

func instanceCount(t *testing.T, addr string) int {
	t.Helper()
	db, err := store.Open(context.Background(), addr, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return testkit.QueryInt(t, testkit.Pool(db.Reader()), "SELECT count(*) FROM instances")
}

// TestPostgresBackupAndRestore: backup writes a pg_dump archive (owner-only) with the
// password in PGPASSWORD, never on the command line nor in any output; restore puts
// the backed-up rows back, keeps the previous contents as a dump beside the backup,
// and refuses while a node is connected.
func TestPostgresBackupAndRestore(t *testing.T) {
	addr, secret := postgresWithData(t)
	calls := fakeTools(t, secret)
	env := testEnv(t)
	env["SERVICE_DB"] = addr
	dir := t.TempDir()
	file := filepath.Join(dir, "b.dump")
	code, out, stderr := runCLI(t, env, "backup", file)
	if code != 0 || !strings.Contains(out, "backup written to "+file) {
		t.Fatalf("backup: exit %d: %s%s", code, out, stderr)
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the backup file: %v, %v", st, err)
	}
	before := instanceCount(t, addr)
	db, err := testkit.OpenStore(t, addr, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	testkit.MustLoad(t, db, "- {classname: box, keyname: after_backup, note: x}\n", store.LoadOptions{})

	// A connected node: refused, nothing changed.
	code, out, stderr = runCLI(t, env, "restore", file)
	if code != 1 || !strings.Contains(stderr, "other sessions are connected") {
		t.Fatalf("restore beside a node: exit %d: %s%s", code, out, stderr)
	}
	db.Close()
	if got := instanceCount(t, addr); got != before+1 {
		t.Fatalf("%d instances after the refused restore, want %d", got, before+1)
	}

	code, out, stderr = runCLI(t, env, "restore", file)
	if code != 0 || !strings.Contains(out, "restored "+file) || !strings.Contains(out, "the previous database is kept as ") {
		t.Fatalf("restore: exit %d: %s%s", code, out, stderr)
	}
	if got := instanceCount(t, addr); got != before {
		t.Fatalf("%d instances after the restore, want the backup's %d", got, before)
	}
	kept, _ := filepath.Glob(filepath.Join(dir, "*.before-restore.*.dump"))
	if len(kept) != 1 {
		t.Fatalf("kept dumps: %v", kept)
	}
	log, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log)+out+stderr, secret) {
		t.Fatalf("the password shows on a command line or in the output:\n%s", log)
	}
	if !strings.Contains(string(log), "pg_dump --format=custom") || !strings.Contains(string(log), "pg_restore --data-only") ||
		!strings.Contains(string(log), "PGPASSWORD set") {
		t.Fatalf("the tools' calls:\n%s", log)
	}
}

// TestPostgresBackupPasswordInTheQuery: a password given as the URL's password= or
// sslpassword= query parameter reaches pg_dump in PGPASSWORD and PGSSLPASSWORD,
// never on its command line (where the process list shows it) nor in any output.
func TestPostgresBackupPasswordInTheQuery(t *testing.T) {
	pg := testkit.NewPostgresAddress(t)
	u, err := url.Parse(pg)
	if err != nil {
		t.Fatal(err)
	}
	secret := "query-pw-must-not-show"
	q := u.Query()
	q.Set("password", secret)
	q.Set("sslpassword", secret)
	u.RawQuery = q.Encode()
	addr := u.String()
	db, err := testkit.OpenStore(t, addr, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	calls := fakeTools(t, secret)
	env := testEnv(t)
	env["SERVICE_DB"] = addr
	file := filepath.Join(t.TempDir(), "b.dump")
	code, out, stderr := runCLI(t, env, "backup", file)
	if code != 0 {
		t.Fatalf("backup: exit %d: %s%s", code, out, stderr)
	}
	log, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log)+out+stderr, secret) {
		t.Fatalf("the password shows on a command line or in the output:\n%s%s%s", log, out, stderr)
	}
	for _, want := range []string{"pg_dump --format=custom", "PGPASSWORD set", "PGSSLPASSWORD set"} {
		if !strings.Contains(string(log), want) {
			t.Fatalf("the tool's call lacks %q:\n%s", want, log)
		}
	}
}

// TestPostgresRestoreRefusesForeignObjects: an archive whose database holds a rule
// (a dump brings data, not code) is refused before anything is changed, naming the
// rule; the rule is never created, and the database opens as before.
func TestPostgresRestoreRefusesForeignObjects(t *testing.T) {
	addr, _ := postgresWithData(t)
	fakeTools(t, "")
	raw, err := sql.Open("pgx", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec("CREATE RULE hide AS ON INSERT TO revisions DO INSTEAD NOTHING"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "crafted.dump")
	if out, err := exec.Command("pg_dump", "--format=custom", "--file="+file, "--dbname="+addr).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v %s", err, out)
	}
	if _, err := raw.Exec("DROP RULE hide ON revisions"); err != nil {
		t.Fatal(err)
	}
	env := testEnv(t)
	env["SERVICE_DB"] = addr
	code, out, stderr := runCLI(t, env, "restore", file)
	if code != 1 || !strings.Contains(stderr, "nothing was changed") || !strings.Contains(stderr, "schema objects the service's layout does not create") ||
		!strings.Contains(stderr, "RULE public revisions hide") {
		t.Fatalf("restore of a crafted archive: exit %d: %s%s", code, out, stderr)
	}
	if n := testkit.QueryInt(t, testkit.Pool(raw), "SELECT count(*) FROM pg_rules WHERE rulename = 'hide'"); n != 0 {
		t.Fatalf("the archive's rule was created")
	}
	db, err := store.Open(context.Background(), addr, store.Options{})
	if err != nil {
		t.Fatalf("open after the refused restore: %v", err)
	}
	db.Close()
	if kept, _ := filepath.Glob(filepath.Join(dir, "*.before-restore.*")); len(kept) != 0 {
		t.Fatalf("a refused restore left its copy of the unchanged database: %v", kept)
	}
}

// TestPostgresBackupWithoutTools: without pg_dump (pg_restore) on PATH, backup and
// restore refuse, naming the tool and where the manual recipe is.
func TestPostgresBackupWithoutTools(t *testing.T) {
	addr, _ := postgresWithData(t)
	t.Setenv("PATH", t.TempDir())
	env := testEnv(t)
	env["SERVICE_DB"] = addr
	file := filepath.Join(t.TempDir(), "b.dump")
	code, out, stderr := runCLI(t, env, "backup", file)
	if code != 1 || !strings.Contains(stderr, "pg_dump is not on PATH") || !strings.Contains(stderr, "docs/postgres.md") {
		t.Fatalf("backup without pg_dump: exit %d: %s%s", code, out, stderr)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("a refused backup left %s", file)
	}
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = runCLI(t, env, "restore", file)
	if code != 1 || !strings.Contains(stderr, "pg_restore is not on PATH") {
		t.Fatalf("restore without pg_restore: exit %d: %s%s", code, out, stderr)
	}
}
