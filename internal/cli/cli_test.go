package cli

import (
	"dataservice/internal/testkit"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// TestHelpListsEveryCommand: no arguments, "help", --help and -h (also after other
// flags) list every command of the table with one line each, exit 0.
func TestHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	for _, args := range [][]string{nil, {"help"}, {"--help"}, {"-h"}, {"--db", "x.db", "--help"}} {
		code, out, stderr := runCLI(t, env, args...)
		if code != 0 || stderr != "" {
			t.Fatalf("%v: exit %d, stderr %q", args, code, stderr)
		}
		for _, cmd := range commandList() {
			line := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(strings.TrimSpace(cmd.name+" "+cmd.args)) + ` +` +
				regexp.QuoteMeta(cmd.summary) + `$`)
			if !line.MatchString(out) {
				t.Fatalf("%v: no line for %q in\n%s", args, cmd.name, out)
			}
		}
		if !strings.Contains(out, "Exit status: 0 success, 1 failure, 2 usage error") {
			t.Fatalf("%v: exit statuses not documented", args)
		}
	}
	if _, err := os.Stat(env["SERVICE_DB"]); !os.IsNotExist(err) {
		t.Fatalf("help created the database")
	}
}

// TestCommandHelp: "help CMD" and "CMD --help" show the usage line with the positional
// arguments and the command's own flags, exit 0, and open nothing.
func TestCommandHelp(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	for _, cmd := range commandList() {
		words := strings.Fields(cmd.name)
		for _, args := range [][]string{append([]string{"help"}, words...), append(append([]string{}, words...), "--help"),
			append([]string{"-h"}, words...)} {
			code, out, stderr := runCLI(t, env, args...)
			if code != 0 || stderr != "" {
				t.Fatalf("%v: exit %d, stderr %q", args, code, stderr)
			}
			if !strings.HasPrefix(out, "usage: "+usageLine(&cmd)+"\n") {
				t.Fatalf("%v: usage line missing:\n%s", args, out)
			}
			if !strings.Contains(out, cmd.summary) {
				t.Fatalf("%v: summary missing:\n%s", args, out)
			}
		}
	}
	if _, err := os.Stat(env["SERVICE_DB"]); !os.IsNotExist(err) {
		t.Fatalf("help created the database")
	}
	flagsOf := func(args ...string) string {
		_, out, _ := runCLI(t, env, append(args, "--help")...)
		return out
	}
	for _, tc := range []struct {
		cmd        []string
		has, hasnt []string
	}{
		{[]string{"serve"}, []string{"--listen", "--base-url", "--workers", "--db", "--backup"}, nil},
		{[]string{"version"}, nil, []string{"--db", "--listen", "--backup"}},
		{[]string{"backup"}, []string{"--db"}, []string{"--backup", "--listen"}},
		{[]string{"apikey", "create"}, []string{"--permissions", "--readonly", "--user", "--expires"}, []string{"--listen", "--schema"}},
		{[]string{"apikey", "list"}, []string{"--db"}, []string{"--permissions", "--listen"}},
		{[]string{"pipeline", "run"}, []string{"--schema", "--dryrun", "--wait"}, []string{"--listen", "--permissions"}},
		{[]string{"load"}, []string{"--action", "--dryrun", "--pipeline"}, []string{"--listen", "--schema", "--backup"}},
		// --backup is read by the start-up sequence, which only serve and migrate run.
		{[]string{"migrate"}, []string{"--db", "--backup", "--status"}, []string{"--listen"}},
		{[]string{"user", "list"}, []string{"--db", "--log-level"}, []string{"--backup"}},
		{[]string{"task", "list"}, []string{"--status", "--limit"}, []string{"--listen"}},
		{[]string{"task", "wait"}, []string{"--timeout"}, []string{"--listen"}},
		{[]string{"user", "add"}, []string{"--email", "--password-file", "--no-password"}, []string{"--listen"}},
		{[]string{"pipeline", "run"}, []string{"NAME"}, nil},
		{[]string{"apikey", "revoke"}, []string{"KEYNAME"}, nil},
		{[]string{"task", "show"}, []string{"HANDLE"}, nil},
	} {
		out := flagsOf(tc.cmd...)
		for _, f := range tc.has {
			if !strings.Contains(out, f) {
				t.Errorf("%v --help lacks %s:\n%s", tc.cmd, f, out)
			}
		}
		for _, f := range tc.hasnt {
			if strings.Contains(out, f) {
				t.Errorf("%v --help shows %s, which it does not read:\n%s", tc.cmd, f, out)
			}
		}
	}
}

