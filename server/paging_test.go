package server_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/server"
)

// TestInstancesKeysetPaging: the `after` cursor walks every instance once, the Link
// header names the next page, and bad cursors or counts are 400s.
func TestInstancesKeysetPaging(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRunner: true})
	e.load(serverSchema)
	e.load(`
- {classname: server, keyname: rack/1, hostname: delta}
- {classname: server, keyname: srv5, hostname: epsilon}
`)
	reader := e.key("reader", keySpec{perms: []string{"p_data_access", "p_data_read"}})
	if err := e.db.SetConfig(context.Background(), map[string]string{"DATA_DEFAULT_SIZE": "2", "DATA_MAX_SIZE": "4"}); err != nil {
		t.Fatal(err)
	}
	type page struct {
		Count     int              `json:"count"`
		Page      int              `json:"page"`
		Instances []map[string]any `json:"instances"`
	}
	var keys []string
	path := "/api/instances/server/"
	for i := 0; path != ""; i++ {
		if i > 5 {
			t.Fatal("paging does not end")
		}
		r := e.get(path, reader)
		var p page
		wantJSON(t, r, 200, &p)
		if p.Count != 5 {
			t.Fatalf("%s: count %d, want 5", path, p.Count)
		}
		for _, in := range p.Instances {
			keys = append(keys, in["keyname"].(string))
		}
		path = ""
		if link := r.header.Get("Link"); link != "" {
			if !strings.HasPrefix(link, "</api/instances/server/?after=") || !strings.HasSuffix(link, `>; rel="next"`) {
				t.Fatalf("Link header %q", link)
			}
			path = strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
			if got := r.header.Get("X-Next-After"); !strings.Contains(path, "after="+got+"&") {
				t.Fatalf("X-Next-After %q does not match Link %q", got, link)
			}
		}
	}
	if got, want := strings.Join(keys, ","), "srv1,srv2,srv3,rack/1,srv5"; got != want {
		t.Fatalf("walked %s, want %s", got, want)
	}
	// A search keeps its term in the next link; count=exact is accepted.
	r := e.get("/api/instances/server/?search=srv&size=1&count=exact", reader)
	var p page
	wantJSON(t, r, 200, &p)
	if p.Count != 4 || len(p.Instances) != 1 || !strings.Contains(r.header.Get("Link"), "search=srv") {
		t.Fatalf("search page: count %d, %d instances, Link %q", p.Count, len(p.Instances), r.header.Get("Link"))
	}
	if r.header.Get("X-Count-Exact") != "" {
		t.Fatalf("small exact count marked inexact")
	}
	for q, msg := range map[string]string{
		"?after=x":        "after must be the non-negative integer cursor of a previous page",
		"?after=-1":       "after must be the non-negative integer cursor of a previous page",
		"?after=1&page=2": "page and after cannot be combined",
		"?count=approx":   "count must be exact",
	} {
		wantError(t, e.get("/api/instances/server/"+q, reader), 400, msg)
	}
}

// TestClientCancelNotLoggedAsError: a request whose client went away is not an
// internal error: nothing is logged at ERROR for it.
func TestClientCancelNotLoggedAsError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRunner: true})
	e.load(serverSchema)
	reader := e.key("reader", keySpec{perms: []string{"p_data_access", "p_data_read"}})
	var logs testkit.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := server.New(server.Options{DB: e.db, Logger: logger, Version: "4.9.0", VersionDate: "2026-11-22"})
	// The key is verified (and cached) first, so the canceled request gets past authentication.
	warm := httptest.NewRequest(http.MethodGet, "/api/instances/server/", nil)
	reader(warm)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, warm)
	if rec.Code != 200 {
		t.Fatalf("warm-up request: %d %s", rec.Code, rec.Body)
	}
	// The client goes away at every point of the request in turn: after the k-th time
	// the request's context is asked whether it is done.
	for _, path := range []string{"/api/instances/server/", "/api/instances/server/srv1/", "/api/schemas/"} {
		for k := int64(0); k < 300; k++ {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			req = req.WithContext(&goneAfter{Context: req.Context(), left: k, done: make(chan struct{})})
			reader(req)
			h.ServeHTTP(httptest.NewRecorder(), req)
		}
	}
	if out := logs.String(); strings.Contains(out, "level=ERROR") || !strings.Contains(out, "canceled") {
		t.Fatalf("logs of canceled requests:\n%s", out)
	}
}

// goneAfter is a context canceled once Done or Err has been asked left times.
type goneAfter struct {
	context.Context
	mu   sync.Mutex
	left int64
	done chan struct{}
}

func (g *goneAfter) tick() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.left > 0 {
		g.left--
		return false
	}
	select {
	case <-g.done:
	default:
		close(g.done)
	}
	return true
}

func (g *goneAfter) Done() <-chan struct{} {
	g.tick()
	return g.done
}

func (g *goneAfter) Err() error {
	if g.tick() {
		return context.Canceled
	}
	return nil
}
