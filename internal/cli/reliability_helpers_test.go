package cli

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// TestMain lets a test start the real program as a child process: with
// DATASERVICE_TEST_MAIN=1 the test binary runs Run() on the arguments after "--"
// (exec.Command(os.Args[0], "-test.run=^$", "--", "serve")), so a test can SIGKILL it.
func TestMain(m *testing.M) {
	if os.Getenv("DATASERVICE_TEST_MAIN") != "1" {
		os.Exit(m.Run())
	}
	// DATASERVICE_TEST_HOLD makes each item of the child's batched writers take that
	// much longer (store.SetTestHold), so a test gets long operations from little data.
	if v := os.Getenv("DATASERVICE_TEST_HOLD"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			fmt.Fprintln(os.Stderr, "DATASERVICE_TEST_HOLD:", err)
			os.Exit(2)
		}
		store.SetTestHold(d)
	}
	args := os.Args[1:]
	for i, a := range args {
		if a == "--" {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			code := Run(ctx, args[i+1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
			stop()
			os.Exit(code)
		}
	}
	fmt.Fprintln(os.Stderr, "DATASERVICE_TEST_MAIN=1 needs the program's arguments after --")
	os.Exit(2)
}

// reliabilitySeed is the seed of a test's random moments: RELIABILITY_SEED when set,
// else a fixed value, so a failing run can be replayed. It is logged.
func reliabilitySeed(t *testing.T, def uint64) *rand.Rand {
	t.Helper()
	seed := testkit.Seed(t, "RELIABILITY_SEED", def)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// child is the real program running as a child process.
type child struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	out  *testkit.Buffer
	done chan struct{}
	code int
}

// childDirs holds each test's working directory for its child processes.
var childDirs sync.Map

// childDir is the working directory of the test's child processes, one per test:
// what they write there (on PostgreSQL, the backup before migrating) stays out of
// the source tree and is found by the test.
func childDir(t *testing.T) string {
	if d, ok := childDirs.Load(t); ok {
		return d.(string)
	}
	d := t.TempDir()
	childDirs.Store(t, d)
	t.Cleanup(func() { childDirs.Delete(t) })
	return d
}

// startChild starts the test binary as the program with args, the settings of env
// (and no SERVICE_* variable of the test's own environment). It is killed, if still
// running, when the test ends.
func startChild(t *testing.T, env map[string]string, args ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SERVICE_") && !strings.HasPrefix(kv, "DATASERVICE_TEST_MAIN=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "DATASERVICE_TEST_MAIN=1")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Dir = childDir(t)
	c := &child{t: t, name: strings.Join(args, " "), cmd: cmd, out: &testkit.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", c.name, err)
	}
	go func() {
		err := cmd.Wait()
		c.code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			c.code = ee.ExitCode()
		} else if err != nil {
			c.code = -1
		}
		close(c.done)
	}()
	t.Cleanup(func() {
		if !c.exited() {
			c.kill()
		}
	})
	return c
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (c *child) kill() {
	c.t.Helper()
	if c.exited() {
		return
	}
	c.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		c.t.Fatalf("%s: still running 20s after SIGKILL", c.name)
	}
}

// wait waits for the process to exit by itself and returns its exit status.
func (c *child) wait(timeout time.Duration) int {
	c.t.Helper()
	select {
	case <-c.done:
		return c.code
	case <-time.After(timeout):
		c.kill()
		c.t.Fatalf("%s: did not exit within %v; output:\n%s", c.name, timeout, tail(c.out.String()))
		return -1
	}
}

// stop sends SIGTERM and expects a clean exit.
func (c *child) stop() {
	c.t.Helper()
	c.cmd.Process.Signal(syscall.SIGTERM)
	if code := c.wait(30 * time.Second); code != 0 {
		c.t.Fatalf("%s: exit %d after SIGTERM; output:\n%s", c.name, code, tail(c.out.String()))
	}
}

// tail is the end of a process's output, for failure messages.
func tail(s string) string {
	const max = 4000
	if len(s) > max {
		return "..." + s[len(s)-max:]
	}
	return s
}

var listenRE = regexp.MustCompile(`msg=listening addr=(127\.0\.0\.1:\d+)`)

