package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// repoRoot is the repository's top directory, seen from this package's directory
// (where go test runs its tests): the example files and the compat files beside the
// checkout are found from it.
const repoRoot = "../.."

// examplesDir holds the example load files of the README.
var examplesDir = filepath.Join(repoRoot, "examples")

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// runCLI runs one command to completion.
func runCLI(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, envOf(env), nil, &out, &errb)
	return code, out.String(), errb.String()
}

func testEnv(t *testing.T) map[string]string {
	return map[string]string{
		"SERVICE_DB":             testkit.NewAddress(t, "test.db"),
		"SERVICE_ADMIN_PASSWORD": "s3cret-admin",
		"SERVICE_LOG_LEVEL":      "warn",
	}
}

// migratedEnv is testEnv with its database created by "dataservice migrate", the way
// an operator starts: every command other than serve and migrate opens an existing
// database only.
func migratedEnv(t *testing.T) map[string]string {
	t.Helper()
	env := testEnv(t)
	migrateDB(t, env)
	return env
}

// migrateDB runs "dataservice migrate" with env.
func migrateDB(t *testing.T, env map[string]string, args ...string) {
	t.Helper()
	if code, _, stderr := runCLI(t, env, append([]string{"migrate"}, args...)...); code != 0 {
		t.Fatalf("migrate: exit %d: %s", code, stderr)
	}
}

func TestSettingsErrorsNameTheVariable(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	env["SERVICE_WORKERS"] = "zero"
	env["SERVICE_LOG_FORMAT"] = "xml"
	code, _, stderr := runCLI(t, env, "migrate")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	for _, want := range []string{"SERVICE_WORKERS", "SERVICE_LOG_FORMAT"} {
		if !strings.Contains(stderr, want) {
			t.Fatalf("stderr %q does not name %s", stderr, want)
		}
	}
	if _, err := os.Stat(env["SERVICE_DB"]); !os.IsNotExist(err) {
		t.Fatalf("database created despite invalid settings (stat err %v)", err)
	}
}

func TestLoadExportRoundTrip(t *testing.T) {
	t.Parallel()
	env := migratedEnv(t)
	code, out, stderr := runCLI(t, env, "load", examplesDir)
	if code != 0 {
		t.Fatalf("load exit %d: %s", code, stderr)
	}
	if want := "created 307, updated 0, unchanged 0"; !strings.Contains(out, want) {
		t.Fatalf("load output %q, want %q", out, want)
	}
	code, out, _ = runCLI(t, env, "load", examplesDir)
	if code != 0 || !strings.Contains(out, "created 0, updated 0, unchanged 307") {
		t.Fatalf("second load: exit %d, %q", code, out)
	}
	code, exported, stderr := runCLI(t, env, "export", "--schema", "site,server", "--format", "json")
	if code != 0 {
		t.Fatalf("export exit %d: %s", code, stderr)
	}
	var docs []map[string]any
	if err := json.Unmarshal([]byte(exported), &docs); err != nil {
		t.Fatalf("export is not JSON: %v", err)
	}
	if got, want := len(docs), 2+4+300; got != want {
		t.Fatalf("exported %d objects, want %d", got, want)
	}
	file := filepath.Join(t.TempDir(), "export.json")
	if err := os.WriteFile(file, []byte(exported), 0o600); err != nil {
		t.Fatal(err)
	}
	env2 := migratedEnv(t)
	code, out, stderr = runCLI(t, env2, "load", file)
	if code != 0 || !strings.Contains(out, "created 306,") {
		t.Fatalf("load of export into a new database: exit %d, %q %s", code, out, stderr)
	}
	_, again, _ := runCLI(t, env2, "export", "--schema", "site,server", "--format", "json")
	if again != exported {
		t.Fatalf("export after round trip differs")
	}
}

