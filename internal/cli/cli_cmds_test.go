package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTaskCommands: a run whose instances all fail exits 3 with the errors first; task
// list, show, wait and cancel see it; a queued task is cancelled at once.
func TestTaskCommands(t *testing.T) {
	t.Parallel()
	env := migratedEnv(t)
	if code, _, stderr := runCLI(t, env, "load", examplesDir); code != 0 {
		t.Fatalf("load: %s", stderr)
	}
	file := filepath.Join(t.TempDir(), "p.yml")
	doc := "- classname: _pipeline\n  keyname: break_hostnames\n  content: |\n    - field_set: ['', _x, abc]\n    - field_toint: ['', _x]\n"
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, env, "load", file); code != 0 {
		t.Fatalf("load pipeline: %s", stderr)
	}
	code, out, stderr := runCLI(t, env, "pipeline", "run", "break_hostnames", "--schema", "site", "--wait")
	if code != 3 {
		t.Fatalf("exit %d, want 3 (succeeded with errors): %s %s", code, out, stderr)
	}
	handle := regexp.MustCompile(`task (\S+) submitted`).FindStringSubmatch(out)
	if handle == nil {
		t.Fatalf("no handle in %q", out)
	}
	summary := out[strings.Index(out, "task "+handle[1]+" succeeded"):]
	lines := strings.Split(strings.TrimSpace(summary), "\n")
	if lines[0] != "task "+handle[1]+" succeeded with 4 errors" || !strings.HasPrefix(lines[1], "error: ") ||
		!strings.HasPrefix(lines[len(lines)-1], "errors 4, scanned 4, updated 0") {
		t.Fatalf("summary does not put the errors first:\n%s", summary)
	}
	if strings.Contains(out, "0/0") {
		t.Fatalf("progress started at 0/0: %q", out)
	}

	if code, out, _ = runCLI(t, env, "task", "list"); code != 0 || !strings.Contains(out, handle[1]+"\tsucceeded\t4\t4/4\tbreak_hostnames\tsite") {
		t.Fatalf("task list: exit %d, %q", code, out)
	}
	if code, out, _ = runCLI(t, env, "task", "show", handle[1]); code != 0 || !strings.HasPrefix(out, "task "+handle[1]+" succeeded with 4 errors\nerror: ") {
		t.Fatalf("task show: exit %d, %q", code, out)
	}
	if code, out, _ = runCLI(t, env, "task", "wait", handle[1]); code != 3 {
		t.Fatalf("task wait on a finished task with errors: exit %d, %q", code, out)
	}
	if code, _, stderr = runCLI(t, env, "task", "cancel", handle[1]); code != 1 || !strings.Contains(stderr, "already finished: succeeded") {
		t.Fatalf("cancel finished: exit %d, %q", code, stderr)
	}
	if code, _, stderr = runCLI(t, env, "task", "show", "nosuch"); code != 1 || !strings.Contains(stderr, "task not found") {
		t.Fatalf("show missing: exit %d, %q", code, stderr)
	}

	code, out, _ = runCLI(t, env, "pipeline", "run", "bulk_delete_disabled", "--schema", "server")
	queued := regexp.MustCompile(`task (\S+) submitted`).FindStringSubmatch(out)
	if code != 0 || queued == nil {
		t.Fatalf("submit: exit %d, %q", code, out)
	}
	if code, out, _ = runCLI(t, env, "task", "list", "--status", "queued"); code != 0 || !strings.Contains(out, queued[1]+"\tqueued") {
		t.Fatalf("queued list: %d %q", code, out)
	}
	if code, out, _ = runCLI(t, env, "task", "cancel", queued[1]); code != 0 || out != "task "+queued[1]+" cancelled\n" {
		t.Fatalf("cancel: exit %d, %q", code, out)
	}
	if code, out, _ = runCLI(t, env, "task", "wait", queued[1]); code != 1 || !strings.Contains(out, "task "+queued[1]+" cancelled") {
		t.Fatalf("wait on a cancelled task: exit %d, %q", code, out)
	}
}

