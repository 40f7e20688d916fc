package server

// Hostile input: thousands of malformed or adversarial requests over every route and
// method, with good, restricted and garbage credentials, against the real stack (a
// fully bootstrapped SQLite database in t.TempDir(), the task runner, httptest on
// 127.0.0.1 configured like `dataservice serve`). This file is an internal test
// (package server) only so its helpers cannot collide with the black-box tests; it
// uses nothing but the exported API.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/tasks"
)

// hostileSeed seeds every generated input; DATASERVICE_HOSTILE_SEED overrides it to
// explore other sequences.
const hostileSeed uint64 = 20261122

// hostileMaxBody is the body limit of the hostile server: small, so that some
// generated bodies are over it and some just under.
const hostileMaxBody = 1 << 20

// hostileEnv is the server under attack.
type hostileEnv struct {
	t      *testing.T
	db     *store.DB
	runner *tasks.Runner
	srv    *httptest.Server
	log    *testkit.Buffer
	client *http.Client
	// refusing sends the requests whose credentials are refused (hostileReq.refused).
	refusing *http.Client
	loop     *testkit.Loop
}

func newHostileEnv(t *testing.T) *hostileEnv {
	t.Helper()
	sink := &testkit.Buffer{}
	logger := slog.New(slog.NewTextHandler(sink, &slog.HandlerOptions{Level: slog.LevelDebug}))
	st := testkit.NewStack(t, testkit.StackOptions{Logger: logger, AdminPassword: "hostile-admin-pw", NoRunner: true,
		Handler: func(db *store.DB, runner *tasks.Runner) http.Handler {
			return New(Options{DB: db, Runner: runner, Logger: logger,
				Version: testkit.Version, VersionDate: testkit.VersionDate, MaxBody: hostileMaxBody})
		},
		// As `dataservice serve` configures it; net/http's own complaints go to the same log.
		Configure: func(s *http.Server) { s.ErrorLog = log.New(sink, "net/http: ", 0) },
	})
	e := &hostileEnv{t: t, db: st.DB, runner: st.Runner, srv: st.Server, log: sink, loop: st.Loop}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// The client would wait up to a second for a 100 Continue that a handler refusing
	// the request before reading its body never asks for.
	tr.ExpectContinueTimeout = 10 * time.Millisecond
	t.Cleanup(tr.CloseIdleConnections)
	e.client = &http.Client{
		Transport:     tr,
		Timeout:       60 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	// Thousands of refused credentials on purpose: each such request comes from its
	// own loopback address, on a connection of its own, so the per-address throttle of
	// failed credentials (tested on its own) does not answer the rest of the sweep 429
	// unchecked. The others keep one address and reused connections, as a client does.
	rtr := tr.Clone()
	// A connection is not kept for another request (a negative idle bound), but the
	// requests do not say "Connection: close": a server answering before it read a
	// large body then drains it, as for any client, instead of resetting the
	// connection under the body still being written.
	rtr.DialContext, rtr.MaxIdleConnsPerHost = testkit.LoopbackDial(), -1
	refusing := *e.client
	refusing.Transport = rtr
	e.refusing = &refusing
	t.Cleanup(func() {
		if t.Failed() {
			out := sink.String()
			if len(out) > 20000 {
				out = "…" + out[len(out)-20000:]
			}
			t.Logf("server log (tail):\n%s", out)
		}
	})
	return e
}

// start runs the task runner until stop.
func (e *hostileEnv) start() { e.loop.Start() }

func (e *hostileEnv) stop() { e.loop.Stop() }

// load loads a YAML document with every permission; any entry error fails the test.
func (e *hostileEnv) load(doc string) {
	e.t.Helper()
	testkit.MustLoad(e.t, e.db, doc, store.LoadOptions{})
}

// legacyHash is the reference application's $sha256$salt$digest form: fast to verify,
// so thousands of requests with good keys do not pay argon2id each.
func legacyHash(salt, secret string) string {
	sum := sha256.Sum256([]byte(salt + secret))
	return "$sha256$" + hex.EncodeToString([]byte(salt)) + "$" + hex.EncodeToString(sum[:])
}

// snapshot renders the tables a caller without write rights must never change. An API
// key's last_used is left out: the service records it for any accepted key (it is not
// an edit and writes no revision).
func (e *hostileEnv) snapshot() []string {
	e.t.Helper()
	queries := []string{
		`SELECT key, value FROM registry ORDER BY key`,
		`SELECT * FROM configuration ORDER BY keyname`,
		`SELECT * FROM permissions ORDER BY id`,
		`SELECT * FROM schemas ORDER BY id`,
		`SELECT * FROM schema_fields ORDER BY id`,
		// data (the sixth column) without last_used, which a key's use updates.
		`SELECT id, classname, keyname, displayname, is_enabled, data, created_at, updated_at
			FROM instances ORDER BY id`,
		`SELECT * FROM revisions ORDER BY id`,
	}
	var out []string
	for _, q := range queries {
		_, rows := testkit.Rows(e.t, e.db, q)
		for _, vals := range rows {
			line := strings.Fields(q)[3] + ":"
			if strings.Contains(q, "FROM instances") {
				vals[5] = withoutLastUsed(e.t, vals[5])
			}
			for _, v := range vals {
				line += fmt.Sprintf(" %q", fmt.Sprint(v))
			}
			out = append(out, line)
		}
	}
	return out
}

// withoutLastUsed is an instance's data text without its last_used member, in the
// same text otherwise (json.Marshal of a map orders the keys, on both engines alike).
func withoutLastUsed(t *testing.T, data any) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(fmt.Sprint(data)), &m); err != nil {
		t.Fatalf("instance data %q: %v", hostileClip(fmt.Sprint(data), 200), err)
	}
	delete(m, "last_used")
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sameSnapshot fails with the first differing rows.
func sameSnapshot(t *testing.T, before, after []string) {
	t.Helper()
	b, a := map[string]bool{}, map[string]bool{}
	for _, l := range before {
		b[l] = true
	}
	for _, l := range after {
		a[l] = true
	}
	var diff []string
	for _, l := range before {
		if !a[l] {
			diff = append(diff, "- "+hostileClip(l, 300))
		}
	}
	for _, l := range after {
		if !b[l] {
			diff = append(diff, "+ "+hostileClip(l, 300))
		}
	}
	if len(diff) > 0 || len(before) != len(after) {
		if len(diff) > 20 {
			diff = diff[:20]
		}
		t.Fatalf("tables changed (%d rows before, %d after):\n%s", len(before), len(after), strings.Join(diff, "\n"))
	}
}

func hostileClip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("…(%d bytes)", len(s))
}

// hostileReq is one generated request.
type hostileReq struct {
	method  string
	target  string // path and query, already escaped
	header  http.Header
	host    string
	body    []byte
	chunked bool
	refused bool     // its credentials are refused: sent from an address of its own
	what    []string // the choices made, for failure messages
}

func (r *hostileReq) String() string {
	return fmt.Sprintf("%s %s [%s] body %d bytes", r.method, hostileClip(r.target, 160),
		strings.Join(r.what, "; "), len(r.body))
}

