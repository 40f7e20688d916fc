package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/server"
	"dataservice/store"
	"dataservice/tasks"
)

// TestMain removes the kit's template databases after the run.
func TestMain(m *testing.M) {
	code := m.Run()
	testkit.Cleanup()
	os.Exit(code)
}

const adminPassword = "admin-pass-1"

// env is the real server over a real, initialised database in a temp dir, on 127.0.0.1.
type env struct {
	t   testing.TB
	db  *store.DB
	srv *httptest.Server
}

func newEnv(t testing.TB, baseURL string) *env {
	t.Helper()
	return newEnvWith(t, baseURL, nil)
}

// newEnvWith is newEnv with the handler wrapped (benchmarks time the server with it).
func newEnvWith(t testing.TB, baseURL string, wrap func(http.Handler) http.Handler) *env {
	t.Helper()
	return newEnvIn(t, "", baseURL, wrap)
}

// newEnvIn is newEnvWith with the database file in dir ("" for a temporary directory).
func newEnvIn(t testing.TB, dir, baseURL string, wrap func(http.Handler) http.Handler) *env {
	t.Helper()
	st := testkit.NewStack(t, testkit.StackOptions{AdminPassword: adminPassword, NoRunner: true, Dir: dir,
		Handler: func(db *store.DB, _ *tasks.Runner) http.Handler {
			var h http.Handler = server.New(server.Options{DB: db, Logger: testkit.Logger(t, slog.LevelWarn), BaseURL: baseURL,
				Version: testkit.Version, VersionDate: testkit.VersionDate})
			if wrap != nil {
				h = wrap(h)
			}
			return h
		}})
	return &env{t: t, db: st.DB, srv: st.Server}
}

// load loads a YAML document with every permission and fails on any entry error.
func (e *env) load(doc string) {
	e.t.Helper()
	testkit.MustLoad(e.t, e.db, doc, store.LoadOptions{})
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
	if form == nil {
		return b.send(method, path, nil, "", hdr)
	}
	return b.send(method, path, strings.NewReader(form.Encode()), "application/x-www-form-urlencoded", hdr)
}

// send makes one request; a request with a body of contentType carries the browser's
// Origin, as browsers send it with a form.
func (b *browser) send(method, path string, body io.Reader, contentType string, hdr map[string]string) page {
	b.e.t.Helper()
	req, err := http.NewRequest(method, b.e.srv.URL+path, body)
	if err != nil {
		b.e.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8") // as browsers send
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
		if b.origin != "" {
			req.Header.Set("Origin", b.origin)
		}
	}
	for k, v := range hdr {
		if v == "" { // an empty value leaves the header out, as a client without it sends
			req.Header.Del(k)
			continue
		}
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
	if err := e.db.Reader().QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return n
}

func (e *env) exec(q string, args ...any) {
	e.t.Helper()
	if err := testkit.Migrator(e.t, e.db).Migrate(context.Background(), func(m *store.Migration) error {
		return m.Exec(context.Background(), q, args...)
	}); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
}
