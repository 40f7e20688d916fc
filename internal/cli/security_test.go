package cli

// Security: secrets never leave the process, refusals cost the same work whatever
// failed, what read-only and foreign credentials cannot do, and the HTTP resource
// limits — all against the real `dataservice serve` (Run() on 127.0.0.1:0) and the
// real CLI commands.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
)

// secServer is a running `dataservice serve`.
type secServer struct {
	t      *testing.T
	env    map[string]string
	addr   string
	base   string
	stderr *testkit.Buffer
	cancel context.CancelFunc
	done   chan int
	rec    *recorder
	// client sends the requests (nil: http.DefaultClient); see from.
	client *http.Client
}

// from returns the server with its requests sent from the loopback address ip, so
// refusals a subtest provokes on purpose count against that address in the
// credential throttle, not against the other subtests' 127.0.0.1.
func (s *secServer) from(ip string) *secServer {
	c := *s
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext}
	s.t.Cleanup(tr.CloseIdleConnections)
	c.client = &http.Client{Transport: tr, Timeout: 60 * time.Second}
	return &c
}

// recorder keeps every reply's headers and body, for the secret grep.
type recorder struct {
	mu      sync.Mutex
	replies bytes.Buffer
}

// with returns the server with its helpers reporting to t (a subtest).
func (s *secServer) with(t *testing.T) *secServer {
	c := *s
	c.t = t
	return &c
}

// secEnv is testEnv with this file's administrator password.
func secEnv(t *testing.T) map[string]string {
	env := testEnv(t)
	env["SERVICE_ADMIN_PASSWORD"] = "Adm1n-Pl41n-S3cret"
	env["SERVICE_LISTEN"] = "127.0.0.1:0"
	env["SERVICE_LOG_LEVEL"] = "info" // the address is found in the "listening" line
	migrateDB(t, env)
	return env
}

var listeningRE = regexp.MustCompile(`msg=listening addr=(127\.0\.0\.1:\d+)`)

// startServe runs `dataservice serve` until stop or the end of the test, and waits
// until it is ready.
func startServe(t *testing.T, env map[string]string) *secServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &secServer{t: t, env: env, stderr: &testkit.Buffer{}, cancel: cancel, done: make(chan int, 1), rec: &recorder{}}
	go func() { s.done <- Run(ctx, []string{"serve"}, envOf(env), nil, io.Discard, s.stderr) }()
	t.Cleanup(func() { s.stop() })
	deadline := time.Now().Add(30 * time.Second)
	for s.addr == "" {
		if time.Now().After(deadline) {
			t.Fatalf("server did not log its address: %s", s.stderr.String())
		}
		if m := listeningRE.FindStringSubmatch(s.stderr.String()); m != nil {
			s.addr = m[1]
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.base = "http://" + s.addr
	for {
		resp, err := http.Get(s.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server never ready: %s", s.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop ends the server and expects a clean exit.
func (s *secServer) stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	select {
	case code := <-s.done:
		if code != 0 {
			s.t.Errorf("serve exited %d: %s", code, s.stderr.String())
		}
	case <-time.After(30 * time.Second):
		s.t.Errorf("serve did not stop")
	}
}

type auth func(r *http.Request)

func basicAuth(login, pw string) auth { return func(r *http.Request) { r.SetBasicAuth(login, pw) } }

func bearerAuth(key, secret string) auth {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+key+":"+secret) }
}

func serviceKeyAuth(key, secret string) auth {
	return func(r *http.Request) { r.Header.Set("X-Service-Key", key+" "+secret) }
}

// call sends one request and records the reply.
func (s *secServer) call(method, path string, a auth, body string) (int, []byte) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	if a != nil {
		a(req)
	}
	client := s.client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("%s %s: read: %v", method, path, err)
	}
	s.rec.mu.Lock()
	resp.Header.Write(&s.rec.replies)
	s.rec.replies.Write(b)
	s.rec.replies.WriteString("\n")
	s.rec.mu.Unlock()
	return resp.StatusCode, b
}