// hostileCred presents credentials. costly ones pay one argon2id run per request (an
// unknown key, a wrong secret or password): they are drawn rarely.
type hostileCred struct {
	name   string
	costly bool
	good   bool // accepted credentials: drawn half the time, so requests get past authentication
	set    func(h http.Header)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// garbageCreds are credential variants built around one good key (key, secret):
// the good forms themselves, malformed ones, and refused ones.
func garbageCreds(key, secret string) []hostileCred {
	auth := func(v string) func(h http.Header) { return func(h http.Header) { h.Set("Authorization", v) } }
	xkey := func(v string) func(h http.Header) { return func(h http.Header) { h.Set("X-Service-Key", v) } }
	return []hostileCred{
		{name: "no credentials", set: func(http.Header) {}},
		{name: "good bearer", good: true, set: auth("Bearer " + key + ":" + secret)},
		{name: "good X-Service-Key", good: true, set: xkey(key + " " + secret)},
		{name: "lowercase bearer", good: true, set: auth("bearer " + key + ":" + secret)},
		{name: "bearer with spaces", good: true, set: auth("Bearer   " + key + " : " + secret + "  ")},
		{name: "X-Service-Key with tabs", set: xkey("\t" + key + "\t" + secret + "\t")},
		{name: "Authorization garbage", set: auth("garbage")},
		{name: "Authorization garbage and a good X-Service-Key", good: true, set: func(h http.Header) {
			h.Set("Authorization", "garbage")
			h.Set("X-Service-Key", key+" "+secret)
		}},
		{name: "empty bearer", set: auth("Bearer")},
		{name: "bearer without colon", set: auth("Bearer " + key + secret)},
		{name: "bearer empty secret", set: auth("Bearer " + key + ":")},
		{name: "bearer empty key", set: auth("Bearer :" + secret)},
		{name: "bearer only colon", set: auth("Bearer :")},
		{name: "bearer secret too long", set: auth("Bearer " + key + ":" + strings.Repeat("s", 2000))},
		{name: "bearer key too long", set: auth("Bearer " + strings.Repeat("k", 300) + ":" + secret)},
		{name: "bearer 40 KB", set: auth("Bearer " + strings.Repeat("A", 40<<10))},
		{name: "bearer non-UTF-8", set: auth("Bearer \xff\xfe:\xc0\xaf")},
		{name: "bearer non-UTF-8 secret", set: auth("Bearer " + key + ":" + secret + "\xff")},
		{name: "X-Service-Key key only", set: xkey(key)},
		{name: "X-Service-Key with colon", set: xkey(key + ":" + secret)},
		{name: "X-Service-Key non-UTF-8", set: xkey("\xff\xfe \xfd")},
		{name: "X-Service-Key 40 KB", set: xkey(strings.Repeat("k", 20<<10) + " " + strings.Repeat("s", 20<<10))},
		{name: "empty X-Service-Key", set: xkey("")},
		{name: "two Authorization headers", set: func(h http.Header) {
			h.Add("Authorization", "Basic "+b64("x"))
			h.Add("Authorization", "Bearer "+key+":"+secret)
		}},
		{name: "basic not base64", set: auth("Basic !!!")},
		{name: "basic without colon", set: auth("Basic " + b64("admin"))},
		{name: "basic only colon", set: auth("Basic " + b64(":"))},
		{name: "basic non-UTF-8", set: auth("Basic " + b64("\xff\xfe:\xfd"))},
		{name: "basic 40 KB", set: auth("Basic " + strings.Repeat("QUFB", 10<<10))},
		{name: "negotiate", set: auth("Negotiate YIIGhgYJKoZIhvcSAQICAQBuggZ1MIIGcaADAgEFoQMCAQ6iBwMFACAAAACjggSfYYIEmzCCBJeg")},
		{name: "bearer secret with SQL", set: auth("Bearer " + key + ":' OR 1=1 --"), costly: true},
		{name: "unknown key", set: auth("Bearer nosuchkey:" + secret), costly: true},
		{name: "key name with SQL", set: xkey("'%20OR%201=1-- x"), costly: true},
		{name: "wrong secret", set: auth("Bearer " + key + ":wrong"), costly: true},
		{name: "wrong bearer beats a good X-Service-Key", set: func(h http.Header) {
			h.Set("Authorization", "Bearer "+key+":wrong")
			h.Set("X-Service-Key", key+" "+secret)
		}, costly: true},
		{name: "API key as a basic login", set: auth("Basic " + b64(key+":"+secret)), costly: true},
		{name: "basic admin wrong password", set: auth("Basic " + b64("admin:wrong")), costly: true},
	}
}

// Segments and queries are URL text, already escaped.
var hostileSegments = []string{
	"server", "srv1", "srv2", "_user", "_apikey", "_permission", "_schema", "_pipeline", "admin", "api_builtin",
	"bulk_delete_disabled", "ipam_ip", "ipam_subnet", "0a000001", "10.0.0.0%2F24", "1", "2", "0", "-1", "007",
	"99999999999999999999999", "%00", "a%00b", "%2e%2e", "..", ".", "%2F", "a%2Fb", "%20", "%20server%20", "%09", "%0d%0a",
	"%ff%fe", "%C3%A9t%C3%A9", "%E2%80%AE", "%F0%9F%92%A9", "%EF%BB%BF", "%27%20OR%201%3D1%20--", "%25", "_", "%5C", "*",
	":", ";", "%3Cscript%3E", "%24%7Bjndi%3Aldap%3A%2F%2Fx%7D", "%7B%7B7*7%7D%7D", "a,b", "",
	strings.Repeat("x", 300), strings.Repeat("x", 5000), strings.Repeat("%41", 3000), strings.Repeat("%C3%A9", 2000),
}

var hostileQueries = []string{
	"schema=", "schema=,,,", "schema=%20,%20,", "schema=%2C%2C", "schema=nosuch", "schema=_apikey", "schema=_user",
	"schema=_permission", "schema=server&schema=_user", "schema=%00", "schema=%27%20OR%201%3D1%20--", "schema=server,%20server",
	"schema=" + strings.Repeat("server,", 70) + "server", "schema=" + strings.Repeat("x", 5000),
	"dryrun=maybe", "dryrun=%00", "dryrun=TRUE%20", "dryrun=yes", "dryrun=" + strings.Repeat("1", 10000),
	"page=-1", "page=0", "page=abc", "page=1e3", "page=99999999999999999999", "page=1000000", "page=1000001", "page=%20",
	"size=-5", "size=0", "size=501", "size=500", "size=99999999999", "size=x", "size=1&size=2",
	"limit=-1", "limit=0", "limit=501", "limit=abc", "limit=99999999999999999999", "limit=500",
	"status=%27%3B%20DROP%20TABLE%20tasks%3B--", "status=queued", "status=", "status=QUEUED",
	"search=%27%20OR%201%3D1%20--", "search=%25", "search=_", "search=%5C", "search=%5C%25", "search=%00",
	"search=" + strings.Repeat("%25_", 1000), "search=%ff", "search=secret", "search=%24sha256%24",
	"format=yaml", "format=json", "format=xml", "format=%00", "format=YAML",
	"action=delete", "action=DELETE", "action=drop", "action=%27", "action=noop", "action=disable",
	"pipeline=bulk_delete_disabled", "pipeline=nosuch", "pipeline=%27%20OR%201%3D1", "pipeline=%20",
	"delimiter=;;", "delimiter=%22", "delimiter=%0a", "delimiter=%09", "delimiter=%ff", "delimiter=,", "delimiter=",
	"delimiter=%E2%82%AC", "delimiter=%00",
	"encoding=ebcdic", "encoding=latin1", "encoding=ISO-8859-1", "encoding=utf-16",
	"keyfield=", "keyfield=hostname", "keyfield=%27", "keyfield=nosuch", "keyfield=classname",
	"%zz=1", "a=%zz", "&&&", "=", "a;b=c", "schema", "%00=%00", strings.Repeat("a=1&", 5000) + "schema=server",
}

// routeSpec is a path template: {s} takes a segment, {task} a real task handle.
type routeSpec struct {
	path   string
	method string
	body   string // "load", "csv", "conf" or ""
	query  []string
	names  [][]string // meaningful values of each {s}, drawn half the time
}

var (
	schemaNames   = []string{"server", "_user", "_apikey", "ipam_ip", "_pipeline", "_permission", "_role"}
	keyNames      = []string{"srv1", "srv2", "srv3", "admin", "bob", "full", "ro", "bulk_delete_disabled", "0a000001", "a%2Fb"}
	pipelineNames = []string{"bulk_delete_disabled", "bulk_delete_disabled", "%20bulk_delete_disabled%20", "BULK_DELETE_DISABLED", "1", "2"}
)

var hostileRoutes = []routeSpec{
	{path: "/healthz", method: "GET"},
	{path: "/readyz", method: "GET"},
	{path: "/api/ping/", method: "GET"},
	{path: "/api/version/", method: "GET"},
	{path: "/api/pipelines/", method: "GET"},
	{path: "/api/pipelines/{s}/", method: "POST", query: []string{"schema=server", "schema=server,_user&dryrun=true", "schema=_user&dryrun=1"},
		names: [][]string{pipelineNames}},
	{path: "/api/pipelines//", method: "POST", query: []string{"schema=server"}},
	{path: "/api/pipelines/{s}", method: "POST", query: []string{"schema=server"}},
	{path: "/api/pipelines/{s}/{s}/", method: "POST", query: []string{"schema=server"}},
	{path: "/api/tasks/", method: "GET", query: []string{"status=succeeded", "limit=10"}},
	{path: "/api/tasks/{s}/", method: "GET"},
	{path: "/api/tasks/{task}/", method: "GET"},
	{path: "/api/tasks/{s}/cancel/", method: "POST"},
	{path: "/api/tasks/{task}/cancel/", method: "POST"},
	{path: "/api/schemas/", method: "GET"},
	{path: "/api/schemas/{s}/", method: "GET", names: [][]string{schemaNames}},
	{path: "/api/instances/{s}/", method: "GET", query: []string{"page=1&size=10", "search=alp"}, names: [][]string{schemaNames}},
	{path: "/api/instances/{s}/{s}/", method: "GET", names: [][]string{schemaNames, keyNames}},
	{path: "/api/instances/{s}/{s}/{s}/", method: "GET", names: [][]string{schemaNames, keyNames, keyNames}},
	{path: "/api/instances/{s}", method: "GET"},
	{path: "/api/instances/{s}/", method: "POST", body: "load", query: []string{"dryrun=1"}, names: [][]string{schemaNames}},
	{path: "/api/instances/{s}/{s}/", method: "PUT", body: "load", query: []string{"dryrun=1"}, names: [][]string{schemaNames, keyNames}},
	{path: "/api/instances/{s}/{s}/", method: "PATCH", body: "load", query: []string{"dryrun=1"}, names: [][]string{schemaNames, keyNames}},
	{path: "/api/instances/{s}/{s}/", method: "DELETE", query: []string{"dryrun=1"}, names: [][]string{schemaNames, keyNames}},
	{path: "/api/load/", method: "POST", body: "load", query: []string{"dryrun=1", "action=update", "pipeline=bulk_delete_disabled"}},
	{path: "/api/load", method: "POST", body: "load"},
	{path: "/api/rawfile/", method: "POST", body: "csv", query: []string{"schema=server", "schema=server&delimiter=,", "schema=server&encoding=latin1"}},
	{path: "/api/conf/", method: "GET"},
	{path: "/api/conf/", method: "POST", body: "conf"},
	{path: "/api/", method: "GET"},
	{path: "/", method: "GET"},
	{path: "/api/{s}/", method: "GET"},
	{path: "/api//load/", method: "POST", body: "load"},
	{path: "/API/LOAD/", method: "POST", body: "load"},
	{path: "/api/load/%2e%2e/", method: "POST", body: "load"},
	{path: "/%2e%2e/api/load/", method: "POST", body: "load"},
}

// writeRoutes are the routes that read a body or change data.
var writeRoutes = func() []routeSpec {
	var out []routeSpec
	for _, r := range hostileRoutes {
		switch r.path {
		case "/api/load/", "/api/rawfile/", "/api/conf/", "/api/pipelines/{s}/", "/api/tasks/{task}/cancel/":
			if r.method == "POST" {
				out = append(out, r)
			}
		case "/api/instances/{s}/", "/api/instances/{s}/{s}/":
			if r.method != "GET" {
				out = append(out, r)
			}
		}
	}
	return out
}()

var hostileMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "PROPFIND", "get"}