// TestGroupHelpAndUsageErrors: a group alone is a usage error (2) listing its
// commands; with --help it is that list, exit 0; mistakes in the command line exit 2
// and name the problem; --version prints the version.
func TestGroupHelpAndUsageErrors(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	for _, g := range []string{"apikey", "pipeline", "ipam", "task", "user", "permission", "schedule"} {
		if code, out, _ := runCLI(t, env, g, "--help"); code != 0 || !strings.Contains(out, "dataservice "+g+" COMMAND") {
			t.Fatalf("%s --help: exit %d, %q", g, code, out)
		}
		if code, _, stderr := runCLI(t, env, g); code != 2 || !strings.Contains(stderr, "which "+g+" command?") {
			t.Fatalf("%s: exit %d, %q", g, code, stderr)
		}
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"lod", "x"}, `unknown command "lod"; did you mean "load"?`},
		{[]string{"apikey", "frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"apikey", "create"}, "missing KEYNAME"},
		{[]string{"apikey", "create", "a", "b"}, "unexpected arguments: b"},
		{[]string{"apikey", "list", "--nope"}, "unknown flag: --nope"},
		{[]string{"migrate", "--listen", "x:1"}, "unknown flag: --listen"},
		{[]string{"--db", "", "apikey", "list"}, "--db: empty value"},
		{[]string{"apikey", "list", "--db="}, "--db: empty value"},
		{[]string{"pipeline", "run", "p"}, "--schema is required"},
		{[]string{"export"}, "--schema or --all is required"},
		{[]string{"export", "--schema", "x", "--format", "xml"}, `--format "xml"`},
		{[]string{"load", "--action", "zap", "x.yml"}, `--action "zap"`},
		{[]string{"task", "list", "--status", "done"}, `--status "done"`},
		{[]string{"--db", "x.db"}, "no command given"},
	} {
		code, _, stderr := runCLI(t, env, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.msg) {
			t.Fatalf("%q: exit %d, want 2 and %q in %q", tc.args, code, tc.msg, stderr)
		}
	}
	if _, err := os.Stat(env["SERVICE_DB"]); !os.IsNotExist(err) {
		t.Fatalf("a usage error created the database")
	}
	for _, args := range [][]string{{"--version"}, {"apikey", "list", "--version"}, {"version"}} {
		if code, out, _ := runCLI(t, env, args...); code != 0 || out != "dataservice 4.9.0 (2026-11-22)\n" {
			t.Fatalf("%v: exit %d, %q", args, code, out)
		}
	}
}