// TestUserAndPermissionCommands: user add/list/passwd/disable, with the password read
// from a file or stdin, and permission list.
func TestUserAndPermissionCommands(t *testing.T) {
	t.Parallel()
	env := migratedEnv(t)
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("Correct-Horse-1\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(t, env, "user", "add", "alice", "--email", "alice@example.org", "--firstname", "Alice",
		"--password-file", pw)
	if code != 0 || out != "user alice created\n" {
		t.Fatalf("add: exit %d, %q %q", code, out, stderr)
	}
	if code, _, stderr = runCLI(t, env, "user", "add", "alice", "--no-password"); code != 1 || !strings.Contains(stderr, "already exists") {
		t.Fatalf("add twice: exit %d, %q", code, stderr)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, nil, 0o600)
	if code, _, stderr = runCLI(t, env, "user", "add", "bob", "--password-file", empty); code != 1 || !strings.Contains(stderr, "empty password") {
		t.Fatalf("empty password: exit %d, %q", code, stderr)
	}
	if code, out, _ = runCLI(t, env, "user", "list"); code != 0 || !strings.Contains(out, "alice\tenabled\temail=alice@example.org\tname=Alice\n") ||
		strings.Contains(out, "Correct-Horse") || strings.Contains(out, "bob") {
		t.Fatalf("list: exit %d, %q", code, out)
	}
	db := openStore(t, env["SERVICE_DB"])
	u, err := db.Instance(t.Context(), "_user", "alice")
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	hash, _ := u.Data["password"].(string)
	if !strings.HasPrefix(hash, "$argon2id$") {
		t.Fatalf("password stored as %q", hash)
	}
	if err := os.WriteFile(pw, []byte("Other-Pass-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, _ = runCLI(t, env, "user", "passwd", "alice", "--password-file", pw); code != 0 || out != "password of alice set\n" {
		t.Fatalf("passwd: exit %d, %q", code, out)
	}
	db = openStore(t, env["SERVICE_DB"])
	u, _ = db.Instance(t.Context(), "_user", "alice")
	db.Close()
	if u.Data["password"] == hash {
		t.Fatal("passwd did not change the hash")
	}
	if code, _, stderr = runCLI(t, env, "user", "passwd", "admin", "--password-file", pw); code != 1 || !strings.Contains(stderr, "SERVICE_ADMIN_PASSWORD") {
		t.Fatalf("passwd admin: exit %d, %q", code, stderr)
	}
	if code, _, stderr = runCLI(t, env, "user", "passwd", "nobody", "--password-file", pw); code != 1 || !strings.Contains(stderr, `user "nobody" not found`) {
		t.Fatalf("passwd nobody: exit %d, %q", code, stderr)
	}
	if code, out, _ = runCLI(t, env, "user", "disable", "alice"); code != 0 || out != "user alice disabled\n" {
		t.Fatalf("disable: exit %d, %q", code, out)
	}
	if _, out, _ = runCLI(t, env, "user", "list"); !strings.Contains(out, "alice\tdisabled\t") {
		t.Fatalf("list after disable: %q", out)
	}
	if code, out, _ = runCLI(t, env, "user", "disable", "alice", "--enable"); code != 0 || out != "user alice enabled\n" {
		t.Fatalf("enable: exit %d, %q", code, out)
	}

	code, out, _ = runCLI(t, env, "permission", "list")
	if code != 0 {
		t.Fatalf("permission list: exit %d", code)
	}
	for _, want := range []string{"p_pipeline_run", "p_data_update", "p_apikey_admin", "p_user_import"} {
		if !regexp.MustCompile(`(?m)^` + want + ` +built-in +\S`).MatchString(out) {
			t.Fatalf("permission list lacks %s with what it gates:\n%s", want, out)
		}
	}
}

// TestPipelineRunWaitInterrupt: an interrupt (the context ends, as on the first
// Ctrl-C) while waiting cancels the task, says so, and exits 1; the task is cancelled,
// not left queued for the next serve.
func TestPipelineRunWaitInterrupt(t *testing.T) {
	t.Parallel()
	env := migratedEnv(t)
	// Several batches of 1000, so the task cannot finish before the interrupt lands.
	var doc strings.Builder
	doc.WriteString("- {classname: _schema, keyname: vm, ram: {dataformat: int}}\n")
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&doc, "- {classname: vm, keyname: vm%04d, ram: %d, is_enabled: %v}\n", i, i, i%2 == 0)
	}
	file := filepath.Join(t.TempDir(), "vm.yml")
	if err := os.WriteFile(file, []byte(doc.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, env, "load", file); code != 0 {
		t.Fatalf("load: %s", stderr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &interruptWriter{cancel: cancel}
	var errb bytes.Buffer
	code := Run(ctx, []string{"pipeline", "run", "bulk_delete_disabled", "--schema", "vm", "--wait"}, envOf(env), nil, out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "interrupted: cancelling task") {
		t.Fatalf("exit %d: %s %s", code, out.String(), errb.String())
	}
	handle := regexp.MustCompile(`task (\S+) submitted`).FindStringSubmatch(out.String())
	if handle == nil || !strings.Contains(out.String(), "task "+handle[1]+" cancelled") {
		t.Fatalf("output %q", out.String())
	}
	if _, got, _ := runCLI(t, env, "task", "list", "--status", "queued"); strings.Contains(got, handle[1]) {
		t.Fatalf("the task is still queued: %q", got)
	}
}

// interruptWriter cancels its context once "submitted" is written: the interrupt
// arrives while the command waits for its task.
type interruptWriter struct {
	bytes.Buffer
	cancel func()
}

func (w *interruptWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(" submitted")) {
		w.cancel()
	}
	return w.Buffer.Write(p)
}