var hostileAccept = []string{"", "", "", "application/json", "application/yaml", "text/yaml, application/json", "*/*", "text/html",
	"\xff\xfe", strings.Repeat("a", 20<<10)}

var hostileContentTypes = []string{"", "application/json", "application/yaml", "text/csv", "multipart/form-data; boundary=x",
	"application/x-www-form-urlencoded", "text/plain; charset=\xff"}

// hostileBody is a body generator: the label names it in failure messages.
type hostileBody struct {
	label string
	gen   func(rng *rand.Rand) []byte
}

func fixed(s string) func(*rand.Rand) []byte { return func(*rand.Rand) []byte { return []byte(s) } }

// billionLaughs is the classic alias bomb: 9^depth values from a few lines.
func billionLaughs(depth int, inEntry bool) string {
	var b strings.Builder
	if inEntry {
		b.WriteString("- classname: server\n  keyname: bomb\n  junk:\n")
	}
	indent := ""
	if inEntry {
		indent = "    "
	}
	fmt.Fprintf(&b, "%sl0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n", indent)
	for i := 1; i <= depth; i++ {
		fmt.Fprintf(&b, "%sl%d: &l%d [", indent, i, i)
		for j := 0; j < 9; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*l%d", i-1)
		}
		b.WriteString("]\n")
	}
	if inEntry {
		fmt.Fprintf(&b, "  hostname: *l%d\n", depth)
	}
	return b.String()
}

