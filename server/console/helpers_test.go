package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"dataservice/bootstrap"
	"dataservice/builtin"
	"dataservice/server"
	"dataservice/store"
)

const adminPassword = "admin-pass-1"

type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// env is the real server over a real, initialised database in a temp dir, on 127.0.0.1.
type env struct {
	t   testing.TB
	db  *store.DB
	srv *httptest.Server
}

func newEnv(t testing.TB, baseURL string) *env {
	t.Helper()
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(tbWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "console.db"), store.Options{Logger: logger})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	if err := bootstrap.Run(ctx, db, bootstrap.Options{Version: "4.9.0", VersionDate: "2026-11-22",
		Init: builtin.Init(), AdminPassword: adminPassword, Logger: logger}); err != nil {
		t.Fatalf("bootstrap: %v", err)
	}
	srv := httptest.NewServer(server.New(server.Options{DB: db, Logger: logger, BaseURL: baseURL,
		Version: "4.9.0", VersionDate: "2026-11-22"}))
	t.Cleanup(srv.Close)
	return &env{t: t, db: db, srv: srv}
}

// load loads a YAML document with every permission and fails on any entry error.
func (e *env) load(doc string) {
	e.t.Helper()
	entries, err := store.ParseDocument("test", []byte(doc))
	if err != nil {
		e.t.Fatalf("parse: %v", err)
	}
	res, err := e.db.Load(context.Background(), entries, store.LoadOptions{})
	if err != nil || res.Errors != 0 {
		e.t.Fatalf("load: %v %v", err, res.Messages)
	}
}

// browser is an HTTP client with a cookie jar that does not follow redirects.
type browser struct {
	e      *env
	c      *http.Client
	origin string
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{e: e, origin: e.srv.URL, c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type page struct {
	status int
	body   string
	loc    string
	header http.Header
}

func (b *browser) do(method, path string, form url.Values, hdr map[string]string) page {
	b.e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.e.srv.URL+path, body)
	if err != nil {
		b.e.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if b.origin != "" {
			req.Header.Set("Origin", b.origin)
		}
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, body: string(raw), loc: resp.Header.Get("Location"), header: resp.Header}
}

func (b *browser) get(path string) page { return b.do("GET", path, nil, nil) }

func (b *browser) post(path string, form url.Values) page { return b.do("POST", path, form, nil) }

// signIn signs in and fails the test unless it worked.
func (b *browser) signIn(login, password string) {
	b.e.t.Helper()
	p := b.post("/login", url.Values{"login": {login}, "password": {password}, "next": {"/"}})
	if p.status != http.StatusSeeOther || p.loc != "/" {
		b.e.t.Fatalf("sign in as %s: %d %s\n%s", login, p.status, p.loc, p.body)
	}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the session's CSRF token from a page.
func (b *browser) csrf() string {
	b.e.t.Helper()
	p := b.get("/")
	m := csrfRE.FindStringSubmatch(p.body)
	if m == nil {
		b.e.t.Fatalf("no CSRF token on the dashboard: %d\n%s", p.status, p.body)
	}
	return m[1]
}

func want(t testing.TB, p page, status int, contains ...string) {
	t.Helper()
	if p.status != status {
		t.Fatalf("status %d, want %d (location %q)\n%s", p.status, status, p.loc, p.body)
	}
	for _, s := range contains {
		if !strings.Contains(p.body, s) {
			t.Fatalf("page lacks %q:\n%s", s, p.body)
		}
	}
}

func lacks(t testing.TB, p page, s ...string) {
	t.Helper()
	for _, x := range s {
		if strings.Contains(p.body, x) {
			t.Fatalf("page shows %q:\n%s", x, p.body)
		}
	}
}

func (e *env) queryInt(q string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.db.Reader().QueryRow(q, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return n
}

func (e *env) exec(q string, args ...any) {
	e.t.Helper()
	if err := e.db.WithTx(context.Background(), func(tx *store.Tx) error {
		_, err := tx.Exec(q, args...)
		return err
	}); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
}