// TestFlagsBeforeOrAfterTheCommand: the settings flags work on either side.
func TestFlagsBeforeOrAfterTheCommand(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	other := filepath.Join(t.TempDir(), "other.db")
	migrateDB(t, env, "--db", other)
	if code, _, stderr := runCLI(t, env, "--db", other, "apikey", "create", "k1", "--permissions", "p_data_access"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if code, out, _ := runCLI(t, env, "apikey", "list", "--db", other); code != 0 || !strings.Contains(out, "k1\t") {
		t.Fatalf("after: exit %d, %q", code, out)
	}
	if code, out, _ := runCLI(t, env, "--db="+other, "--log-level", "error", "apikey", "list"); code != 0 || !strings.Contains(out, "k1\t") {
		t.Fatalf("before: exit %d, %q", code, out)
	}
	if _, err := os.Stat(env["SERVICE_DB"]); !os.IsNotExist(err) {
		t.Fatalf("SERVICE_DB was used although --db was given")
	}
}

// TestAPIKeyPermissionNames: unknown permission names are refused with the closest
// name; a key without permissions is created with a warning.
func TestAPIKeyPermissionNames(t *testing.T) {
	t.Parallel()
	env := migratedEnv(t)
	code, out, stderr := runCLI(t, env, "apikey", "create", "x", "--permissions", "p_data_access,p_pipline_run")
	if code != 1 || out != "" || !strings.Contains(stderr, `unknown permission "p_pipline_run"; did you mean "p_pipeline_run"?`) {
		t.Fatalf("exit %d, %q %q", code, out, stderr)
	}
	if code, _, stderr = runCLI(t, env, "apikey", "create", "x", "--permissions", "role:nosuch"); code != 1 || !strings.Contains(stderr, `unknown role "nosuch"`) {
		t.Fatalf("role: exit %d, %q", code, stderr)
	}
	if _, out, _ = runCLI(t, env, "apikey", "list"); strings.Contains(out, "x\t") {
		t.Fatalf("a refused key was created: %q", out)
	}
	code, out, stderr = runCLI(t, env, "apikey", "create", "y")
	if code != 0 || !strings.HasPrefix(out, "y:") || !strings.Contains(stderr, "warning: the key has no permissions") {
		t.Fatalf("no permissions: exit %d, %q %q", code, out, stderr)
	}
	if code, _, stderr = runCLI(t, env, "apikey", "create", "z", "--permissions", "!p_data_delete,role:role_admin"); code != 0 || strings.Contains(stderr, "warning") {
		t.Fatalf("negation and role: exit %d, %q", code, stderr)
	}
}

// TestDatabasePathProblems: a missing path under migrate --status creates nothing; a
// missing directory and a directory given as the file are named.
func TestDatabasePathProblems(t *testing.T) {
	testkit.SQLiteOnly(t, "a missing directory, a directory as the database and file permissions are a file's")
	t.Parallel()
	env := testEnv(t)
	code, out, _ := runCLI(t, env, "migrate", "--status")
	if code != 0 || !strings.Contains(out, "no database at") || !strings.Contains(out, "pending: bootstrap") {
		t.Fatalf("exit %d, %q", code, out)
	}
	entries, _ := os.ReadDir(filepath.Dir(env["SERVICE_DB"]))
	if len(entries) != 0 {
		t.Fatalf("migrate --status created %d files", len(entries))
	}
	// migrate would create the file: the missing directory is named. A command that
	// opens the database as it is says there is no database there.
	env["SERVICE_DB"] = filepath.Join(t.TempDir(), "nodir", "x.db")
	if code, _, stderr := runCLI(t, env, "migrate"); code != 1 || !strings.Contains(stderr, "does not exist (create it first)") {
		t.Fatalf("missing directory: exit %d, %q", code, stderr)
	}
	if code, _, stderr := runCLI(t, env, "apikey", "list"); code != 1 || !strings.Contains(stderr, "no database at "+env["SERVICE_DB"]) {
		t.Fatalf("missing directory, apikey list: exit %d, %q", code, stderr)
	}
	env["SERVICE_DB"] = t.TempDir()
	if code, _, stderr := runCLI(t, env, "migrate"); code != 1 || !strings.Contains(stderr, "is a directory") {
		t.Fatalf("directory: exit %d, %q", code, stderr)
	}
}

// TestReadOnlyDatabaseReads: a database file this user may not write is read (export,
// list commands, migrate --status) without the start-up sequence, and commands that
// write name the problem. As root (who may write any file) the commands run in a
// child process as uid/gid 65534.
func TestReadOnlyDatabaseReads(t *testing.T) {
	testkit.SQLiteOnly(t, "a database file this user may read but not write is a file's mode")
	t.Parallel()
	env := migratedEnv(t)
	if code, _, stderr := runCLI(t, env, "load", examplesDir); code != 0 {
		t.Fatalf("load: %s", stderr)
	}
	dir := filepath.Dir(env["SERVICE_DB"])
	before, err := os.ReadFile(env["SERVICE_DB"])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(env["SERVICE_DB"], 0o444); err != nil {
		t.Fatal(err)
	}
	runAs := func(args ...string) (int, string, string) {
		if os.Geteuid() != 0 {
			return runCLI(t, env, args...)
		}
		// The child must reach the file: open the directories on the way for reading.
		for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(dir, "dataservice.test")
		data, err := os.ReadFile(exe)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, append([]string{"-test.run=^$", "--"}, args...)...)
		cmd.Env = []string{"DATASERVICE_TEST_MAIN=1", "SERVICE_DB=" + env["SERVICE_DB"], "SERVICE_LOG_LEVEL=warn",
			"SERVICE_ADMIN_PASSWORD=" + env["SERVICE_ADMIN_PASSWORD"]}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err = cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errb.String()
	}
	for _, args := range [][]string{{"export", "--schema", "site"}, {"migrate", "--status"}, {"apikey", "list"},
		{"pipeline", "list"}, {"permission", "list"}, {"user", "list"}, {"task", "list"}} {
		code, out, stderr := runAs(args...)
		warned := strings.Contains(stderr, "database file is read-only") || args[0] == "migrate" // runs no start-up
		if code != 0 || (out == "" && args[0] != "task") || !warned {
			t.Fatalf("%v: exit %d, %q %q", args, code, out, stderr)
		}
	}
	code, _, stderr := runAs("apikey", "create", "k", "--permissions", "p_data_access")
	if code != 1 || !strings.Contains(stderr, "permission denied: the file is read-only for this user") {
		t.Fatalf("write on a read-only file: exit %d, %q", code, stderr)
	}
	after, _ := os.ReadFile(env["SERVICE_DB"])
	if string(before) != string(after) {
		t.Fatal("the read-only database file changed")
	}
}
