package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestIndex: GET / and GET /api/ answer without credentials, point at the endpoints
// and the docs, and reveal nothing (no version).
func TestIndex(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRunner: true})
	for _, path := range []string{"/", "/api/"} {
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
	t.Run("/ is the web console for browsers", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodGet, e.srv.URL+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "text/html,*/*")
		client := *e.srv.Client()
		client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login?next=%2F" {
			t.Fatalf("status %d, location %q", resp.StatusCode, resp.Header.Get("Location"))
		}
	})
	t.Run("other paths stay 404", func(t *testing.T) {
		if r := e.get("/index.html", noCred); r.status != 404 {
			t.Fatalf("status %d", r.status)
		}
	})
}

// TestTaskDetailErrorsFirst: a task whose instances failed keeps the status
// "succeeded", and its detail starts with "errors" and the first error messages.
func TestTaskDetailErrorsFirst(t *testing.T) {
	t.Parallel()
	e := newTaskEnv(t, envOptions{})
	e.load("- classname: _pipeline\n  keyname: break_all\n  content: |\n    - field_set: ['', _x, abc]\n    - field_toint: ['', _x]\n")
	rr := decodeRun(t, e.post("/api/pipelines/break_all/?schema=server", e.alice, nil))
	path := "/api/tasks/" + rr.Handle + "/"
	d := e.pollTask(path, e.alice)
	result := d["result"].(map[string]any)
	n := fmt.Sprint(result["errors"])
	if d["status"] != "succeeded" || n == "0" || fmt.Sprint(d["errors"]) != n {
		t.Fatalf("status %v, errors %v, top-level errors %v", d["status"], result["errors"], d["errors"])
	}
	msgs, _ := d["error_messages"].([]any)
	if len(msgs) == 0 || len(msgs) > 5 || !strings.Contains(msgs[0].(string), "cannot convert") {
		t.Fatalf("error_messages %q", d["error_messages"])
	}
	body := string(e.get(path, e.alice).body)
	if !strings.HasPrefix(body, `{"errors":`) {
		t.Fatalf("the detail does not start with errors: %.200s", body)
	}
	if y := string(e.get(path+"?format=yaml", e.alice).body); !strings.HasPrefix(y, "errors: "+n+"\n") ||
		!strings.Contains(y, "\nhandle: "+rr.Handle+"\n") {
		t.Fatalf("YAML detail: %.300s", y)
	}

	clean := decodeRun(t, e.post("/api/pipelines/bulk_delete_disabled/?schema=server&dryrun=1", e.alice, nil))
	if d := e.pollTask("/api/tasks/"+clean.Handle+"/", e.alice); d["errors"] != nil || d["error_messages"] != nil {
		t.Fatalf("a task without errors has top-level errors: %v", d)
	}
}