func TestLoadReportsBadEntriesAndExits1(t *testing.T) {
	t.Parallel()
	env := migratedEnv(t)
	dir := t.TempDir()
	doc := `
- classname: _schema
  keyname: box
  size: {dataformat: int}
- {classname: box, keyname: good, size: 3}
- {classname: box, keyname: bad, size: three}
- {classname: nosuchclass, keyname: x}
`
	files := map[string]string{
		"a.yml": doc,
		"b.yml": "just a scalar\n",
		"c.yml": `
- {keyname: noclass}
- {classname: box}
- {classname: _schema, keyname: crate, weird: {dataformat: colour}}
- {classname: _schema, keyname: shelf, box: {dataformat: schema, dataformat_ext: box}}
- {classname: shelf, keyname: s1, box: missing_box}
- {classname: shelf, keyname: s2, box: good}
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	code, out, stderr := runCLI(t, env, "load", dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if !strings.Contains(out, "created 4,") || !strings.Contains(out, "errors 7") {
		t.Fatalf("counts %q", out)
	}
	for _, want := range []string{`a.yml: entry 3 (box bad): field size: "three" is not an integer`,
		`a.yml: entry 4 (nosuchclass x): unknown class "nosuchclass"`,
		`b.yml: document is not a list of objects`,
		`c.yml: entry 1 ( noclass): entry has no classname`,
		`c.yml: entry 2 (box ): keyname is empty`,
		`c.yml: entry 3 (_schema crate): schema crate: field weird: unknown dataformat "colour"`,
		`c.yml: entry 5 (shelf s1): field box: no box instance "missing_box"`} {
		if !strings.Contains(stderr, want) {
			t.Fatalf("stderr %q lacks %q", stderr, want)
		}
	}
}

func TestAPIKeyCreateListRevoke(t *testing.T) {
	t.Parallel()
	env := migratedEnv(t)
	code, out, stderr := runCLI(t, env, "apikey", "create", "ops", "--permissions", "p_data_access, p_pipeline_run", "--readonly")
	if code != 0 {
		t.Fatalf("create exit %d: %s", code, stderr)
	}
	if !regexp.MustCompile(`^ops:[A-Za-z0-9_-]{43}\n$`).MatchString(out) {
		t.Fatalf("create printed %q, want ops:<43 base64url chars>", out)
	}
	secret := strings.TrimSpace(strings.TrimPrefix(out, "ops:"))
	code, out, _ = runCLI(t, env, "apikey", "list")
	if code != 0 || !strings.Contains(out, "ops\tenabled\tread-only\tsecret set") || strings.Contains(out, secret) {
		t.Fatalf("list: exit %d, %q", code, out)
	}
	if code, _, _ = runCLI(t, env, "apikey", "create", "ops"); code != 1 {
		t.Fatalf("second create of the same key: exit %d, want 1", code)
	}
	if code, out, _ = runCLI(t, env, "apikey", "revoke", "ops"); code != 0 || !strings.Contains(out, "ops revoked") {
		t.Fatalf("revoke: exit %d, %q", code, out)
	}
	if code, _, _ = runCLI(t, env, "apikey", "revoke", "ops"); code != 1 {
		t.Fatalf("revoke of a missing key: exit %d, want 1", code)
	}
}

// migrate --status on a new database reports what the first start runs and changes
// nothing: no file is created at a missing path; an empty PostgreSQL database (which
// has every table layout step pending) gets no table.
func TestMigrateStatusChangesNothing(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	addr := env["SERVICE_DB"]
	want := "pending: bootstrap, 4.4.0, 4.5.0, 4.6.0"
	if testkit.Postgres() {
		want = "pending: table layout steps (layout versions: store 0 of "
	}
	unchanged := func(when string) {
		t.Helper()
		if store.IsFileAddr(addr) {
			if _, err := os.Stat(addr); !os.IsNotExist(err) {
				t.Fatalf("%s: the file exists (stat err %v)", when, err)
			}
		} else if n := tableCount(t, addr); n != 0 {
			t.Fatalf("%s: %d tables in the empty database", when, n)
		}
	}
	for i := 1; i <= 2; i++ {
		code, out, stderr := runCLI(t, env, "migrate", "--status")
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("status %d on a new database: exit %d, %q %s; want %q", i, code, out, stderr, want)
		}
		unchanged(fmt.Sprintf("after status %d", i))
	}
	if code, out, _ := runCLI(t, env, "migrate"); code != 0 || !strings.Contains(out, "DB_VERSION 4.9.0") {
		t.Fatalf("migrate: exit %d, %q", code, out)
	}
	if code, out, _ := runCLI(t, env, "migrate", "--status"); code != 0 || !strings.Contains(out, "pending: none") {
		t.Fatalf("status after migrate: exit %d, %q", code, out)
	}
}

// TestServeEndToEnd runs the real Run() on 127.0.0.1:0, loads data over HTTP, runs
// bulk_delete_disabled, polls task_url to succeeded, checks the instances, then stops
// the server and expects a clean exit.
func TestServeEndToEnd(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	env["SERVICE_LISTEN"] = "127.0.0.1:0"
	env["SERVICE_LOG_LEVEL"] = "info"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr testkit.Buffer
	done := make(chan int, 1)
	go func() { done <- Run(ctx, []string{"serve"}, envOf(env), nil, io.Discard, &stderr) }()

	addrRE := regexp.MustCompile(`msg=listening addr=(127\.0\.0\.1:\d+)`)
	var base string
	deadline := time.Now().Add(20 * time.Second)
	for base == "" {
		if time.Now().After(deadline) {
			t.Fatalf("server did not log its address: %s", stderr.String())
		}
		if m := addrRE.FindStringSubmatch(stderr.String()); m != nil {
			base = "http://" + m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	call := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("admin", "s3cret-admin")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("%s %s: body is not a JSON object: %v", method, path, err)
		}
		return resp.StatusCode, out
	}
	for ready := false; !ready; {
		if time.Now().After(deadline) {
			t.Fatal("never ready")
		}
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			ready = resp.StatusCode == 200
			resp.Body.Close()
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The log names the console's URL and how to sign in, never the password.
	for !strings.Contains(stderr.String(), "msg=console ") {
		if time.Now().After(deadline) {
			t.Fatalf("serve did not log the console's URL: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if log := stderr.String(); !strings.Contains(log, "msg=console url="+base+"/ sign_in=\"sign in as admin with the password SERVICE_ADMIN_PASSWORD holds") ||
		strings.Contains(log, "s3cret-admin") {
		t.Fatalf("the console's log line: %s", log)
	}
	var doc strings.Builder
	doc.WriteString("- {classname: _schema, keyname: vm, ram: {dataformat: int}}\n")
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&doc, "- {classname: vm, keyname: vm%02d, ram: %d, is_enabled: %v}\n", i, i, i%5 != 0)
	}
	code, res := call("POST", "/api/load/", doc.String())
	if code != 200 || res["created"] != float64(51) || res["errors"] != float64(0) {
		t.Fatalf("load: %d %v", code, res)
	}
	code, res = call("POST", "/api/pipelines/bulk_delete_disabled/?schema=vm", "")
	if code != 202 {
		t.Fatalf("run: %d %v", code, res)
	}
	taskURL, _ := res["task_url"].(string)
	if !strings.HasPrefix(taskURL, base+"/api/tasks/") {
		t.Fatalf("task_url %q not under %s", taskURL, base)
	}
	for {
		if time.Now().After(deadline) {
			t.Fatal("task did not finish")
		}
		code, res = call("GET", strings.TrimPrefix(taskURL, base), "")
		if code != 200 {
			t.Fatalf("task: %d %v", code, res)
		}
		if res["status"] == "succeeded" {
			break
		}
		if res["status"] == "failed" || res["status"] == "cancelled" {
			t.Fatalf("task ended %v", res)
		}
		time.Sleep(20 * time.Millisecond)
	}
	result, _ := res["result"].(map[string]any)
	if result["deleted"] != float64(10) || result["unchanged"] != float64(40) {
		t.Fatalf("result %v", result)
	}
	code, res = call("GET", "/api/instances/vm/?size=100", "")
	if code != 200 || res["count"] != float64(40) {
		t.Fatalf("instances after run: %d count %v", code, res["count"])
	}
	if code, _ = call("GET", "/api/instances/vm/vm05/", ""); code != 404 {
		t.Fatalf("disabled vm05 still readable: %d", code)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("server did not stop")
	}
	if !strings.Contains(stderr.String(), "msg=stopped") {
		t.Fatalf("no clean stop in the log: %s", stderr.String())
	}
}

func TestPipelineCommands(t *testing.T) {
	t.Parallel()
	env := migratedEnv(t)
	if code, _, stderr := runCLI(t, env, "load", examplesDir); code != 0 {
		t.Fatalf("load: %s", stderr)
	}
	code, out, _ := runCLI(t, env, "pipeline", "list")
	if code != 0 || !regexp.MustCompile(`(?m)^\d+\tbulk_delete_disabled\trun_permission=-$`).MatchString(out) ||
		!strings.Contains(out, "\tnormalize_servers\trun_permission=p_pipeline_run") {
		t.Fatalf("pipeline list: exit %d, %q", code, out)
	}
	t.Run("run --wait prints progress lines and the result", func(t *testing.T) {
		code, out, stderr := runCLI(t, env, "pipeline", "run", "bulk_delete_disabled", "--schema", "server, site", "--wait")
		if code != 0 {
			t.Fatalf("exit %d: %s %s", code, out, stderr)
		}
		for _, want := range []string{"succeeded 100.0% 304/304", "scanned 304, updated 0, deleted 30, disabled 0, enabled 0, unchanged 274, discarded 0, errors 0"} {
			if !strings.Contains(out, want) {
				t.Fatalf("output %q lacks %q", out, want)
			}
		}
		_, exported, _ := runCLI(t, env, "export", "--schema", "server", "--format", "json")
		if n := strings.Count(exported, `"classname": "server"`); n != 270 {
			t.Fatalf("%d servers left, want 270", n)
		}
	})
	t.Run("a refused submission exits 1 with the reason", func(t *testing.T) {
		code, _, stderr := runCLI(t, env, "pipeline", "run", "bulk_delete_disabled", "--schema", "nosuch", "--wait")
		if code != 1 || !strings.Contains(stderr, `unknown schema "nosuch"`) {
			t.Fatalf("exit %d, %q", code, stderr)
		}
	})
	t.Run("load --pipeline applies the rules before loading", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "s.yml")
		doc := "- {classname: server, keyname: srvx1, hostname: LOUD.Example, env: prod}\n"
		if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		if code, out, stderr := runCLI(t, env, "load", "--pipeline", "normalize_servers", file); code != 0 || !strings.Contains(out, "created 1,") {
			t.Fatalf("load: exit %d %q %s", code, out, stderr)
		}
		_, got, _ := runCLI(t, env, "export", "--schema", "server", "--format", "json")
		if !strings.Contains(got, `"hostname": "loud.example"`) || !strings.Contains(got, `"description": "production server"`) {
			t.Fatalf("srvx1 not transformed: %s", got[strings.Index(got, "srvx1")-40:])
		}
	})
}

func TestIPAMCollect(t *testing.T) {
	t.Parallel()
	env := migratedEnv(t)
	if code, _, stderr := runCLI(t, env, "load", examplesDir); code != 0 {
		t.Fatalf("load: %s", stderr)
	}
	// Loading already collected every management address.
	if code, out, _ := runCLI(t, env, "ipam", "collect"); code != 0 || out != "collected 0 new ipam_ip instances\n" {
		t.Fatalf("collect after load: exit %d, %q", code, out)
	}
	_, exported, _ := runCLI(t, env, "export", "--schema", "ipam_ip", "--format", "json")
	if n := strings.Count(exported, `"collected": true`); n != 300 {
		t.Fatalf("%d collected addresses, want 300", n)
	}
	if !strings.Contains(exported, `"keyname": "0a010002"`) || !strings.Contains(exported, `"displayname": "10.1.0.2"`) {
		t.Fatalf("srv001's address 10.1.0.2 is not collected as 0a010002")
	}
	// Addresses stored without collection (an older release) are collected by the command.
	db := testkit.OpenFile(t, env["SERVICE_DB"])
	testkit.Exec(t, db, "DELETE FROM instances WHERE classname = 'ipam_ip'")
	db.Close()
	if code, out, _ := runCLI(t, env, "ipam", "collect"); code != 0 || out != "collected 300 new ipam_ip instances\n" {
		t.Fatalf("collect over stored data: exit %d, %q", code, out)
	}
	// Addresses the ipam_ip schema refuses (a required field without default) are listed
	// and skipped; the run succeeds.
	db = testkit.OpenFile(t, env["SERVICE_DB"])
	testkit.MustLoad(t, db, `{classname: _schema, keyname: ipam_ip, owner: {dataformat: string, cardinal_min: 1}}`, store.LoadOptions{})
	testkit.Exec(t, db, "DELETE FROM instances WHERE classname = 'ipam_ip' AND keyname = '0a010002'")
	db.Close()
	code, out, _ := runCLI(t, env, "ipam", "collect")
	if want := "collected 0 new ipam_ip instances\nskipped 1 addresses the ipam_ip schema refuses:\n" +
		"  ipam_ip 10.1.0.2 not collected"; code != 0 || !strings.HasPrefix(out, want) || !strings.Contains(out, "owner") {
		t.Fatalf("collect with a refusing schema: exit %d, %q, want it to start with %q and name owner", code, out, want)
	}
}

// TestRunReadsTheStdinItIsGiven: a command reads the stdin Run is given (here the
// password of "user add" and "user passwd"), and a nil stdin is empty input.
func TestRunReadsTheStdinItIsGiven(t *testing.T) {
	t.Parallel()
	env := migratedEnv(t)
	var out, errb bytes.Buffer
	code := Run(t.Context(), []string{"user", "add", "carol"}, envOf(env), strings.NewReader("Given-Stdin-1\nignored\n"), &out, &errb)
	if code != 0 || out.String() != "user carol created\n" {
		t.Fatalf("user add: exit %d, %q %q", code, out.String(), errb.String())
	}
	db := openStore(t, env["SERVICE_DB"])
	u, err := db.Instance(t.Context(), "_user", "carol")
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if hash, _ := u.Data["password"].(string); !strings.HasPrefix(hash, "$argon2id$") {
		t.Fatalf("password stored as %q", hash)
	}
	out.Reset()
	errb.Reset()
	if code := Run(t.Context(), []string{"user", "passwd", "carol"}, envOf(env), nil, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "empty password (the first line of stdin is the password)") {
		t.Fatalf("passwd with a nil stdin: exit %d, %q", code, errb.String())
	}
}
