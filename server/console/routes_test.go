package console_test

import (
	"net/http"
	"net/url"
	"testing"
)

// TestRoutesAnswerFromTheTable: a method no route of a path answers is 405 with the
// route's methods in Allow, a path no tool or schema declares is 404, and both come
// after the session, CSRF and permission checks.
func TestRoutesAnswerFromTheTable(t *testing.T) {
	e := newRunEnv(t, 10, nil)
	e.load(pipelinePeople)
	b := e.browser()
	b.signIn("admin", adminPassword)
	tok := url.Values{"csrf": {b.csrf()}}
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"POST", "/data/private/", 405, "GET"},
		{"POST", "/data/private/nosuchpage/", 405, "GET"},
		{"POST", "/data/private/host/", 405, "GET"},
		{"POST", "/data/private/host/?do=lookup", 405, "GET"},
		{"POST", "/data/private/ipam/", 405, "GET"},
		{"POST", "/data/private/ipam/10.0.0.0/24/", 405, "GET"},
		{"POST", "/data/private/revision/", 405, "GET"},
		{"POST", "/data/private/pipeline/", 405, "GET"},
		{"POST", "/data/private/task/", 405, "GET"},
		{"POST", "/data/private/task/abc/", 405, "GET"},
		{"POST", "/data/private/task/abc/progress/", 405, "GET"},
		{"GET", "/data/private/task/abc/cancel/", 405, "POST"},
		{"GET", "/data/private/task/abc/other/", 404, ""},
		{"GET", "/data/private/task/abc/progress/more/", 404, ""},
		{"GET", "/data/private/pipeline/tag/more/", 404, ""},
		{"GET", "/data/private/revision/1/more/", 404, ""},
		{"GET", "/data/private/import/more/", 404, ""},
		{"POST", "/data/private/code_editor/more/", 404, ""},
		{"GET", "/data/private/configuration/more/", 404, ""},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			var form url.Values
			if tc.method == "POST" {
				form = tok
			}
			p := b.do(tc.method, tc.path, form, nil)
			want(t, p, tc.status, map[int]string{405: "method not allowed", 404: "not found"}[tc.status])
			if got := p.header.Get("Allow"); got != tc.allow {
				t.Fatalf("Allow %q, want %q", got, tc.allow)
			}
		})
	}

	t.Run("the permission check comes before the method check", func(t *testing.T) {
		v := e.browser()
		v.signIn("viewer", "viewer-pass-1")
		want(t, v.get("/data/private/task/abc/cancel/"), http.StatusForbidden)
	})
	t.Run("the CSRF check comes before the method check", func(t *testing.T) {
		want(t, b.post("/data/private/task/", url.Values{}), http.StatusForbidden, "CSRF")
	})
	t.Run("the create form takes both methods", func(t *testing.T) {
		want(t, b.get("/data/private/host/?do=new"), http.StatusOK)
		p := b.post("/data/private/host/?do=new", url.Values{"csrf": tok["csrf"], "keyname": {"h9"}, "is_enabled": {"false", "true"}})
		want(t, p, http.StatusSeeOther)
	})
}
