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
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"dataservice/bootstrap"
	"dataservice/builtin"
	"dataservice/server"
	"dataservice/store"
	"dataservice/tasks"
)

// fixedNow is the store clock of every test database (API key expiry is judged by it).
var fixedNow = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// adminPassword is the password bootstrap forces onto the admin account.
const adminPassword = "admin-pass-1"

// tbWriter sends log output to t.Log.
type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Helper()
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// envOptions tune newEnv.
type envOptions struct {
	BaseURL string
	Ready   func() bool
	MaxBody int64
	// MaxEntries bounds the entries of a load request (0: the server's default).
	MaxEntries int
	// NoRunner leaves the task runner stopped, so submitted tasks stay queued.
	NoRunner bool
}

// env is a real server over a real, fully initialised database in t.TempDir(),
// listening on 127.0.0.1.
type env struct {
	t      *testing.T
	db     *store.DB
	runner *tasks.Runner
	srv    *httptest.Server

	mu         sync.Mutex
	stopRunner func()
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(tbWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "server.db"), store.Options{Logger: logger})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	db.Now = func() time.Time { return fixedNow }
	err = bootstrap.Run(ctx, db, bootstrap.Options{Version: "4.9.0", VersionDate: "2026-11-22",
		Init: builtin.Init(), AdminPassword: adminPassword, Logger: logger})
	if err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	runner := tasks.New(db, tasks.Options{Poll: 20 * time.Millisecond, Logger: logger})
	srv := httptest.NewServer(server.New(server.Options{DB: db, Runner: runner, Logger: logger,
		BaseURL: o.BaseURL, Version: "4.9.0", VersionDate: "2026-11-22", Ready: o.Ready, MaxBody: o.MaxBody,
		MaxEntries: o.MaxEntries}))
	t.Cleanup(srv.Close)
	e := &env{t: t, db: db, runner: runner, srv: srv}
	// Registered after srv.Close, so it runs first: the runner stops before the server
	// and the database go away.
	t.Cleanup(e.stop)
	if !o.NoRunner {
		e.start()
	}
	return e
}

// start runs the task runner until stop or the end of the test.
func (e *env) start() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopRunner != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.runner.Run(ctx) }()
	e.stopRunner = func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("runner: %v", err)
		}
	}
}

// stop stops the task runner and waits for it.
func (e *env) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopRunner != nil {
		e.stopRunner()
		e.stopRunner = nil
	}
}

// load loads a YAML document with every permission and fails on any entry error.
func (e *env) load(doc string) {
	e.t.Helper()
	entries, err := store.ParseDocument("test", []byte(doc))
	if err != nil {
		e.t.Fatalf("parse test data: %v", err)
	}
	res, err := e.db.Load(context.Background(), entries, store.LoadOptions{})
	if err != nil {
		e.t.Fatalf("load test data: %v", err)
	}
	if res.Errors != 0 {
		e.t.Fatalf("load test data: %d errors: %v", res.Errors, res.Messages)
	}
}

// exec runs one SQL statement in a write transaction (to bypass load validation).
func (e *env) exec(query string, args ...any) {
	e.t.Helper()
	err := e.db.WithTx(context.Background(), func(tx *store.Tx) error {
		_, err := tx.ExecContext(context.Background(), query, args...)
		return err
	})
	if err != nil {
		e.t.Fatalf("exec %q: %v", query, err)
	}
}

// queryString reads one text value.
func (e *env) queryString(query string, args ...any) string {
	e.t.Helper()
	var s string
	if err := e.db.Reader().QueryRowContext(context.Background(), query, args...).Scan(&s); err != nil {
		e.t.Fatalf("query %q: %v", query, err)
	}
	return s
}

// instanceID is the id of a stored instance.
func (e *env) instanceID(cls, key string) int64 {
	e.t.Helper()
	in, err := e.db.Instance(context.Background(), cls, key)
	if err != nil {
		e.t.Fatalf("instance %s %s: %v", cls, key, err)
	}
	return in.ID
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
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatalf("request %s %s: %v", method, path, err)
	}
	c(req)
	resp, err := e.srv.Client().Do(req)
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
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("error body %q is not JSON: %v", r.body, err)
	}
	if got, want := len(m), 1; got != want {
		t.Fatalf("error body has %d keys, want %d: %s", got, want, r.body)
	}
	if got, want := m["error"], any(msg); got != want {
		t.Fatalf("error = %q, want %q", got, want)
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
	deadline := time.Now().Add(20 * time.Second)
	for {
		task, err := e.runner.Get(context.Background(), handle)
		if err != nil {
			e.t.Fatalf("get task %s: %v", handle, err)
		}
		if task.Finished() {
			return task
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("task %s still %s after the deadline", handle, task.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
