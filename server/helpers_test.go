package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"dataservice/internal/clientaddr"
	"dataservice/internal/testkit"
	"dataservice/server"
	"dataservice/store"
	"dataservice/store/model"
	"dataservice/tasks"
)

// TestMain removes the kit's template databases after the run.
func TestMain(m *testing.M) {
	code := m.Run()
	testkit.Cleanup()
	os.Exit(code)
}

// fixedNow is the store clock of every test database (API key expiry is judged by it).
var fixedNow = testkit.Now

// adminPassword is the password bootstrap forces onto the admin account.
const adminPassword = "admin-pass-1"

// envOptions tune newEnv.
type envOptions struct {
	BaseURL string
	Ready   func() bool
	MaxBody int64
	// MaxEntries bounds the entries of a load request (0: the server's default).
	MaxEntries int
	// NoRunner leaves the task runner stopped, so submitted tasks stay queued.
	NoRunner bool
	// Dir holds the database file (default: a temporary directory).
	Dir string
	// TrustedProxies is the server's trusted-proxy list (comma-separated).
	TrustedProxies string
}

// env is a real server over a real, fully initialised database in t.TempDir(),
// listening on 127.0.0.1.
type env struct {
	t      *testing.T
	db     *store.DB
	runner *tasks.Runner
	srv    *httptest.Server
	loop   *testkit.Loop
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	proxies, err := clientaddr.Parse(o.TrustedProxies)
	if err != nil {
		t.Fatal(err)
	}
	st := testkit.NewStack(t, testkit.StackOptions{AdminPassword: adminPassword, NoRunner: o.NoRunner, Dir: o.Dir,
		Handler: func(db *store.DB, runner *tasks.Runner) http.Handler {
			return server.New(server.Options{DB: db, Runner: runner, Logger: testkit.Logger(t, slog.LevelWarn),
				BaseURL: o.BaseURL, Version: testkit.Version, VersionDate: testkit.VersionDate, Ready: o.Ready,
				MaxBody: o.MaxBody, MaxEntries: o.MaxEntries, TrustedProxies: proxies})
		}})
	return &env{t: t, db: st.DB, runner: st.Runner, srv: st.Server, loop: st.Loop}
}

// start runs the task runner until stop or the end of the test.
func (e *env) start() { e.loop.Start() }

// stop stops the task runner and waits for it.
func (e *env) stop() { e.loop.Stop() }

// load loads a YAML document with every permission and fails on any entry error.
func (e *env) load(doc string) {
	e.t.Helper()
	testkit.MustLoad(e.t, e.db, doc, store.LoadOptions{})
}

// exec runs one SQL statement in a write transaction (to bypass load validation).
func (e *env) exec(query string, args ...any) {
	e.t.Helper()
	testkit.Exec(e.t, e.db, query, args...)
}

// queryString reads one text value.
func (e *env) queryString(query string, args ...any) string {
	e.t.Helper()
	return testkit.QueryString(e.t, e.db, query, args...)
}

// instanceID is the id of a stored instance.
func (e *env) instanceID(cls, key string) int64 {
	e.t.Helper()
	return testkit.Instance(e.t, e.db, cls, key).ID
}

// keySpec describes an API key to create.
type keySpec struct {
	perms    []string
	readOnly bool
	user     string
	ipFilter []string
	expires  string
	disabled bool
	// plain stores the secret as plain text (hashed with argon2id on write) instead of
	// the faster $sha256$ form.
	plain bool
}

// sha256Hash is the reference application's $sha256$<salt hex>$<digest hex> form.
func sha256Hash(salt []byte, secret string) string {
	sum := sha256.Sum256(append(append([]byte{}, salt...), secret...))
	return "$sha256$" + hex.EncodeToString(salt) + "$" + hex.EncodeToString(sum[:])
}

// key creates the API key name and returns a credential for it.
func (e *env) key(name string, k keySpec) cred {
	e.t.Helper()
	secret := "s3cret-" + name
	stored := sha256Hash([]byte("salt-"+name), secret)
	if k.plain {
		stored = secret
	}
	doc := map[string]any{"classname": "_apikey", "keyname": name, "secret": stored,
		"is_readonly": k.readOnly, "is_enabled": !k.disabled, "permissions": k.perms}
	if k.user != "" {
		doc["user"] = k.user
	}
	if len(k.ipFilter) > 0 {
		doc["ip_filter"] = k.ipFilter
	}
	if k.expires != "" {
		doc["expires"] = k.expires
	}
	b, err := json.Marshal([]any{doc})
	if err != nil {
		e.t.Fatal(err)
	}
	e.load(string(b))
	return bearer(name, secret)
}

