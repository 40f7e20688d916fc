package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestIndex: GET /api/ answers without credentials, points at the endpoints and the
// docs, and reveals nothing (no version). GET / is the web console's.
func TestIndex(t *testing.T) {
	e := newEnv(t, envOptions{NoRunner: true})
	for _, path := range []string{"/api/"} {
		t.Run(path+" is a JSON index", func(t *testing.T) {
			r := e.get(path, noCred)
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			var m struct {
				Endpoints []struct{ Method, Path, Doc string }
				Docs      string
			}
			if err := json.Unmarshal(r.body, &m); err != nil {
				t.Fatalf("not JSON: %v: %s", err, r.body)
			}
			paths := map[string]bool{}
			for _, ep := range m.Endpoints {
				paths[strings.SplitN(ep.Path, "?", 2)[0]] = true
			}
			for _, want := range []string{"/api/ping/", "/api/version/", "/api/schemas/", "/api/instances/SCHEMA/",
				"/api/load/", "/api/rawfile/", "/api/pipelines/", "/api/tasks/", "/api/conf/"} {
				if !paths[want] {
					t.Fatalf("index lacks %s: %s", want, r.body)
				}
			}
			if !strings.Contains(m.Docs, "docs/api.md") {
				t.Fatalf("docs %q", m.Docs)
			}
			if strings.Contains(string(r.body), "4.9.0") {
				t.Fatalf("the index reveals the version: %s", r.body)
			}
		})
	}
	t.Run("/ is the web console, which asks a stranger to sign in", func(t *testing.T) {
		r := e.do(http.MethodGet, "/", func(req *http.Request) { req.Header.Set("Accept", "text/html,*/*") }, nil)
		if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/login") {
			t.Fatalf("status %d, Location %q: %s", r.status, r.header.Get("Location"), r.body)
		}
	})
	t.Run("other paths stay 404", func(t *testing.T) {
		if r := e.get("/index.html", noCred); r.status != 404 {
			t.Fatalf("status %d", r.status)
		}
	})
}