// mergeBomb nests merge keys: each level merges the previous one n times.
func mergeBomb(depth, n int) string {
	var b strings.Builder
	b.WriteString("- &m0 {classname: server, keyname: merge0}\n")
	for i := 1; i <= depth; i++ {
		fmt.Fprintf(&b, "- &m%d {<<: [", i)
		for j := 0; j < n; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*m%d", i-1)
		}
		fmt.Fprintf(&b, "], keyname: merge%d}\n", i)
	}
	return b.String()
}

// emptyMergeBomb merges empty mappings: nothing is produced, only work.
func emptyMergeBomb(depth int) string {
	var b strings.Builder
	b.WriteString("e0: &e0 {}\n")
	for i := 1; i <= depth; i++ {
		fmt.Fprintf(&b, "e%d: &e%d {<<: [*e%d, *e%d, *e%d, *e%d, *e%d, *e%d, *e%d, *e%d]}\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	return b.String()
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	return b
}

var loadBodies = []hostileBody{
	{"valid entries", func(rng *rand.Rand) []byte {
		return fmt.Appendf(nil, "- {classname: server, keyname: h%d, hostname: x%d}\n- {classname: server, keyname: srv1, site: s%d}\n",
			rng.IntN(50), rng.IntN(1000), rng.IntN(5))
	}},
	{"valid JSON", fixed(`[{"classname": "server", "keyname": "j1", "hostname": "json"}]`)},
	{"YAML unterminated flow", fixed("- {classname: server, keyname: [\n")},
	{"YAML colons", fixed(": : :\n")},
	{"YAML tab indent", fixed("-\tclassname: server\n\t keyname: x\n")},
	{"YAML mixed", fixed("key: value\n  - mixed\n")},
	{"YAML missing space", fixed("- classname:server\n  keyname:x\n  hostname:y\n")},
	{"JSON missing value", fixed(`[{"classname": "server", "keyname": }]`)},
	{"JSON trailing comma", fixed(`{"a":1,}`)},
	{"JSON unterminated", fixed(`[1,2`)},
	{"scalar", fixed("42")},
	{"null", fixed("null")},
	{"list of scalars", fixed("[1, two, null, {}]")},
	{"empty", fixed("")},
	{"whitespace", fixed(" \n\t\n")},
	{"several documents", fixed("- {classname: server, keyname: d1}\n---\n- {classname: server, keyname: d2}\n---\nscalar\n")},
	{"alias bomb document", fixed(billionLaughs(9, false))},
	{"alias bomb in an entry", fixed(billionLaughs(9, true))},
	{"alias bomb of keys", fixed("- &k {classname: server, keyname: ak}\n- {*k : 1}\n")},
	{"unknown alias", fixed("- {classname: server, keyname: *nope}\n")},
	{"self-referencing alias", fixed("- &a [*a]\n")},
	{"merge bomb", fixed(mergeBomb(12, 10))},
	{"empty merge bomb", fixed(emptyMergeBomb(12))},
	{"merge of a scalar", fixed("- {<<: 1, classname: server, keyname: m}\n")},
	{"deep flow lists", fixed(strings.Repeat("[", 9999) + strings.Repeat("]", 9999))},
	{"too deep flow lists", fixed(strings.Repeat("[", 20000))},
	{"deep flow maps", fixed("- {classname: server, keyname: deep, junk: " + strings.Repeat("{a: ", 9990) + "1" + strings.Repeat("}", 9990) + "}\n")},
	{"deep block and flow", fixed(strings.Repeat("- ", 5000) + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + "\n")},
	{"deep in a field", fixed("- {classname: server, keyname: deepf, hostname: " + strings.Repeat("[", 9990) + "x" + strings.Repeat("]", 9990) + "}\n")},
	{"huge value", func(*rand.Rand) []byte {
		return []byte("- {classname: server, keyname: big, hostname: " + strings.Repeat("v", 700<<10) + "}\n")
	}},
	{"huge keyname", fixed("- {classname: server, keyname: " + strings.Repeat("k", 100<<10) + "}\n")},
	{"over the body limit", func(*rand.Rand) []byte {
		return []byte("- {classname: server, keyname: over, hostname: " + strings.Repeat("v", hostileMaxBody+100<<10) + "}\n")
	}},
	{"many entries", func(rng *rand.Rand) []byte {
		var b strings.Builder
		for i := 0; i < 3000; i++ {
			fmt.Fprintf(&b, "- {classname: server, keyname: m%d, hostname: h%d}\n", i, rng.IntN(9))
		}
		return []byte(b.String())
	}},
	{"invalid UTF-8", fixed("- {classname: server, keyname: \xff\xfe, hostname: \xc0\xaf}\n")},
	{"lone surrogate escape", fixed(`[{"classname": "server", "keyname": "a\udc00", "hostname": "\ud800"}]`)},
	{"NUL byte", fixed("- {classname: server, keyname: nul, hostname: a\x00b}\n")},
	{"escaped NUL", fixed("- {classname: server, keyname: \"n\\0l\", displayname: \"a\\0b\", hostname: \"c\\0d\"}\n")},
	{"JSON NUL escape", fixed(`[{"classname": "server", "keyname": "nulj", "displayname": "x\u0000y", "hostname": "a\u0000b"}]`)},
	{"SQL in names", fixed("- {classname: \"' OR 1=1 --\", keyname: \"'; DROP TABLE instances; --\"}\n- {classname: server, keyname: \"x'); DELETE FROM permissions; --\"}\n")},
	{"CSV injection values", fixed("- {classname: server, keyname: csvinj, hostname: \"=cmd|' /C calc'!A0\", site: \"@SUM(1+1)\"}\n")},
	{"delete built-in permission", fixed("- {classname: _permission, keyname: p_data_access, _action: delete}\n")},
	{"delete admin", fixed("- {classname: _user, keyname: admin, _action: delete}\n")},
	{"unknown action", fixed("- {classname: server, keyname: srv1, _action: explode}\n")},
	{"delete instance", fixed("- {classname: server, keyname: srv3, _action: delete}\n")},
	{"disable instance", fixed("- {classname: server, keyname: srv1, _action: disable}\n")},
	{"new API key with every permission", fixed("- {classname: _apikey, keyname: sneaky, secret: sneaky-secret, is_readonly: false, permissions: [\"role:role_admin\"]}\n")},
	{"new user", fixed("- {classname: _user, keyname: mallory, password: mallory-pw}\n- {classname: _role, keyname: role_admin, users: [admin, mallory]}\n")},
	{"hostile schema", fixed(`
- classname: _schema
  keyname: evil
  keyname_mode: dataformat ipv4 subnet strict
  self: {dataformat: schema, dataformat_ext: evil}
  ext: {dataformat: external, dataformat_ext: self ext}
  num: {dataformat: int, dataformat_ext: gte_1 lte_3}
  js: {dataformat: text, dataformat_ext: json}
  ym: {dataformat: text, dataformat_ext: yaml}
- {classname: evil, keyname: 10.0.0.0/8, num: 99, js: "{", ym: "a: [", self: 10.0.0.0/8}
- {classname: evil, keyname: 10.0.0.1/8}
`)},
	{"schema with bad dataformats", fixed("- {classname: _schema, keyname: bad1, f: {dataformat: colour}, keyname_mode: \"dataformat secret\"}\n- {classname: _schema, keyname: \"Bad Name\"}\n- {classname: _schema, keyname: _evil}\n")},
	{"pipeline with invalid content", fixed("- {classname: _pipeline, keyname: badpipe, content: \"- explode: [x]\"}\n")},
	{"pipeline with alias bomb content", func(*rand.Rand) []byte {
		return []byte("- classname: _pipeline\n  keyname: bombpipe\n  content: |\n" + indentLines(billionLaughs(9, false), "    "))
	}},
	{"ipam entries", fixed("- {classname: ipam_ip, keyname: 10.0.0.1}\n- {classname: ipam_ip, displayname: 300.1.1.1}\n- {classname: ipam_subnet, keyname: 10.0.0.1/24}\n")},
	{"random bytes", func(rng *rand.Rand) []byte { return randomBytes(rng, rng.IntN(4000)) }},
	{"random printable", func(rng *rand.Rand) []byte {
		const chars = "-:[]{}&*!|>'\"%@` \n\t#,?abc123<<"
		b := make([]byte, rng.IntN(2000))
		for i := range b {
			b[i] = chars[rng.IntN(len(chars))]
		}
		return b
	}},
}

func indentLines(s, indent string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = indent + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

var csvBodies = []hostileBody{
	{"valid CSV", fixed("keyname;hostname\ncsv1;alpha\ncsv2;beta\n")},
	{"ragged rows", fixed("keyname;hostname;site\nr1;a\nr2;b;c;d;e\nr3\n")},
	{"CSV injection", fixed("keyname;hostname;site\ninj1;=cmd|' /C calc'!A0;@SUM(1+1)\ninj2;+1+2;-2+3\ninj3;\"=HYPERLINK(\"\"http://x\"\")\";\t=1\n")},
	{"CSV NUL", fixed("keyname;hostname\nnul1;a\x00b\n\x00;x\n")},
	{"CSV BOM", fixed("\xef\xbb\xbfkeyname;hostname\nbom1;x\n")},
	{"CSV unterminated quote", fixed("keyname;hostname\n\"open;x\n")},
	{"CSV bare quote", fixed("keyname;hostname\nq\"1;x\n")},
	{"CSV empty", fixed("")},
	{"CSV header only", fixed("keyname;hostname\n")},
	{"CSV no keyname column", fixed("name;hostname\nx;y\n")},
	{"CSV duplicate column", fixed("keyname;keyname\nx;y\n")},
	{"CSV empty column name", fixed("keyname;;x\na;b;c\n")},
	{"CSV classname column", fixed("keyname;classname;hostname\nc1;_apikey;x\n")},
	{"CSV invalid UTF-8", fixed("keyname;hostname\ncaf\xe9;\xff\n")},
	{"CSV SQL", fixed("keyname;hostname\n'; DROP TABLE instances; --;' OR 1=1 --\n")},
	{"CSV huge cell", func(*rand.Rand) []byte {
		return []byte("keyname;hostname\nhuge;" + strings.Repeat("h", 600<<10) + "\n")
	}},
	{"CSV many columns", func(*rand.Rand) []byte {
		var b strings.Builder
		b.WriteString("keyname")
		for i := 0; i < 5000; i++ {
			fmt.Fprintf(&b, ";c%d", i)
		}
		b.WriteString("\nwide")
		b.WriteString(strings.Repeat(";v", 5000))
		b.WriteString("\n")
		return []byte(b.String())
	}},
	{"CSV many rows", func(rng *rand.Rand) []byte {
		var b strings.Builder
		b.WriteString("keyname;hostname\n")
		for i := 0; i < 3000; i++ {
			fmt.Fprintf(&b, "row%d;h%d\n", i, rng.IntN(9))
		}
		return []byte(b.String())
	}},
	{"CSV CR only", fixed("keyname;hostname\rcr1;x\r")},
	{"random bytes", func(rng *rand.Rand) []byte { return randomBytes(rng, rng.IntN(4000)) }},
}

var confBodies = []hostileBody{
	{"valid conf", fixed(`{"DATA_DEFAULT_SIZE": "100"}`)},
	{"negative queue", fixed(`{"QUEUE_MAX": "-1"}`)},
	{"zero max size", fixed(`{"DATA_MAX_SIZE": "0"}`)},
	{"huge number", fixed(`{"TASK_RETENTION_DAYS": "99999999999999999999"}`)},
	{"empty delimiter", fixed(`{"CSV_DELIMITER": ""}`)},
	{"long delimiter", fixed(`{"CSV_DELIMITER": ";;"}`)},
	{"quote delimiter", fixed(`{"CSV_DELIMITER": "\""}`)},
	{"unknown key", fixed(`{"NOPE": 1}`)},
	{"list value", fixed(`{"DATA_MAX_SIZE": [1, 2]}`)},
	{"map value", fixed(`{"DATA_MAX_SIZE": {"a": 1}}`)},
	{"null value", fixed(`{"DATA_MAX_SIZE": null}`)},
	{"list body", fixed(`[{"DATA_MAX_SIZE": "10"}, {"QUEUE_MAX": "5"}]`)},
	{"empty object", fixed(`{}`)},
	{"SQL value", fixed(`{"GLOBAL_APPNAME": "x'); DELETE FROM configuration; --"}`)},
	{"huge value", func(*rand.Rand) []byte { return []byte(`{"GLOBAL_APPNAME": "` + strings.Repeat("a", 500<<10) + `"}`) }},
	{"alias bomb", fixed(billionLaughs(9, false))},
	{"invalid JSON", fixed(`{"QUEUE_MAX":`)},
	{"random bytes", func(rng *rand.Rand) []byte { return randomBytes(rng, rng.IntN(2000)) }},
}

// allBodies is every body, for requests whose route takes none.
var allBodies = append(append(append([]hostileBody{}, loadBodies...), csvBodies...), confBodies...)

// hostileGen draws requests from the pools.
type hostileGen struct {
	rng    *rand.Rand
	creds  []hostileCred
	handle string // a real task handle
}

func pick[T any](rng *rand.Rand, l []T) T { return l[rng.IntN(len(l))] }

// cred draws a credential variant: accepted ones two times in three, costly ones only
// one time in 40.
func (g *hostileGen) cred() hostileCred {
	wantGood := g.rng.IntN(3) < 2
	for i := 0; i < 1000; i++ {
		c := pick(g.rng, g.creds)
		if wantGood && !c.good {
			continue
		}
		if !c.costly || g.rng.IntN(40) == 0 {
			return c
		}
	}
	return g.creds[0]
}

// request draws one request; the non-negative arguments fix an axis (route, method,
// segment, query, body, credential) so that every value of every axis is tried.
func (g *hostileGen) request(route, method, segment, query, body, cred int) *hostileReq {
	rng := g.rng
	r := &hostileReq{header: http.Header{}}
	var rs routeSpec
	switch {
	case route >= 0:
		rs = hostileRoutes[route]
	case rng.IntN(3) < 2:
		// Most random requests go to the endpoints that read a body or change data.
		rs = pick(rng, writeRoutes)
	default:
		rs = pick(rng, hostileRoutes)
	}
	path := rs.path
	for n := 0; strings.Contains(path, "{s}"); n++ {
		seg := pick(rng, hostileSegments)
		if n < len(rs.names) && rng.IntN(2) == 0 {
			seg = pick(rng, rs.names[n])
		}
		if segment >= 0 {
			seg = hostileSegments[segment]
			segment = -1
		}
		path = strings.Replace(path, "{s}", seg, 1)
	}
	path = strings.ReplaceAll(path, "{task}", g.handle)
	r.what = append(r.what, "route "+rs.path)

	switch {
	case method >= 0:
		r.method = hostileMethods[method]
	case rng.IntN(10) < 7:
		r.method = rs.method
	default:
		r.method = pick(rng, hostileMethods)
	}

	var qs []string
	if len(rs.query) > 0 && rng.IntN(3) > 0 {
		qs = append(qs, pick(rng, rs.query))
	}
	if query >= 0 {
		qs = append(qs, hostileQueries[query])
	} else {
		for n := rng.IntN(3); n > 0; n-- {
			qs = append(qs, pick(rng, hostileQueries))
		}
	}
	rng.Shuffle(len(qs), func(i, j int) { qs[i], qs[j] = qs[j], qs[i] })
	r.target = path
	if len(qs) > 0 {
		r.target += "?" + strings.Join(qs, "&")
		r.what = append(r.what, "query "+hostileClip(strings.Join(qs, "&"), 80))
	}

	var b hostileBody
	switch {
	case body >= 0:
		b = allBodies[body]
	case r.method == "GET" || r.method == "HEAD":
		if rng.IntN(10) == 0 {
			b = pick(rng, allBodies)
		}
	case rs.body == "load" && rng.IntN(10) < 8:
		b = pick(rng, loadBodies)
	case rs.body == "csv" && rng.IntN(10) < 8:
		b = pick(rng, csvBodies)
	case rs.body == "conf" && rng.IntN(10) < 8:
		b = pick(rng, confBodies)
	case rng.IntN(3) == 0:
		b = pick(rng, allBodies)
	}
	if b.gen != nil {
		r.body = b.gen(rng)
		r.chunked = rng.IntN(5) == 0
		r.what = append(r.what, "body "+b.label)
		if r.chunked {
			r.what = append(r.what, "chunked")
		}
	}

	var c hostileCred
	if cred >= 0 {
		c = g.creds[cred]
	} else {
		c = g.cred()
	}
	c.set(r.header)
	r.what = append(r.what, "cred "+c.name)
	r.refused = !c.good

	if a := pick(rng, hostileAccept); a != "" {
		r.header.Set("Accept", a)
	}
	if ct := pick(rng, hostileContentTypes); ct != "" && r.body != nil {
		r.header.Set("Content-Type", ct)
	}
	switch rng.IntN(12) {
	case 0:
		r.header.Set("X-Forwarded-For", "10.1.2.3")
		r.header.Set("X-Real-IP", "10.1.2.3")
		r.what = append(r.what, "forwarded-for")
	case 1:
		r.header.Set("X-Junk", strings.Repeat("j", 50<<10))
		r.what = append(r.what, "50 KB header")
	case 2:
		r.header.Set("X-Junk", "\xff\xfe\xfd non-UTF-8")
	case 3:
		r.host = "evil.example:666"
		r.what = append(r.what, "host evil.example")
	case 4:
		r.header.Set("Expect", "100-continue")
		r.what = append(r.what, "expect 100-continue")
	case 5:
		r.header.Set("X-HTTP-Method-Override", "DELETE")
	}
	return r
}

// hostileStats counts what the server answered.
type hostileStats struct {
	tried    int
	statuses map[int]int
	byRoute  map[string]map[int]int
}

func newHostileStats() *hostileStats {
	return &hostileStats{statuses: map[int]int{}, byRoute: map[string]map[int]int{}}
}

func (st *hostileStats) count(r *hostileReq, status int) {
	st.tried++
	st.statuses[status]++
	route := r.method + " " + strings.TrimPrefix(r.what[0], "route ")
	if st.byRoute[route] == nil {
		st.byRoute[route] = map[int]int{}
	}
	st.byRoute[route][status]++
}

// send makes the request and checks the reply: no 5xx, no transport failure, and a
// JSON (or, when asked for, YAML) object with a non-empty "error" for every status >= 400.
func (e *hostileEnv) send(r *hostileReq, st *hostileStats) error {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
		if r.chunked {
			body = io.MultiReader(bytes.NewReader(r.body)) // unknown length: sent chunked
		}
	}
	req, err := http.NewRequest(r.method, e.srv.URL+r.target, body)
	if err != nil {
		return fmt.Errorf("build request: %v", err)
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	if r.host != "" {
		req.Host = r.host
	}
	client := e.client
	if r.refused {
		client = e.refusing
	}
	resp, err := client.Do(req)
	if err != nil {
		st.count(r, 0)
		return fmt.Errorf("transport: %v", err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	st.count(r, resp.StatusCode)
	if err != nil {
		return fmt.Errorf("status %d: read body: %v", resp.StatusCode, err)
	}
	if resp.StatusCode >= 500 {
		return fmt.Errorf("status %d: %s", resp.StatusCode, hostileClip(string(got), 300))
	}
	if resp.StatusCode == http.StatusUnauthorized && len(resp.Header.Values("WWW-Authenticate")) == 0 {
		return fmt.Errorf("401 without WWW-Authenticate")
	}
	ct := resp.Header.Get("Content-Type")
	if resp.StatusCode < 300 && len(got) > 0 {
		var v any
		switch ct {
		case "application/json; charset=utf-8":
			err = json.Unmarshal(got, &v)
		case "application/yaml; charset=utf-8":
			err = yaml.Unmarshal(got, &v)
		default:
			err = fmt.Errorf("unexpected Content-Type %q", ct)
		}
		if err != nil {
			return fmt.Errorf("status %d: reply does not decode: %v: %s", resp.StatusCode, err, hostileClip(string(got), 300))
		}
	}
	if resp.StatusCode < 400 || r.method == "HEAD" {
		return nil
	}
	if resp.StatusCode == http.StatusRequestHeaderFieldsTooLarge && strings.HasPrefix(string(got), "431 Request Header Fields Too Large") {
		// net/http refuses headers over MaxHeaderBytes before any handler runs.
		return nil
	}
	var m map[string]any
	switch ct {
	case "application/json; charset=utf-8":
		err = json.Unmarshal(got, &m)
	case "application/yaml; charset=utf-8":
		err = yaml.Unmarshal(got, &m)
	default:
		return fmt.Errorf("status %d with Content-Type %q: %s", resp.StatusCode, ct, hostileClip(string(got), 300))
	}
	if err != nil {
		return fmt.Errorf("status %d: body is not a %s object: %v: %s", resp.StatusCode, ct, err, hostileClip(string(got), 300))
	}
	if msg, _ := m["error"].(string); msg == "" || len(m) != 2 || m["errors"] == nil {
		return fmt.Errorf("status %d: body is not {\"error\": message, \"errors\": [...]}: %s", resp.StatusCode, hostileClip(string(got), 300))
	}
	return nil
}

// sweep draws and sends n requests: first one per value of every axis, then random
// ones. It stops at the first 20 failures.
func (e *hostileEnv) sweep(t *testing.T, g *hostileGen, n int, st *hostileStats) {
	t.Helper()
	var plan []func() *hostileReq
	for pass := 0; pass < 2; pass++ {
		for i := range hostileRoutes {
			for m := range hostileMethods {
				plan = append(plan, func() *hostileReq { return g.request(i, m, -1, -1, -1, -1) })
			}
		}
		for i := range hostileSegments {
			plan = append(plan, func() *hostileReq { return g.request(-1, -1, i, -1, -1, -1) })
		}
		for i := range hostileQueries {
			plan = append(plan, func() *hostileReq { return g.request(-1, -1, -1, i, -1, -1) })
		}
		for i := range allBodies {
			plan = append(plan, func() *hostileReq { return g.request(-1, -1, -1, -1, i, -1) })
		}
		for i := range g.creds {
			plan = append(plan, func() *hostileReq { return g.request(-1, -1, -1, -1, -1, i) })
		}
	}
	for len(plan) < n {
		plan = append(plan, func() *hostileReq { return g.request(-1, -1, -1, -1, -1, -1) })
	}
	deadline := time.Now().Add(4 * time.Minute) // a hang guard, far above the normal run
	failures := 0
	for i, next := range plan {
		if time.Now().After(deadline) {
			t.Fatalf("hang guard: only %d of %d requests sent in 4 minutes", i, len(plan))
		}
		r := next()
		if err := e.send(r, st); err != nil {
			failures++
			t.Errorf("request %d: %s: %v", i, r, err)
			if failures >= 20 {
				t.Fatalf("stopping after %d failures", failures)
			}
		}
	}
}

// burst sends n generated requests from several goroutines at once, so that loads,
// configuration changes, cancellations and reads contend for the database.
func (e *hostileEnv) burst(t *testing.T, g *hostileGen, workers, n int, st *hostileStats) {
	t.Helper()
	reqs := make([]*hostileReq, n) // drawn up front: the sequence stays seeded
	for i := range reqs {
		reqs[i] = g.request(-1, -1, -1, -1, -1, -1)
	}
	stats := make([]*hostileStats, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		stats[w] = newHostileStats()
		wg.Add(1)
		go func() {
			defer wg.Done()
			failures := 0
			for i := w; i < n && failures < 5; i += workers {
				if err := e.send(reqs[i], stats[w]); err != nil {
					failures++
					t.Errorf("concurrent request %d: %s: %v", i, reqs[i], err)
				}
			}
		}()
	}
	wg.Wait()
	for _, ws := range stats {
		st.tried += ws.tried
		for c, k := range ws.statuses {
			st.statuses[c] += k
		}
		for r, m := range ws.byRoute {
			if st.byRoute[r] == nil {
				st.byRoute[r] = map[int]int{}
			}
			for c, k := range m {
				st.byRoute[r][c] += k
			}
		}
	}
}

// checkLog fails when the server log shows a recovered panic or an internal error.
func (e *hostileEnv) checkLog(t *testing.T) {
	t.Helper()
	out := e.log.String()
	for _, bad := range []string{"handler panic", "panic serving", "task panicked", "request failed", "encode json reply", "encode yaml reply"} {
		if i := strings.Index(out, bad); i >= 0 {
			start := max(0, i-200)
			t.Errorf("server log shows %q: %s", bad, hostileClip(out[start:], 800))
		}
	}
}

func hostileSeedValue(t *testing.T) uint64 {
	t.Helper()
	return testkit.Seed(t, "DATASERVICE_HOSTILE_SEED", hostileSeed)
}

func histogram(m map[int]int) string {
	codes := make([]int, 0, len(m))
	for c := range m {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	parts := make([]string, 0, len(codes))
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d×%d", c, m[c]))
	}
	return strings.Join(parts, " ")
}

const hostileFixture = `
- classname: _schema
  keyname: server
  hostname: {dataformat: string}
  site: {dataformat: string}
  addr: {dataformat: ipv4}
- {classname: server, keyname: srv1, hostname: alpha, addr: 10.0.0.1}
- {classname: server, keyname: srv2, hostname: beta, is_enabled: false}
- {classname: server, keyname: srv3, hostname: gamma}
- {classname: _user, keyname: bob, password: bob-password}
`

// hostileKeys creates the API keys the sweeps use and returns their secrets by name.
func (e *hostileEnv) hostileKeys() map[string]string {
	e.t.Helper()
	keys := []struct {
		name, perms, extra string
	}{
		{"full", `["role:role_admin"]`, "is_readonly: false"},
		{"bobkey", `["role:role_admin"]`, "is_readonly: false, user: bob"},
		{"ro", `["role:role_admin"]`, "is_readonly: true"},
		{"nowrite", `[p_data_access, p_data_read, p_pipeline_run, p_api_load, p_api_rawfile, p_api_conf, p_conf_view, p_data_export]`,
			"is_readonly: false"},
		{"off", `["role:role_admin"]`, "is_readonly: false, is_enabled: false"},
		{"old", `["role:role_admin"]`, "is_readonly: false, expires: 2020-01-01"},
		{"far", `["role:role_admin"]`, "is_readonly: false, ip_filter: [10.0.0.0/8]"},
	}
	secrets := map[string]string{}
	var doc strings.Builder
	for _, k := range keys {
		secret := "hostile-" + k.name + "-secret"
		secrets[k.name] = secret
		fmt.Fprintf(&doc, "- {classname: _apikey, keyname: %s, secret: '%s', permissions: %s, %s}\n",
			k.name, legacyHash("salt-"+k.name, secret), k.perms, k.extra)
	}
	e.load(doc.String())
	return secrets
}

// TestHostileInput sends a few thousand generated hostile requests. Phase 1 uses only
// credentials that may not change anything (a read-only key holding every permission,
// a key holding the endpoints' gates but no write permission, refused full-permission
// keys, malformed and missing credentials) and compares the tables before and after:
// identical. Phase 2 adds good credentials with every permission (writes happen). In
// both: no 5xx, no transport failure, every error a JSON or YAML {"error": message},
// and no recovered panic or internal error in the server log.
func TestHostileInput(t *testing.T) {
	t.Parallel()
	testkit.Slow(t)
	e := newHostileEnv(t)
	e.load(hostileFixture)
	secrets := e.hostileKeys()
	ctx := context.Background()
	fullAuth, _, err := e.db.KeyAuth(ctx, "full")
	if err != nil {
		t.Fatal(err)
	}
	handle, err := e.runner.Submit(ctx, tasks.Params{Pipeline: "bulk_delete_disabled", Schemas: []string{"server"},
		DryRun: true, Auth: fullAuth, OwnerType: "api", OwnerID: "system"})
	if err != nil {
		t.Fatal(err)
	}
	seed := hostileSeedValue(t)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	restricted := newHostileStats()
	t.Run("restricted credentials change nothing", func(t *testing.T) {
		var creds []hostileCred
		for _, k := range []string{"ro", "nowrite"} {
			creds = append(creds, garbageCreds(k, secrets[k])...)
		}
		for _, k := range []string{"off", "old", "far"} {
			creds = append(creds, hostileCred{name: "refused key " + k, set: func(h http.Header) {
				h.Set("Authorization", "Bearer "+k+":"+secrets[k])
			}})
		}
		creds = append(creds, hostileCred{name: "ip-filtered key behind a forged X-Forwarded-For", set: func(h http.Header) {
			h.Set("Authorization", "Bearer far:"+secrets["far"])
			h.Set("X-Forwarded-For", "10.0.0.1")
			h.Set("X-Real-IP", "10.0.0.1")
			h.Set("Forwarded", "for=10.0.0.1")
		}})
		before := e.snapshot()
		e.sweep(t, &hostileGen{rng: rng, creds: creds, handle: handle}, 1700, restricted)
		sameSnapshot(t, before, e.snapshot())
		e.checkLog(t)
	})

	full := newHostileStats()
	t.Run("every credential", func(t *testing.T) {
		e.start()
		creds := garbageCreds("full", secrets["full"])
		creds = append(creds, garbageCreds("bobkey", secrets["bobkey"])...)
		creds = append(creds, garbageCreds("ro", secrets["ro"])[1:3]...)
		creds = append(creds, hostileCred{name: "admin basic", good: true, set: func(h http.Header) {
			h.Set("Authorization", "Basic "+b64("admin:hostile-admin-pw"))
		}}, hostileCred{name: "bob basic", good: true, set: func(h http.Header) {
			h.Set("Authorization", "Basic "+b64("bob:bob-password"))
		}})
		g := &hostileGen{rng: rng, creds: creds, handle: handle}
		e.sweep(t, g, 1700, full)
		e.burst(t, g, 4, 600, full)
		e.stop()
		e.checkLog(t)
		// integrity_check on a fresh connection: FTS5's check reuses the index structure a
		// connection cached when it last read the index, so on a pooled reader that
		// searched before later writes it reports a checksum mismatch or a missing blob
		// in a sound file (see TestSearchIndexFreshOnPooledReaders).
		if e.db.IsFile() { // SQLite's FTS5 index; PostgreSQL's engine maintains its own
			// Exact for every row not listed while the catch-up may still run, then equal
			// to a rebuilt index once it caught up.
			testkit.CheckSearchIndex(t, e.db.Path(), "after the hostile requests") // integrity_check included
			if _, err := e.db.CatchUpSearch(context.Background()); err != nil {
				t.Fatal(err)
			}
			testkit.CheckSearchIndexCaughtUp(t, e.db.Path(), "after the catch-up")
		}
	})
	all := map[int]int{}
	routes := map[string]map[int]int{}
	for _, st := range []*hostileStats{restricted, full} {
		for c, n := range st.statuses {
			all[c] += n
		}
		for r, m := range st.byRoute {
			if routes[r] == nil {
				routes[r] = map[int]int{}
			}
			for c, n := range m {
				routes[r][c] += n
			}
		}
	}
	names := make([]string, 0, len(routes))
	for r := range routes {
		names = append(names, r)
	}
	sort.Strings(names)
	for _, r := range names {
		t.Logf("  %s: %s", r, histogram(routes[r]))
	}
	t.Logf("restricted credentials: %d requests: %s", restricted.tried, histogram(restricted.statuses))
	t.Logf("every credential: %d requests (600 of them from 4 goroutines at once): %s", full.tried, histogram(full.statuses))
	t.Logf("RELIABILITY hostile requests: %d; statuses: %s", restricted.tried+full.tried, histogram(all))
}

// TestHostileConfigDelimiter: /api/conf/ refuses a CSV_DELIMITER that /api/rawfile/
// cannot use. It used to store a quote, a newline, NUL or U+FFFD, after which every
// /api/rawfile/ request without a delimiter parameter was a 400.
func TestHostileConfigDelimiter(t *testing.T) {
	t.Parallel()
	e := newHostileEnv(t)
	e.load(hostileFixture)
	post := func(path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, e.srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("admin", "hostile-admin-pw")
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, d := range []string{`"\""`, `"\n"`, `"\r"`, `"\u0000"`, `"\ufffd"`} {
		t.Run(d+" is refused", func(t *testing.T) {
			code, body := post("/api/conf/", `{"CSV_DELIMITER": `+d+`}`)
			if code != http.StatusBadRequest || !strings.Contains(body, "CSV_DELIMITER") {
				t.Fatalf("POST /api/conf/ CSV_DELIMITER %s: %d %s, want 400 naming CSV_DELIMITER", d, code, body)
			}
			if got := e.db.ConfigValue(context.Background(), "CSV_DELIMITER"); got != ";" {
				t.Fatalf("CSV_DELIMITER = %q after a refused update, want ;", got)
			}
		})
	}
	t.Run("a delimiter the configuration accepts works for rawfile", func(t *testing.T) {
		for _, d := range []string{",", "\t", "|", "€"} {
			if code, body := post("/api/conf/", `{"CSV_DELIMITER": "`+d+`"}`); code != http.StatusOK {
				t.Fatalf("CSV_DELIMITER %q: %d %s", d, code, body)
			}
			if code, body := post("/api/rawfile/?schema=server", "keyname"+d+"hostname\nd1"+d+"x\n"); code != http.StatusOK {
				t.Fatalf("rawfile with CSV_DELIMITER %q: %d %s", d, code, body)
			}
		}
	})
}

// FuzzConfigBody: the /api/conf/ body parser and validation never panic; an accepted
// update names keys with scalar values, and an accepted CSV_DELIMITER splits a CSV line.
func FuzzConfigBody(f *testing.F) {
	for _, b := range confBodies {
		f.Add(b.gen(rand.New(rand.NewPCG(1, 2))))
	}
	for _, s := range []string{`{"CSV_DELIMITER": ","}`, "CSV_DELIMITER: \"\\t\"\n", `{"CSV_DELIMITER": "\u00a0"}`,
		"DATA_MAX_SIZE: 0x10\n", "QUEUE_MAX: 1_000\n", "QUEUE_MAX: +5\n", "{CSV_DELIMITER: \"\\xff\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		updates, err := parseConfigUpdates(body)
		if err != nil {
			return
		}
		if len(updates) == 0 {
			t.Fatalf("parseConfigUpdates(%q) accepted no key", body)
		}
		for k, v := range updates {
			if store.ValidateConfig(k, v) != nil || k != "CSV_DELIMITER" {
				continue
			}
			r := csv.NewReader(strings.NewReader("a" + v + "b\n"))
			r.Comma = []rune(v)[0]
			rec, err := r.Read()
			if err != nil || len(rec) != 2 || rec[0] != "a" || rec[1] != "b" {
				t.Fatalf("accepted CSV_DELIMITER %q does not split a CSV line: %q, %v", v, rec, err)
			}
		}
	})
}