// want checks the status and decodes a JSON object reply.
func (s *secServer) want(status int, method, path string, a auth, body string) map[string]any {
	s.t.Helper()
	code, b := s.call(method, path, a, body)
	if code != status {
		s.t.Fatalf("%s %s: status %d, want %d: %s", method, path, code, status, b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil && !strings.Contains(path, "format=yaml") {
		s.t.Fatalf("%s %s: not a JSON object: %v: %s", method, path, err, b)
	}
	return m
}

// wantErr checks the status and the exact {"error": msg} reply.
func (s *secServer) wantErr(status int, msg, method, path string, a auth, body string) {
	s.t.Helper()
	m := s.want(status, method, path, a, body)
	got, _ := m["error"].(string)
	if len(m) != 2 || m["errors"] == nil || !(got == msg || msg == "permission denied" && strings.HasPrefix(got, msg+": ")) {
		s.t.Fatalf("%s %s: reply %v, want {\"error\": %q}", method, path, m, msg)
	}
}

// waitTask polls a task until it is finished.
func (s *secServer) waitTask(handle string, a auth) map[string]any {
	s.t.Helper()
	var m map[string]any
	testkit.WaitFor(s.t, 30*time.Second, "task "+handle+" to finish", func() bool {
		m = s.want(http.StatusOK, "GET", "/api/tasks/"+handle+"/", a, "")
		status, _ := m["status"].(string)
		return finalStatus(status)
	})
	return m
}

// openDB opens the server's database file for direct SQL.
func openDB(t *testing.T, env map[string]string) *store.DB {
	t.Helper()
	return testkit.OpenFile(t, env["SERVICE_DB"])
}

// dumpTable renders every row of a query as text.
func dumpTable(t *testing.T, db *store.DB, query string) string {
	t.Helper()
	_, rows := testkit.Rows(t, db, query)
	var b strings.Builder
	for _, vals := range rows {
		for _, v := range vals {
			fmt.Fprintf(&b, "%v\t", v)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func legacySHA256(salt, secret string) string {
	sum := sha256.Sum256([]byte(salt + secret))
	return "$sha256$" + hex.EncodeToString([]byte(salt)) + "$" + hex.EncodeToString(sum[:])
}

// hashPieces is a stored hash and the parts of it that identify it (salt and digest).
func hashPieces(h string) []string {
	out := []string{h}
	parts := strings.Split(h, "$")
	for _, p := range parts[len(parts)-2:] {
		if len(p) >= 16 {
			out = append(out, p)
		}
	}
	return out
}

// TestSecretsNeverLeave loads API keys and users with plain secrets (CLI load, API
// load, API rawfile, a file whose `password:value` line lacks its space, the built-in
// key's SERVICE_APIKEY_SECRET, apikey create), exercises every endpoint, a pipeline
// over _user, error replies, `export --all` and `apikey list`, with the log at debug
// level, then greps everything — replies, logs, CLI output, exports, the revisions
// and tasks tables, every other stored value, and the raw database file for the plain
// secrets — for each plain secret and each stored hash.
func TestSecretsNeverLeave(t *testing.T) {
	t.Parallel()
	env := secEnv(t)
	env["SERVICE_LOG_LEVEL"] = "debug"
	env["SERVICE_APIKEY_SECRET"] = "Bu1ltin-Pl41n-S3cret"
	plain := []string{"Adm1n-Pl41n-S3cret", "Bu1ltin-Pl41n-S3cret", "0ps-Pl41n-S3cret", "R3ader-Pl41n-S3cret",
		"B0b-Pl41n-Passw0rd", "C4rol-Pl41n-Passw0rd", "L3nient-Pl41n-Passw0rd", "L3gacy-Pl41n-S3cret",
		"Ap1-Pl41n-S3cret", "Ap1-L3nient-S3cret", "Er1n-Pl41n-Passw0rd", "Fr4nk-Pl41n-Passw0rd", "Ky1e-Pl41n-S3cret",
		"Err0r-Pl41n-S3cret", "Dry-Pl41n-S3cret"}
	corpus := map[string]string{} // where -> text to grep

	// CLI loads, before the server runs.
	fixture := writeFile(t, "keys.yml", `
- classname: _schema
  keyname: server
  hostname: {dataformat: string}
- {classname: server, keyname: srv1, hostname: alpha}
- {classname: _user, keyname: bob, password: B0b-Pl41n-Passw0rd, email: bob@example.org}
- {classname: _user, keyname: carol, password: C4rol-Pl41n-Passw0rd}
- {classname: _role, keyname: role_admin, users: [admin, bob]}
- {classname: _apikey, keyname: ops, secret: 0ps-Pl41n-S3cret, is_readonly: false, user: bob, permissions: ["role:role_admin"]}
- {classname: _apikey, keyname: reader, secret: R3ader-Pl41n-S3cret, permissions: [p_data_access, p_data_read, p_pipeline_run, p_apikey_admin]}
- {classname: _apikey, keyname: legacy, secret: '`+legacySHA256("pepper", "L3gacy-Pl41n-S3cret")+`', is_readonly: false, permissions: ["role:role_admin"]}
`)
	code, out, errOut := runCLI(t, env, "load", fixture)
	if code != 0 {
		t.Fatalf("load: exit %d: %s %s", code, out, errOut)
	}
	corpus["CLI load output"] = out + errOut
	// The reference application's files have lines like "description:Some text"; the
	// lenient reader repairs them and says so.
	lenient := writeFile(t, "lenient.yml", "- classname: _user\n  keyname: dave\n  password:L3nient-Pl41n-Passw0rd\n")
	code, out, errOut = runCLI(t, env, "load", lenient)
	if code != 0 || !strings.Contains(errOut, "warning: lenient.yml: line 3: no space after ':'") {
		t.Fatalf("lenient load: exit %d: %s %s", code, out, errOut)
	}
	corpus["CLI load output of a repaired file"] = out + errOut
	code, out, errOut = runCLI(t, env, "apikey", "create", "kyle", "--permissions", "p_data_access")
	if code != 0 {
		t.Fatalf("apikey create: exit %d: %s", code, errOut)
	}
	// Printed once by design: not grepped, but grepped for everywhere else.
	plain = append(plain, strings.TrimSpace(strings.TrimPrefix(out, "kyle:")))
	corpus["CLI apikey create stderr"] = errOut

	s := startServe(t, env)
	admin := basicAuth("admin", "Adm1n-Pl41n-S3cret")
	ops := bearerAuth("ops", "0ps-Pl41n-S3cret")
	reader := serviceKeyAuth("reader", "R3ader-Pl41n-S3cret")
	builtinKey := bearerAuth("api_builtin", "Bu1ltin-Pl41n-S3cret")
	legacy := bearerAuth("legacy", "L3gacy-Pl41n-S3cret")
	bob := basicAuth("bob", "B0b-Pl41n-Passw0rd")

	// API writes with plain secrets.
	m := s.want(200, "POST", "/api/load/", admin, `
- {classname: _apikey, keyname: apikey2, secret: Ap1-Pl41n-S3cret, permissions: [p_data_access]}
- {classname: _user, keyname: erin, password: Er1n-Pl41n-Passw0rd}
`)
	if m["created"] != float64(2) {
		t.Fatalf("API load: %v", m)
	}
	m = s.want(200, "POST", "/api/load/", ops, "- classname: _apikey\n  keyname: apikey3\n  secret:Ap1-L3nient-S3cret\n")
	if m["created"] != float64(1) || m["warnings"] == nil {
		t.Fatalf("API load of a repaired document: %v", m)
	}
	m = s.want(200, "POST", "/api/load/", admin, `
- {classname: _apikey, keyname: "bad key", secret: Err0r-Pl41n-S3cret}
- {classname: _apikey, keyname: badexp, secret: Err0r-Pl41n-S3cret, expires: never}
- {classname: _user, keyname: gina, password: [Err0r-Pl41n-S3cret, two]}
- {classname: _user, keyname: hank, password: {x: Err0r-Pl41n-S3cret}}
- {classname: _user, keyname: ivan, password: Err0r-Pl41n-S3cret, is_enabled: maybe}
`)
	if m["errors"] != float64(5) {
		t.Fatalf("API load of bad entries: %v", m)
	}
	s.want(200, "POST", "/api/load/?dryrun=1", admin, "- {classname: _apikey, keyname: dry, secret: Dry-Pl41n-S3cret}\n")
	m = s.want(200, "POST", "/api/rawfile/?schema=_user&delimiter=,", admin, "keyname,password,email\nfrank,Fr4nk-Pl41n-Passw0rd,f@example.org\n")
	if m["created"] != float64(1) {
		t.Fatalf("rawfile: %v", m)
	}

	// Every endpoint, with every kind of credential.
	for _, a := range []auth{admin, ops, reader, builtinKey, legacy, bob} {
		s.call("GET", "/api/version/", a, "")
		s.call("GET", "/api/pipelines/", a, "")
		s.call("GET", "/api/schemas/", a, "")
		for _, cls := range []string{"_apikey", "_user"} {
			s.call("GET", "/api/schemas/"+cls+"/", a, "")
			for _, q := range []string{"", "?format=yaml", "?size=500", "?search=Pl41n", "?search=argon2id", "?search=%24sha256%24",
				"?search=pepper"} {
				s.call("GET", "/api/instances/"+cls+"/"+q, a, "")
			}
		}
		for _, p := range []string{"_apikey/ops/", "_apikey/legacy/", "_apikey/api_builtin/", "_apikey/apikey3/", "_user/bob/",
			"_user/admin/", "_user/dave/", "_user/frank/", "_user/bob/?format=yaml"} {
			s.call("GET", "/api/instances/"+p, a, "")
		}
		s.call("GET", "/api/conf/", a, "")
		s.call("POST", "/api/conf/", a, `{"GLOBAL_APPNAME": "dataservice"}`)
		s.call("GET", "/api/tasks/", a, "")
	}
	if _, b := s.call("GET", "/api/instances/_apikey/ops/", admin, ""); !strings.Contains(string(b), `"keyname":"ops"`) {
		t.Fatalf("key detail: %s", b)
	}

	// A pipeline over _user that tries to copy the password into readable fields.
	s.want(200, "POST", "/api/load/", admin, `
- classname: _pipeline
  keyname: touch_users
  content: |
    - field_copy: ['', password, lastname]
    - field_set: ['', firstname, touched]
`)
	for _, q := range []string{"?schema=_user&dryrun=1", "?schema=_user"} {
		m = s.want(202, "POST", "/api/pipelines/touch_users/"+q, admin, "")
		task := s.waitTask(m["handle"].(string), admin)
		res, _ := task["result"].(map[string]any)
		if task["status"] != "succeeded" || res["updated"] == float64(0) {
			t.Fatalf("pipeline over _user: %v", task)
		}
	}
	m = s.want(202, "POST", "/api/pipelines/touch_users/?schema=_user&dryrun=yes", ops, "")
	s.waitTask(m["handle"].(string), ops)
	s.call("GET", "/api/tasks/?limit=500", admin, "")

	// Refusals.
	for _, a := range []auth{bearerAuth("ops", "0ps-Pl41n-S3cretX"), bearerAuth("ops", "wrong"), basicAuth("bob", "wrong"),
		basicAuth("bob", "0ps-Pl41n-S3cret"), serviceKeyAuth("nobody", "B0b-Pl41n-Passw0rd"), bearerAuth("legacy", "wrong")} {
		s.wantErr(401, "authentication required", "GET", "/api/instances/_user/", a, "")
	}
	s.wantErr(403, "permission denied", "GET", "/api/instances/_apikey/", bearerAuth("kyle", plain[len(plain)-1]), "")
	s.stop()

	s.rec.mu.Lock()
	corpus["HTTP replies"] = s.rec.replies.String()
	s.rec.mu.Unlock()
	corpus["serve log (debug)"] = s.stderr.String()
	if !strings.Contains(corpus["serve log (debug)"], "level=DEBUG") && !strings.Contains(corpus["serve log (debug)"], "level=INFO") {
		t.Fatalf("no log captured: %s", corpus["serve log (debug)"])
	}
	for _, format := range []string{"yaml", "json"} {
		code, out, errOut := runCLI(t, env, "export", "--all", "--format", format)
		if code != 0 || !strings.Contains(out, "apikey3") || !strings.Contains(out, "frank") {
			t.Fatalf("export --all --format %s: exit %d: %s", format, code, errOut)
		}
		corpus["export --all "+format] = out + errOut
	}
	code, out, errOut = runCLI(t, env, "apikey", "list")
	if code != 0 {
		t.Fatalf("apikey list: exit %d: %s", code, errOut)
	}
	corpus["apikey list"] = out + errOut

	db := openDB(t, env)
	corpus["revisions table"] = dumpTable(t, db, "SELECT * FROM revisions")
	corpus["tasks table"] = dumpTable(t, db, "SELECT * FROM tasks")
	if !strings.Contains(corpus["tasks table"], "touch_users") {
		t.Fatalf("no pipeline task stored")
	}
	corpus["other tables"] = dumpTable(t, db, "SELECT * FROM registry") + dumpTable(t, db, "SELECT * FROM configuration") +
		dumpTable(t, db, "SELECT * FROM permissions") + dumpTable(t, db, "SELECT * FROM schemas") +
		dumpTable(t, db, "SELECT * FROM schema_fields")
	corpus["instances, secret fields removed"] = dumpInstances(t, db, "secret", "password")
	var hashes []string
	rows, err := db.Reader().QueryContext(context.Background(), `SELECT data ->> 'secret' FROM instances WHERE classname = '_apikey'
		AND data ->> 'secret' IS NOT NULL UNION ALL SELECT data ->> 'password' FROM instances
		WHERE classname = '_user' AND data ->> 'password' IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			t.Fatal(err)
		}
		if !model.IsSecretHash(h) {
			t.Errorf("stored secret %q is not a hash", h)
		}
		hashes = append(hashes, h)
	}
	rows.Close()
	// admin, bob, carol, dave, erin, frank; api_builtin, ops, reader, legacy, kyle, apikey2, apikey3.
	if got, want := len(hashes), 13; got != want {
		t.Fatalf("%d stored hashes, want %d", got, want)
	}
	var raw []byte
	if testkit.Postgres() {
		// The server's files are out of reach: every row of every table of the
		// service's schema, as text, is what the database holds.
		_, tables := testkit.Rows(t, db, `SELECT table_name FROM information_schema.tables
			WHERE table_schema = current_schema() ORDER BY table_name`)
		if len(tables) < 10 {
			t.Fatalf("only %d tables in the service's schema", len(tables))
		}
		for _, tbl := range tables {
			raw = append(raw, dumpTable(t, db, fmt.Sprintf(`SELECT CAST(x AS TEXT) FROM %q AS x`, tbl[0]))...)
		}
		if !bytes.Contains(raw, []byte(hashes[0])) {
			t.Fatalf("the tables' text does not hold the stored hash %q", hashes[0])
		}
	} else {
		for _, suffix := range []string{"", "-wal"} {
			b, err := os.ReadFile(env["SERVICE_DB"] + suffix)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			raw = append(raw, b...)
		}
	}

	leaks := 0
	report := func(what, where, text string) {
		i := strings.Index(text, what)
		if i < 0 {
			return
		}
		leaks++
		lo, hi := max(0, i-150), min(len(text), i+len(what)+50)
		t.Errorf("%q appears in %s: …%s…", what, where, text[lo:hi])
	}
	for where, text := range corpus {
		for _, p := range plain {
			report(p, where, text)
		}
		for _, h := range hashes {
			for _, piece := range hashPieces(h) {
				report(piece, where, text)
			}
		}
	}
	for _, p := range plain {
		if bytes.Contains(raw, []byte(p)) {
			leaks++
			t.Errorf("plain secret %q is in the database file", p)
		}
	}
	t.Logf("grepped %d places for %d plain secrets and %d stored hashes: %d leaks", len(corpus)+1, len(plain), len(hashes), leaks)
}

// allocated returns the bytes allocated in this process while fn runs.
var allocated = testkit.Allocated

const argonBytes = 19 << 20

// TestRefusalCostsOneArgon2Run: a wrong secret for an existing key and an unknown key
// are the same work — so are a disabled or expired key, a key without a secret, a
// key whose hash is the cheap legacy $sha256$ form, and the same for Basic logins.
// Asserted structurally: each refused request pays exactly one argon2id run (its
// 19 MiB are allocated once), while an accepted repeat is a cache hit.
//
// Serial: it counts the process's allocations, which parallel tests would add to.
func TestRefusalCostsOneArgon2Run(t *testing.T) {
	env := secEnv(t)
	fixture := writeFile(t, "keys.yml", `
- {classname: _user, keyname: bob, password: B0b-Pl41n-Passw0rd}
- {classname: _user, keyname: oldbob, password: '`+legacySHA256("pepper", "0ld-Pl41n-Passw0rd")+`'}
- {classname: _apikey, keyname: ops, secret: 0ps-Pl41n-S3cret, permissions: [p_data_access]}
- {classname: _apikey, keyname: legacy, secret: '`+legacySHA256("pepper", "L3gacy-Pl41n-S3cret")+`', permissions: [p_data_access]}
- {classname: _apikey, keyname: off, secret: 0ff-Pl41n-S3cret, is_enabled: false, permissions: [p_data_access]}
- {classname: _apikey, keyname: old, secret: 0ld-Pl41n-S3cret, expires: 2020-01-01, permissions: [p_data_access]}
- {classname: _apikey, keyname: nosecret, permissions: [p_data_access]}
`)
	if code, out, errOut := runCLI(t, env, "load", fixture); code != 0 {
		t.Fatalf("load: exit %d: %s %s", code, out, errOut)
	}
	s := startServe(t, env)
	get := func(s *secServer, a auth) int {
		code, _ := s.call("GET", "/api/version/", a, "")
		return code
	}
	// The dummy hash unknown keys are verified against is made on first use.
	get(s, bearerAuth("warmup", "x"))
	cases := []struct {
		name string
		a    auth
	}{
		{"wrong secret for an existing key", bearerAuth("ops", "wrong")},
		{"wrong secret by X-Service-Key", serviceKeyAuth("ops", "wrong")},
		{"unknown key", bearerAuth("nosuchkey", "wrong")},
		{"wrong secret for a key with a legacy sha256 hash", bearerAuth("legacy", "wrong")},
		{"disabled key", bearerAuth("off", "wrong")},
		{"expired key", bearerAuth("old", "wrong")},
		{"key without a secret", bearerAuth("nosecret", "wrong")},
		{"wrong password for an existing user", basicAuth("bob", "wrong")},
		{"unknown user", basicAuth("nobody", "wrong")},
		{"wrong password for a user with a legacy sha256 hash", basicAuth("oldbob", "wrong")},
	}
	for _, tc := range cases {
		t.Run(tc.name+" pays one argon2id run", func(t *testing.T) {
			s := s.with(t)
			var code int
			n := allocated(func() { code = get(s, tc.a) })
			if code != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", code)
			}
			if n < argonBytes || n >= 2*argonBytes {
				t.Fatalf("refusal allocated %.1f MiB, want one argon2id run (%d MiB)", float64(n)/(1<<20), argonBytes>>20)
			}
		})
	}
	t.Run("an accepted repeat is a cache hit", func(t *testing.T) {
		s := s.with(t)
		ok := bearerAuth("ops", "0ps-Pl41n-S3cret")
		if code := get(s, ok); code != http.StatusOK {
			t.Fatalf("status %d", code)
		}
		var code int
		if n := allocated(func() { code = get(s, ok) }); code != http.StatusOK || n >= 4<<20 {
			t.Fatalf("repeat: status %d after %.1f MiB, want 200 from the cache", code, float64(n)/(1<<20))
		}
	})
}

// snapshotTables renders every table a refused write must leave alone (a key's
// last_used, recorded for any accepted key, aside).
func snapshotTables(t *testing.T, db *store.DB) string {
	t.Helper()
	return dumpTable(t, db, "SELECT * FROM registry ORDER BY key") +
		dumpTable(t, db, "SELECT * FROM configuration ORDER BY keyname") +
		dumpTable(t, db, "SELECT * FROM permissions ORDER BY id") +
		dumpTable(t, db, "SELECT * FROM schemas ORDER BY id") +
		dumpTable(t, db, "SELECT * FROM schema_fields ORDER BY id") +
		dumpInstances(t, db, "last_used") +
		dumpTable(t, db, "SELECT * FROM revisions ORDER BY id") +
		dumpTable(t, db, "SELECT handle, status, params, owner_id, result, error FROM tasks ORDER BY handle")
}

// dumpInstances renders every instance without the data members named in drop
// (a key's last_used, which its use stamps; the secret fields of a dump that must
// not hold them), the same on every engine.
func dumpInstances(t *testing.T, db *store.DB, drop ...string) string {
	t.Helper()
	_, rows := testkit.Rows(t, db, "SELECT id, classname, keyname, displayname, is_enabled, CAST(data AS TEXT), created_at, updated_at FROM instances ORDER BY id")
	var b strings.Builder
	for _, vals := range rows {
		var data map[string]any
		if err := json.Unmarshal([]byte(fmt.Sprint(vals[5])), &data); err != nil {
			t.Fatalf("instance %v: data: %v", vals[0], err)
		}
		for _, k := range drop {
			delete(data, k)
		}
		vals[5], _ = json.Marshal(data)
		vals[5] = string(vals[5].([]byte))
		for _, v := range vals {
			fmt.Fprintf(&b, "%v\t", v)
		}
		b.WriteString("\n")
	}
	return b.String()
}

const accessFixture = `
- classname: _schema
  keyname: server
  hostname: {dataformat: string}
- {classname: server, keyname: srv1, hostname: alpha}
- {classname: server, keyname: srv2, hostname: beta, is_enabled: false}
- {classname: _user, keyname: bob, password: B0b-Pl41n-Passw0rd}
- {classname: _user, keyname: carol, password: C4rol-Pl41n-Passw0rd}
- {classname: _role, keyname: runners, users: [bob, carol], permissions: [p_data_access, p_data_read, p_data_update, p_data_delete, p_pipeline_run]}
- {classname: _apikey, keyname: ro_all, secret: R0-Pl41n-S3cret, is_readonly: true, permissions: ["role:role_admin"]}
- {classname: _apikey, keyname: all, secret: A11-Pl41n-S3cret, is_readonly: false, permissions: ["role:role_admin"]}
- {classname: _apikey, keyname: bobkey, secret: B0bkey-Pl41n-S3cret, is_readonly: false, user: bob, permissions: ["role:runners"]}
- {classname: _apikey, keyname: carolkey, secret: C4rolkey-Pl41n-S3cret, is_readonly: false, user: carol, permissions: ["role:runners"]}
- {classname: _apikey, keyname: nouser, secret: N0user-Pl41n-S3cret, is_readonly: false, permissions: ["role:runners"]}
- {classname: _apikey, keyname: expired, secret: Exp-Pl41n-S3cret, is_readonly: false, expires: 2020-01-01, permissions: ["role:role_admin"]}
- {classname: _apikey, keyname: disabled, secret: D1s-Pl41n-S3cret, is_readonly: false, is_enabled: false, permissions: ["role:role_admin"]}
- {classname: _apikey, keyname: filtered, secret: F1lt-Pl41n-S3cret, is_readonly: false, ip_filter: [10.0.0.0/8, 192.168.0.0/16], permissions: ["role:role_admin"]}
`

// TestAccessControl: read-only keys change nothing through any endpoint; tasks are
// visible only to their owner and to callers holding every permission; expired,
// disabled and IP-filtered keys are refused; built-in permissions cannot be deleted
// by a CLI load nor by /api/load/.
func TestAccessControl(t *testing.T) {
	t.Parallel()
	env := secEnv(t)
	if code, out, errOut := runCLI(t, env, "load", writeFile(t, "access.yml", accessFixture)); code != 0 {
		t.Fatalf("load: exit %d: %s %s", code, out, errOut)
	}
	s := startServe(t, env)
	db := openDB(t, env)
	admin := basicAuth("admin", "Adm1n-Pl41n-S3cret")
	all := bearerAuth("all", "A11-Pl41n-S3cret")

	t.Run("a read-only key holding every permission changes nothing", func(t *testing.T) {
		s := s.with(t)
		done := s.want(202, "POST", "/api/pipelines/bulk_delete_disabled/?schema=server&dryrun=1", admin, "")
		handle := done["handle"].(string)
		s.waitTask(handle, admin)
		for _, ro := range []auth{bearerAuth("ro_all", "R0-Pl41n-S3cret"), serviceKeyAuth("ro_all", "R0-Pl41n-S3cret")} {
			s.want(200, "GET", "/api/conf/", ro, "") // it does hold every permission
			before := snapshotTables(t, db)
			writes := []struct{ path, body string }{
				{"/api/load/", "- {classname: server, keyname: srv9}\n- {classname: server, keyname: srv1, _action: delete}\n"},
				{"/api/load/?action=delete", "- {classname: server, keyname: srv1}\n"},
				{"/api/load/?dryrun=1", "- {classname: server, keyname: srv9}\n"},
				{"/api/load/", "- {classname: _permission, keyname: p_data_access, _action: delete}\n"},
				{"/api/load/", "- {classname: _apikey, keyname: ro_all, is_readonly: false}\n"},
				{"/api/rawfile/?schema=server", "keyname;hostname\nsrv1;changed\nsrv8;new\n"},
				{"/api/conf/", `{"QUEUE_MAX": "5"}`},
				{"/api/pipelines/bulk_delete_disabled/?schema=server", ""},
				{"/api/pipelines/bulk_delete_disabled/?schema=server&dryrun=1", ""},
				{"/api/tasks/" + handle + "/cancel/", ""},
			}
			for _, w := range writes {
				s.wantErr(403, "API key is read-only", "POST", w.path, ro, w.body)
				for _, method := range []string{"PUT", "PATCH", "DELETE"} {
					if code, b := s.call(method, w.path, ro, w.body); code < 400 || code >= 500 {
						t.Fatalf("%s %s by a read-only key: %d %s", method, w.path, code, b)
					}
				}
			}
			if after := snapshotTables(t, db); after != before {
				t.Fatalf("a read-only key changed the tables:\nbefore %s\nafter %s", before, after)
			}
		}
	})

	t.Run("a task is visible to its owner and to callers holding every permission only", func(t *testing.T) {
		s := s.with(t)
		bobkey := bearerAuth("bobkey", "B0bkey-Pl41n-S3cret")
		m := s.want(202, "POST", "/api/pipelines/bulk_delete_disabled/?schema=server&dryrun=1", bobkey, "")
		handle := m["handle"].(string)
		task := s.waitTask(handle, bobkey)
		if task["owner_type"] != "api" || task["owner_id"] == "system" || task["owner_id"] == "" {
			t.Fatalf("task owner %v/%v, want api and bob's id", task["owner_type"], task["owner_id"])
		}
		for name, a := range map[string]auth{"a key without a user": bearerAuth("nouser", "N0user-Pl41n-S3cret"),
			"another user's key": bearerAuth("carolkey", "C4rolkey-Pl41n-S3cret"),
			"another user":       basicAuth("carol", "C4rol-Pl41n-Passw0rd")} {
			s.wantErr(404, "task not found", "GET", "/api/tasks/"+handle+"/", a, "")
			s.wantErr(404, "task not found", "POST", "/api/tasks/"+handle+"/cancel/", a, "")
			if _, b := s.call("GET", "/api/tasks/?limit=500", a, ""); strings.Contains(string(b), handle) {
				t.Fatalf("%s lists the task: %s", name, b)
			}
		}
		for name, a := range map[string]auth{"the owner's key": bobkey, "the owner": basicAuth("bob", "B0b-Pl41n-Passw0rd"),
			"the administrator": admin, "a key holding every permission": all} {
			if m := s.want(200, "GET", "/api/tasks/"+handle+"/", a, ""); m["handle"] != handle {
				t.Fatalf("%s: %v", name, m)
			}
			if _, b := s.call("GET", "/api/tasks/?limit=500", a, ""); !strings.Contains(string(b), handle) {
				t.Fatalf("%s does not list the task: %s", name, b)
			}
		}
	})

	t.Run("expired, disabled and IP-filtered keys are refused", func(t *testing.T) {
		// 27 refusals: more than the credential throttle lets one address have, so
		// one address per key.
		s := s.with(t)
		for i, k := range []struct{ key, secret string }{{"expired", "Exp-Pl41n-S3cret"}, {"disabled", "D1s-Pl41n-S3cret"},
			{"filtered", "F1lt-Pl41n-S3cret"}} {
			s := s.from("127.0.0." + strconv.Itoa(20+i))
			before := snapshotTables(t, db)
			for _, a := range []auth{bearerAuth(k.key, k.secret), serviceKeyAuth(k.key, k.secret), func(r *http.Request) {
				bearerAuth(k.key, k.secret)(r)
				r.Header.Set("X-Forwarded-For", "10.1.2.3")
				r.Header.Set("X-Real-IP", "10.1.2.3")
			}} {
				s.wantErr(401, "authentication required", "GET", "/api/version/", a, "")
				s.wantErr(401, "authentication required", "POST", "/api/load/", a, "- {classname: server, keyname: srv7}\n")
				s.wantErr(401, "authentication required", "POST", "/api/conf/", a, `{"QUEUE_MAX": "5"}`)
			}
			if after := snapshotTables(t, db); after != before {
				t.Fatalf("refused key %s changed the tables", k.key)
			}
		}
	})

	t.Run("built-in permissions cannot be deleted by load", func(t *testing.T) {
		s := s.with(t)
		count := func(p string) string {
			return dumpTable(t, db, "SELECT count(*) FROM permissions WHERE keyname = '"+p+"'")
		}
		doc := "- {classname: _permission, keyname: p_data_access, _action: delete}\n- {classname: _permission, keyname: p_api_load, _action: delete}\n"
		code, out, errOut := runCLI(t, env, "load", writeFile(t, "delete.yml", doc))
		if code != 1 || !strings.Contains(errOut, `permission "p_data_access" is built-in and cannot be deleted`) ||
			!strings.Contains(out, "errors 2") {
			t.Fatalf("CLI load: exit %d: %s %s", code, out, errOut)
		}
		m := s.want(200, "POST", "/api/load/", admin, doc)
		msgs, _ := json.Marshal(m["error_messages"])
		if m["errors"] != float64(2) || m["deleted"] != float64(0) || !strings.Contains(string(msgs), "is built-in and cannot be deleted") {
			t.Fatalf("API load: %v", m)
		}
		m = s.want(200, "POST", "/api/load/?action=delete", admin, "- {classname: _permission, keyname: p_data_access}\n")
		if m["errors"] != float64(1) {
			t.Fatalf("API load with action=delete: %v", m)
		}
		for _, p := range []string{"p_data_access", "p_api_load"} {
			if got := count(p); got != "1\t\n" {
				t.Fatalf("permission %s gone after refused deletes (count %q)", p, got)
			}
		}
		// A permission that is not built-in can be deleted the same way.
		s.want(200, "POST", "/api/load/", admin, "- {classname: _permission, keyname: p_custom}\n")
		if m := s.want(200, "POST", "/api/load/", admin, "- {classname: _permission, keyname: p_custom, _action: delete}\n"); m["deleted"] != float64(1) {
			t.Fatalf("delete of a custom permission: %v", m)
		}
		if got := count("p_custom"); got != "0\t\n" {
			t.Fatalf("custom permission still there (count %q)", got)
		}
	})
}

// TestSlowHeaderClientIsCutOff: clients trickling their request headers one byte at a
// time are disconnected by the server's read-header deadline (shortened here with the
// hidden SERVICE_READ_HEADER_TIMEOUT), and a normal client is served meanwhile.
func TestSlowHeaderClientIsCutOff(t *testing.T) {
	t.Parallel()
	env := secEnv(t)
	env["SERVICE_READ_HEADER_TIMEOUT"] = "300ms"
	s := startServe(t, env)
	const clients = 8
	request := "GET /api/ping/ HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 400) // never ends
	type outcome struct {
		sent  int
		reply string
		err   error
	}
	results := make(chan outcome, clients)
	for i := 0; i < clients; i++ {
		go func() {
			conn, err := net.Dial("tcp", s.addr)
			if err != nil {
				results <- outcome{err: err}
				return
			}
			defer conn.Close()
			closed := make(chan string, 1)
			go func() {
				b, _ := io.ReadAll(conn) // returns when the server closes the connection
				closed <- string(b)
			}()
			// At most len(request) bytes, one every 50 ms: the connection must be cut long
			// before the headers could ever end.
			for sent := 0; sent < len(request); sent++ {
				select {
				case reply := <-closed:
					results <- outcome{sent: sent, reply: reply}
					return
				default:
				}
				if _, err := conn.Write([]byte{request[sent]}); err != nil {
					results <- outcome{sent: sent, reply: <-closed}
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
			results <- outcome{sent: len(request), err: fmt.Errorf("still connected after trickling %d header bytes", len(request))}
		}()
	}
	// A normal client is served while the slow ones hold their connections.
	if code, b := s.call("GET", "/api/ping/", nil, ""); code != http.StatusOK {
		t.Fatalf("ping during the slow clients: %d %s", code, b)
	}
	for i := 0; i < clients; i++ {
		o := <-results
		if o.err != nil {
			t.Fatalf("slow client: %v", o.err)
		}
		// Closed, with net/http's own plain-text refusal at most (it answers a header
		// read that hit its deadline with a 400 and closes).
		if o.reply != "" && !strings.HasPrefix(o.reply, "HTTP/1.1 400 Bad Request") && !strings.HasPrefix(o.reply, "HTTP/1.1 408") {
			t.Fatalf("slow client got %q, want the connection closed", o.reply)
		}
		t.Logf("slow client cut off after %d of %d header bytes", o.sent, len(request))
	}
	if code, b := s.call("GET", "/api/ping/", nil, ""); code != http.StatusOK {
		t.Fatalf("ping after the slow clients: %d %s", code, b)
	}
}

// TestSettingsReadHeaderTimeout: the hidden setting is validated and names itself.
func TestSettingsReadHeaderTimeout(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"0", "50ms", "1h", "soon", "-1s"} {
		env := testEnv(t)
		env["SERVICE_READ_HEADER_TIMEOUT"] = v
		if code, _, errOut := runCLI(t, env, "version"); code != 1 || !strings.Contains(errOut, "SERVICE_READ_HEADER_TIMEOUT") {
			t.Fatalf("SERVICE_READ_HEADER_TIMEOUT=%s: exit %d, %q", v, code, errOut)
		}
	}
	env := testEnv(t)
	env["SERVICE_READ_HEADER_TIMEOUT"] = "2s"
	if code, _, errOut := runCLI(t, env, "version"); code != 0 {
		t.Fatalf("SERVICE_READ_HEADER_TIMEOUT=2s: exit %d, %q", code, errOut)
	}
}

// rawPost sends a POST with a body of n bytes over a raw connection, stopping when the
// server answers, and returns the reply: the client never has to send the whole body.
func rawPost(t *testing.T, addr, path, authz string, n int64, chunked bool) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	head := "POST " + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: " + authz + "\r\nContent-Type: application/yaml\r\n"
	if chunked {
		head += "Transfer-Encoding: chunked\r\n\r\n"
	} else {
		head += fmt.Sprintf("Content-Length: %d\r\n\r\n", n)
	}
	replied := make(chan struct{})
	go func() {
		defer close(replied)
		if _, err := io.WriteString(conn, head); err != nil {
			return
		}
		chunk := bytes.Repeat([]byte("#"), 64<<10) // a YAML comment, as long as it takes
		for sent := int64(0); sent < n; sent += int64(len(chunk)) {
			b := chunk[:min(int64(len(chunk)), n-sent)]
			if chunked {
				if _, err := fmt.Fprintf(conn, "%x\r\n%s\r\n", len(b), b); err != nil {
					return
				}
			} else if _, err := conn.Write(b); err != nil {
				return
			}
		}
		if chunked {
			io.WriteString(conn, "0\r\n\r\n")
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: read: %v", path, err)
	}
	conn.Close()
	<-replied
	return resp, body
}

// TestBodyOverLimit: bodies over the 32 MiB limit get 413 `request body too large`
// on /api/load/, /api/rawfile/ and /api/conf/, with or without a Content-Length, and
// load nothing.
func TestBodyOverLimit(t *testing.T) {
	t.Parallel()
	env := secEnv(t)
	s := startServe(t, env)
	db := openDB(t, env)
	authz := "Basic " + "YWRtaW46QWRtMW4tUGw0MW4tUzNjcmV0" // admin:Adm1n-Pl41n-S3cret
	if code, b := s.call("GET", "/api/version/", func(r *http.Request) { r.Header.Set("Authorization", authz) }, ""); code != 200 {
		t.Fatalf("credentials: %d %s", code, b)
	}
	before := snapshotTables(t, db)
	for _, path := range []string{"/api/load/", "/api/rawfile/?schema=_user", "/api/conf/"} {
		for _, chunked := range []bool{false, true} {
			resp, body := rawPost(t, s.addr, path, authz, 32<<20+1, chunked)
			if resp.StatusCode != http.StatusRequestEntityTooLarge || strings.TrimSpace(string(body)) != `{"error":"request body too large","errors":[{"field":"","code":"too_large","message":"request body too large"}]}` {
				t.Fatalf("POST %s (chunked %v) over the limit: %d %s", path, chunked, resp.StatusCode, body)
			}
		}
	}
	if after := snapshotTables(t, db); after != before {
		t.Fatalf("a body over the limit changed the tables")
	}
	resp, body := rawPost(t, s.addr, "/api/load/", authz, 1<<20, false) // a megabyte of comments: an empty load
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("body under the limit: %d %s", resp.StatusCode, body)
	}
}
