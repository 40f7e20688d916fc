package console_test

import (
	"net/http"
	"testing"
)

// A detail page's instance is read with the session's statement: a keyname no
// instance can have (a NUL, bytes that are not UTF-8, which PostgreSQL refuses) is a
// plain 404 that leaves the session alone, and the next page reads as before.
func TestDetailOddKeynamesKeepTheSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(`
- {classname: _schema, keyname: host, note: {dataformat: string}}
- {classname: host, keyname: h1, note: first}
`)
	a := e.browser()
	a.signIn("admin", adminPassword)
	for _, path := range []string{"/data/private/host/%ff%fe/", "/data/private/host/a%00b/", "/data/private/host/missing/",
		"/data/private/%ff/h1/"} {
		p := a.get(path)
		if p.status != http.StatusNotFound {
			t.Fatalf("GET %s: status %d, want 404\n%.600s", path, p.status, p.body)
		}
		want(t, a.get("/data/private/host/h1/"), http.StatusOK, `<td id="v-note"><span class="pre">first</span>`)
	}
}