// user creates an enabled user with a password and returns its Basic credential.
func (e *env) user(login string, enabled bool) cred {
	e.t.Helper()
	pw := "pw-" + login
	b, err := json.Marshal([]any{map[string]any{"classname": "_user", "keyname": login, "is_enabled": enabled,
		"password": sha256Hash([]byte("salt-"+login), pw)}})
	if err != nil {
		e.t.Fatal(err)
	}
	e.load(string(b))
	return basic(login, pw)
}

// cred adds credentials to a request.
type cred func(r *http.Request)

func noCred(*http.Request) {}

func bearer(key, secret string) cred {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+key+":"+secret) }
}

func serviceKey(key, secret string) cred {
	return func(r *http.Request) { r.Header.Set("X-Service-Key", key+" "+secret) }
}

func basic(login, password string) cred {
	return func(r *http.Request) {
		r.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(login+":"+password)))
	}
}

func header(name, value string) cred {
	return func(r *http.Request) { r.Header.Set(name, value) }
}

// both applies several credential or header setters.
func both(cs ...cred) cred {
	return func(r *http.Request) {
		for _, c := range cs {
			c(r)
		}
	}
}

// adminCred is the bootstrapped administrator (every permission, a user).
var adminCred = basic("admin", adminPassword)

// reply is a received response.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// do sends one request to the test server.
func (e *env) do(method, path string, c cred, body []byte) reply {
	e.t.Helper()
	return e.doWith(e.srv.Client(), method, path, c, body)
}

// doWith sends one request to the test server through client (see from).
func (e *env) doWith(client *http.Client, method, path string, c cred, body []byte) reply {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatalf("request %s %s: %v", method, path, err)
	}
	c(req)
	resp, err := client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

func (e *env) get(path string, c cred) reply { return e.do(http.MethodGet, path, c, nil) }

func (e *env) post(path string, c cred, body []byte) reply {
	return e.do(http.MethodPost, path, c, body)
}

// wantError checks the status and that the body is exactly {"error": msg}.
func wantError(t *testing.T, r reply, status int, msg string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d (body %s)", r.status, status, r.body)
	}
	var m struct {
		Error  *string         `json:"error"`
		Errors []model.Problem `json:"errors"`
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil || m.Error == nil {
		t.Fatalf("error body %q is not {error, errors}: %v", r.body, err)
	}
	if !deniedMatches(*m.Error, msg) {
		t.Fatalf("error = %q, want %q", *m.Error, msg)
	}
	if len(m.Errors) == 0 || m.Errors[0].Message != *m.Error || m.Errors[0].Code == "" {
		t.Fatalf("errors %+v do not start with the error %q and its code", m.Errors, *m.Error)
	}
	if status == http.StatusUnauthorized && len(r.header.Values("WWW-Authenticate")) == 0 {
		t.Fatalf("401 without WWW-Authenticate")
	}
}

// wantJSON checks the status and decodes the JSON body into v.
func wantJSON(t *testing.T, r reply, status int, v any) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d (body %s)", r.status, status, r.body)
	}
	if got, want := r.header.Get("Content-Type"), "application/json; charset=utf-8"; got != want {
		t.Fatalf("Content-Type = %q, want %q", got, want)
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// object decodes a 200-class JSON object reply.
func object(t *testing.T, r reply, status int) map[string]any {
	t.Helper()
	var m map[string]any
	wantJSON(t, r, status, &m)
	return m
}

// waitTask polls the task until it is finished, within a deadline.
func (e *env) waitTask(handle string) *tasks.Task {
	e.t.Helper()
	var task *tasks.Task
	testkit.WaitFor(e.t, 20*time.Second, "task "+handle+" to finish", func() bool {
		var err error
		if task, err = e.runner.Get(context.Background(), handle); err != nil {
			e.t.Fatalf("get task %s: %v", handle, err)
		}
		return task.Finished()
	})
	return task
}

// serverSchema is a user schema with instances, used by most tests.
const serverSchema = `
- classname: _schema
  keyname: server
  displayname: Servers
  hostname: {dataformat: string}
  site: {dataformat: string}
- {classname: server, keyname: srv1, hostname: alpha}
- {classname: server, keyname: srv2, hostname: beta, is_enabled: false}
- {classname: server, keyname: srv3, hostname: gamma}
`

// num reads a JSON number decoded with UseNumber as int64.
func num(t *testing.T, v any) int64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v (%T) is not a number", v, v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatalf("%v is not an integer: %v", v, err)
	}
	return i
}

// deniedMatches reports whether the error message got is want; a want of "permission
// denied" stands for a denial that names what was needed ("permission denied: ...
// needs p_x"), which the tests of each denial's exact message check.
func deniedMatches(got, want string) bool {
	if want == "permission denied" {
		return strings.HasPrefix(got, "permission denied: ") && strings.Contains(got, " needs ")
	}
	return got == want
}