// baseURL waits until a serving process logs its address and answers /readyz.
func (c *child) baseURL() string {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	base := ""
	for {
		if time.Now().After(deadline) || c.exited() {
			c.t.Fatalf("%s: not ready (exited %v); output:\n%s", c.name, c.exited(), tail(c.out.String()))
		}
		if base == "" {
			if m := listenRE.FindStringSubmatch(c.out.String()); m != nil {
				base = "http://" + m[1]
			}
		}
		if base != "" && ready(base) {
			return base
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ready(base string) bool {
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// reliabilityEnv is the settings of a test's processes: a new file, the admin password,
// info logs (the address is read from them), no backups, listening on 127.0.0.1:0.
func reliabilityEnv(t *testing.T) map[string]string {
	return map[string]string{
		"SERVICE_DB":             testkit.NewAddress(t, "reliability.db"),
		"SERVICE_ADMIN_PASSWORD": "s3cret-admin",
		"SERVICE_LOG_LEVEL":      "info",
		"SERVICE_LISTEN":         "127.0.0.1:0",
		"SERVICE_BACKUP":         "off",
	}
}

// apiClient makes authenticated requests as admin.
type apiClient struct {
	base string
	hc   *http.Client
}

func newAPIClient(base string) *apiClient {
	return &apiClient{base: base, hc: &http.Client{Timeout: 60 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
}

// do sends one request and returns the status and body.
func (a *apiClient) do(method, path, contentType string, body io.Reader) (int, []byte, error) {
	req, err := http.NewRequest(method, a.base+path, body)
	if err != nil {
		return 0, nil, err
	}
	req.SetBasicAuth("admin", "s3cret-admin")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// json sends one request that must succeed with status want, decoding the reply into out.
func (a *apiClient) json(t *testing.T, method, path, body string, want int, out any) {
	t.Helper()
	code, b, err := a.do(method, path, "", strings.NewReader(body))
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if code != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, code, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

// taskReply is the part of GET /api/tasks/<handle>/ the tests read.
type taskReply struct {
	Handle   string `json:"handle"`
	Status   string `json:"status"`
	Progress struct {
		Total int64 `json:"total"`
		Done  int64 `json:"done"`
	} `json:"progress"`
	Result *struct {
		Scanned   int64 `json:"scanned"`
		Updated   int64 `json:"updated"`
		Unchanged int64 `json:"unchanged"`
		Errors    int64 `json:"errors"`
	} `json:"result"`
	Error *string `json:"error"`
}

func finalStatus(s string) bool { return s == "succeeded" || s == "failed" || s == "cancelled" }

// openStore opens the file in the test process (only while no child runs).
var openStore = testkit.OpenFile

// dbReader is a read-only pool on a database, usable while a child writes: queries
// are written with ? placeholders on both engines (store.Reader's), and it has the
// short QueryRow and Query of a *sql.DB.
type dbReader struct {
	store.Reader
	close    func() error
	postgres bool
}

func (r dbReader) QueryRow(query string, args ...any) *sql.Row {
	return r.QueryRowContext(context.Background(), query, args...)
}

func (r dbReader) Query(query string, args ...any) (*sql.Rows, error) {
	return r.QueryContext(context.Background(), query, args...)
}

func (r dbReader) Close() error { return r.close() }

// openReader opens a read-only pool on the database, usable while a child writes:
// on SQLite a query-only connection pool on the file (it waits for the writer and
// takes no lock of the store's); on PostgreSQL the store opened read-only, whose
// Reader binds the ? placeholders (its table layout must be current).
func openReader(t *testing.T, path string) dbReader {
	t.Helper()
	if !store.IsFileAddr(path) {
		db, err := store.Open(context.Background(), path, store.Options{ReadOnly: true, ReadConns: 2})
		if err != nil {
			t.Fatalf("open %s read-only: %v", store.RedactURL(path), err)
		}
		t.Cleanup(func() { db.Close() })
		return dbReader{Reader: db.Reader(), close: db.Close, postgres: true}
	}
	r, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return dbReader{Reader: r, close: r.Close}
}

// checkIntegrity fails the test unless SQLite's integrity_check passes on the file.
// A PostgreSQL database is no file of the test's: its server's own write-ahead log
// keeps what a killed client wrote whole or absent, which the tests' row checks show.
func checkIntegrity(t *testing.T, r dbReader, what string) {
	t.Helper()
	if r.postgres {
		return
	}
	if ok := queryText(t, r, "PRAGMA integrity_check"); ok != "ok" {
		t.Fatalf("%s: integrity_check: %s", what, ok)
	}
}

// checkSearchIndex fails the test unless the search index matches the instances
// (testkit.CheckSearchIndex) on SQLite, where the store maintains it. On PostgreSQL
// the engine maintains the trigram index in every write: no index of instances may
// be left invalid.
func checkSearchIndex(t *testing.T, r dbReader, path, round string) {
	t.Helper()
	if !r.postgres {
		testkit.CheckSearchIndex(t, path, round)
		return
	}
	if n := queryInt(t, r, "SELECT count(*) FROM pg_index WHERE indrelid = CAST('instances' AS regclass) AND NOT indisvalid"); n != 0 {
		t.Fatalf("%s: %d invalid indexes on instances", round, n)
	}
	if n := queryInt(t, r, "SELECT count(*) FROM pg_indexes WHERE tablename = 'instances' AND indexdef LIKE '%gin%'"); n == 0 {
		t.Fatalf("%s: no trigram (GIN) index on instances", round)
	}
}

// queryInt runs a query returning one integer.
func queryInt(t *testing.T, r store.Reader, query string, args ...any) int64 {
	t.Helper()
	return int64(testkit.QueryInt(t, testkit.Pool(r), query, args...))
}

// queryText runs a query returning one text value ("" when there is no row).
func queryText(t *testing.T, q interface {
	QueryRow(string, ...any) *sql.Row
}, query string, args ...any) string {
	t.Helper()
	var s string
	err := q.QueryRow(query, args...).Scan(&s)
	if err == sql.ErrNoRows {
		return ""
	}
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return s
}

// loadDoc loads a YAML document with the CLI in-process (the file is written to a temporary directory).
func loadDoc(t *testing.T, env map[string]string, doc string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "doc.yml")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, stderr := runCLI(t, quiet(env), "load", file); code != 0 {
		t.Fatalf("load: exit %d: %s %s", code, out, stderr)
	}
}

// quiet is env with warning-level logs, for in-process commands.
func quiet(env map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		out[k] = v
	}
	out["SERVICE_LOG_LEVEL"] = "warn"
	return out
}

// insertInstances inserts n instances of cls with SQL in one transaction (keynames
// prefix0..prefixN-1, data from dataOf), bypassing validation for speed.
func insertInstances(t *testing.T, db *store.DB, cls, prefix string, n int, dataOf func(i int) map[string]any) {
	t.Helper()
	rows := make([]testkit.Row, n)
	for i := range rows {
		key := fmt.Sprintf("%s%d", prefix, i)
		rows[i] = testkit.Row{Keyname: key, Displayname: key, Enabled: true, Data: dataOf(i)}
	}
	testkit.InsertInstances(t, db, cls, rows)
}

// checkPipelineCommitted checks a killed run: the task is still running (it resumes
// after its lease), and exactly the instances its committed progress counts carry
// the marker and one revision, the others none.
func checkPipelineCommitted(t *testing.T, path, handle string, total int64) int64 {
	t.Helper()
	r := openReader(t, path)
	defer r.Close()
	var status, cp string
	var done int64
	if err := r.QueryRow("SELECT status, progress_done, checkpoint FROM tasks WHERE handle = ?", handle).
		Scan(&status, &done, &cp); err != nil {
		t.Fatal(err)
	}
	if status != "running" || done <= 0 || done >= total {
		t.Fatalf("after the kill: task %s with %d of %d done; want running, part done", status, done, total)
	}
	marked := queryInt(t, r, `SELECT count(*) FROM instances WHERE classname = 'crashbox' AND data ->> 'note' = 'X'`)
	empty := queryInt(t, r, `SELECT count(*) FROM instances WHERE classname = 'crashbox' AND data ->> 'note' = ''`)
	if marked != done || empty != total-done {
		t.Fatalf("after the kill: progress_done %d, but %d instances marked and %d untouched (%s)", done, marked, empty,
			noteCounts(t, r))
	}
	var checkpoint struct {
		After int64 `json:"after"`
	}
	if err := json.Unmarshal([]byte(cp), &checkpoint); err != nil {
		t.Fatalf("checkpoint %q: %v", cp, err)
	}
	if got := queryInt(t, r, `SELECT count(*) FROM instances WHERE classname = 'crashbox' AND id <= ?
		AND data ->> 'note' = 'X'`, checkpoint.After); got != done {
		t.Fatalf("checkpoint %s: %d marked instances up to it, want %d", cp, got, done)
	}
	if got := queryInt(t, r, "SELECT count(*) FROM revisions WHERE author = ?", "task:"+handle); got != done {
		t.Fatalf("after the kill: %d revisions of the task, want %d", got, done)
	}
	checkSearchIndex(t, r, path, "after the pipeline was killed")
	return done
}

// noteCounts describes the distinct note values, for failure messages.
func noteCounts(t *testing.T, r dbReader) string {
	t.Helper()
	rows, err := r.Query(`SELECT coalesce(data ->> 'note', '(absent)'), count(*) FROM instances
		WHERE classname = 'crashbox' GROUP BY 1 ORDER BY 2 DESC LIMIT 5`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var v string
		var n int64
		if err := rows.Scan(&v, &n); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, fmt.Sprintf("%q: %d", v, n))
	}
	return strings.Join(parts, ", ")
}

// waitTask polls a task until it succeeds.
func waitTask(t *testing.T, api *apiClient, handle string, timeout time.Duration) taskReply {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var tr taskReply
		api.json(t, "GET", "/api/tasks/"+handle+"/", "", 200, &tr)
		switch {
		case tr.Status == "succeeded":
			return tr
		case finalStatus(tr.Status):
			t.Fatalf("task %s ended %s: %v", handle, tr.Status, tr.Error)
		case time.Now().After(deadline):
			t.Fatalf("task %s still %s after %v (%d/%d)", handle, tr.Status, timeout, tr.Progress.Done, tr.Progress.Total)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkLoaded checks that the lbox instances and their revisions match one for one,
// every instance complete, and returns how many there are.
func checkLoaded(t *testing.T, path string, entries int64) int64 {
	t.Helper()
	r := openReader(t, path)
	defer r.Close()
	n := queryInt(t, r, "SELECT count(*) FROM instances WHERE classname = 'lbox'")
	for _, c := range []struct {
		what, query string
		want        int64
	}{
		{"instances without their create revision", `SELECT count(*) FROM instances i WHERE classname = 'lbox'
			AND NOT EXISTS (SELECT 1 FROM revisions r WHERE r.classname = 'lbox' AND r.keyname = i.keyname AND r.action = 'create')`, 0},
		{"revisions without their instance", `SELECT count(*) FROM revisions r WHERE classname = 'lbox'
			AND NOT EXISTS (SELECT 1 FROM instances i WHERE i.classname = 'lbox' AND i.keyname = r.keyname)`, 0},
		{"revisions", "SELECT count(*) FROM revisions WHERE classname = 'lbox'", n},
		{"complete instances", `SELECT count(*) FROM instances WHERE classname = 'lbox'
			AND 'l' || (data ->> 'size') = keyname AND 'n' || (data ->> 'size') = data ->> 'note'`, n},
	} {
		if got := queryInt(t, r, c.query); got != c.want {
			t.Fatalf("%d entries loaded: %s = %d, want %d", n, c.what, got, c.want)
		}
	}
	checkIntegrity(t, r, "after the load was killed")
	checkSearchIndex(t, r, path, "after the load was killed")
	if n == 0 || n > entries {
		t.Fatalf("%d entries loaded, want some of %d", n, entries)
	}
	return n
}

// tableCounts renders the row counts of the data tables.
func tableCounts(t *testing.T, path string) string {
	t.Helper()
	r := openReader(t, path)
	defer r.Close()
	var parts []string
	for _, table := range []string{"registry", "configuration", "schemas", "schema_fields", "instances", "permissions", "revisions"} {
		parts = append(parts, fmt.Sprintf("%s=%d", table, queryInt(t, r, "SELECT count(*) FROM "+table)))
	}
	return strings.Join(parts, " ")
}
