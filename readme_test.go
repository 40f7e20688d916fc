package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// quickStartBlocks returns the ```sh blocks of README.md from "## Quick start" to the
// next second-level heading: the test runs exactly what the reader pastes.
func quickStartBlocks(t *testing.T, readme string) []string {
	t.Helper()
	start := strings.Index(readme, "\n## Quick start\n")
	if start < 0 {
		t.Fatal(`README.md has no "## Quick start" section`)
	}
	section := readme[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)\n```sh\n(.*?)\n```\n").FindAllStringSubmatch(section, -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) < 2 {
		t.Fatalf("quick start has %d shell blocks", len(blocks))
	}
	return blocks
}

// TestREADMEStartsWithTwoCommands: the README opens with exactly the command that runs
// the service on its defaults and the command that runs the tests.
func TestREADMEStartsWithTwoCommands(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)^# dataservice\n\n```sh\n(.*?)\n```\n").FindStringSubmatch(string(b))
	if m == nil {
		t.Fatal("README.md does not start with a shell block")
	}
	lines := strings.Split(m[1], "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "go run . serve") || lines[1] != "go test ./..." {
		t.Fatalf("first block %q, want the serve command and go test ./...", m[1])
	}
	quickStartBlocks(t, string(b))
}

// TestREADMEQuickStartMigratesFirst: only serve and migrate create the database, so
// the quick start's first dataservice command is "./dataservice migrate".
func TestREADMEQuickStartMigratesFirst(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range quickStartBlocks(t, string(b)) {
		for _, line := range strings.Split(block, "\n") {
			if strings.HasPrefix(line, "./dataservice ") {
				if cmd, _, _ := strings.Cut(line, "#"); strings.TrimSpace(cmd) != "./dataservice migrate" {
					t.Fatalf("the quick start's first dataservice command is %q, want ./dataservice migrate", line)
				}
				return
			}
		}
	}
	t.Fatal("the quick start runs no ./dataservice command")
}

// TestREADMEQuickStart clones the repository (its committed HEAD) into a temp dir and
// runs every shell block of the quick start there, in order, in one bash, as pasted
// (with "set -e" so any failing command fails the test). It builds the binary and
// starts a server, so it runs only when DATASERVICE_README_TEST=1 (.ci/run sets it).
func TestREADMEQuickStart(t *testing.T) {
	if os.Getenv("DATASERVICE_README_TEST") != "1" {
		t.Skip("skipped: set DATASERVICE_README_TEST=1 to clone, build and run the README quick start (.ci/run does)")
	}
	for _, tool := range []string{"git", "bash", "curl", "sed", "grep"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the quick start needs %s: %v", tool, err)
		}
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("not in a git checkout: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "clone")
	if out, err := exec.Command("git", "clone", "--quiet", strings.TrimSpace(string(top)), dir).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	cloned, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(cloned) != string(readme) {
		t.Fatal("README.md differs from the committed one: commit it first (the test runs the clone)")
	}
	blocks := quickStartBlocks(t, string(cloned))
	script := "set -e\n" + strings.Join(blocks, "\n") + "\n"

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SERVICE_") && !strings.HasPrefix(kv, "PORT=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "PORT="+strconv.Itoa(port))
	out, err := cmd.CombinedOutput()
	t.Logf("quick start output:\n%s", out)
	if err != nil {
		t.Fatalf("the quick start failed: %v", err)
	}
	for _, want := range []string{
		"DB_VERSION 4.9.0 (SERVICE_VERSION 4.9.0)", // migrate, first
		"created 307,",                  // load examples/
		"keyname: site",                 // export --schema site
		"pending: none",                 // migrate --status after the load
		"p_pipeline_run",                // permission list
		`"keyname":"normalize_servers"`, // GET /api/pipelines/
		"precondition failed: server",   // PATCH with a stale If-Match
		`"hostname":"replaced.example"`, // the PUT's reply
		`"status":"succeeded"`,          // the task detail after the poll
		"msg=stopped",                   // the server stopped cleanly
	} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("the quick start output lacks %q", want)
		}
	}
	if strings.Contains(string(out), `"errors":`) && regexp.MustCompile(`"errors":[1-9]`).Match(out) {
		t.Fatalf("the quick start's task had errors")
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
		c.Close()
		t.Fatal("the server the quick start started is still listening")
	}
}
