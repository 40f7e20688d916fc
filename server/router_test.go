package server_test

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"dataservice/internal/testkit"
	"dataservice/server"
)

// TestNotFound: unknown paths are 404 {"error":"not found"}.
func TestNotFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRunner: true})
	reader := e.key("reader", keySpec{perms: []string{"p_data_access", "p_pipeline_run"}})
	for _, tc := range []struct {
		name string
		path string
		c    cred
	}{
		{"unknown top-level path", "/nope", noCred},
		{"unknown api path", "/api/nope/", noCred},
		{"unknown api path with credentials", "/api/nope/", reader},
		{"pipeline path without its trailing slash", "/api/pipelines/upper", reader},
		{"instance path without its trailing slash", "/api/instances/server/srv1", reader},
	} {
		t.Run(tc.name+" is 404", func(t *testing.T) {
			r := e.get(tc.path, tc.c)
			if got, want := r.status, 404; got != want {
				t.Fatalf("status = %d, want %d", got, want)
			}
			if got, want := string(r.body), "{\"error\":\"not found\",\"errors\":[{\"field\":\"\",\"code\":\"not_found\",\"message\":\"not found\"}]}\n"; got != want {
				t.Fatalf("body = %q, want %q", got, want)
			}
		})
	}
}

// TestPanicIsInternalError: a panic in a handler (here in the injected readiness
// check) is a 500 "internal error"; the details go only to the log.
func TestPanicIsInternalError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRunner: true})
	reader := e.key("reader", keySpec{perms: []string{"p_data_access"}})
	var logs testkit.Buffer
	srv := testkit.Serve(t, server.New(server.Options{DB: e.db, Runner: e.runner,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Version: "4.9.0",
		Ready: func() bool { panic("readiness exploded: detail-1234") }}), nil)
	pe := &env{t: t, db: e.db, runner: e.runner, srv: srv}
	for _, tc := range []struct {
		name string
		path string
		c    cred
	}{
		{"readyz", "/readyz", noCred},
		{"api route", "/api/version/", reader},
	} {
		t.Run(tc.name+" panic is 500", func(t *testing.T) {
			r := pe.get(tc.path, tc.c)
			wantError(t, r, 500, "internal error")
			if strings.Contains(string(r.body), "detail-1234") {
				t.Fatalf("panic details leaked: %s", r.body)
			}
		})
	}
	if got := logs.String(); !strings.Contains(got, "handler panic") || !strings.Contains(got, "detail-1234") {
		t.Fatalf("log = %q, want the panic logged", got)
	}
	t.Run("the server keeps serving after a panic", func(t *testing.T) {
		object(t, pe.get("/healthz", noCred), 200)
	})
}

// TestYAMLReplies: Accept and ?format=yaml select YAML; JSON otherwise.
func TestYAMLReplies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRunner: true})
	reader := e.key("reader", keySpec{perms: []string{"p_data_access"}})
	accept := func(v string) cred { return header("Accept", v) }
	cases := []struct {
		name string
		path string
		c    cred
		yaml bool
	}{
		{"Accept application/yaml gives YAML", "/api/pipelines/", both(reader, accept("application/yaml")), true},
		{"Accept text/yaml gives YAML", "/api/pipelines/", both(reader, accept("text/yaml")), true},
		{"format=yaml gives YAML", "/api/pipelines/?format=yaml", reader, true},
		{"format=yaml in upper case gives YAML", "/api/pipelines/?format=YAML", reader, true},
		{"YAML preferred before JSON gives YAML", "/api/pipelines/", both(reader, accept("application/yaml, application/json")), true},
		{"JSON preferred before YAML gives JSON", "/api/pipelines/", both(reader, accept("application/json, application/yaml")), false},
		{"format=json beats Accept YAML", "/api/pipelines/?format=json", both(reader, accept("application/yaml")), false},
		{"no preference gives JSON", "/api/pipelines/", reader, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.get(tc.path, tc.c)
			if !tc.yaml {
				if got := object(t, r, 200)["count"]; got == nil {
					t.Fatalf("JSON reply without count: %s", r.body)
				}
				return
			}
			if got, want := r.header.Get("Content-Type"), "application/yaml; charset=utf-8"; got != want {
				t.Fatalf("Content-Type = %q, want %q", got, want)
			}
			var body struct {
				Count     int `yaml:"count"`
				Pipelines []struct {
					ID            int64   `yaml:"id"`
					Keyname       string  `yaml:"keyname"`
					RunPermission *string `yaml:"run_permission"`
				} `yaml:"pipelines"`
			}
			if err := yaml.Unmarshal(r.body, &body); err != nil {
				t.Fatalf("YAML body %q: %v", r.body, err)
			}
			if got, want := body.Count, 1; got != want || len(body.Pipelines) != 1 {
				t.Fatalf("count = %d with %d pipelines, want %d", got, len(body.Pipelines), want)
			}
			if got, want := body.Pipelines[0].Keyname, "bulk_delete_disabled"; got != want {
				t.Fatalf("keyname = %q, want %q", got, want)
			}
			if body.Pipelines[0].ID == 0 || body.Pipelines[0].RunPermission != nil {
				t.Fatalf("pipeline = %+v, want an id and no run_permission", body.Pipelines[0])
			}
		})
	}
	t.Run("errors are YAML too", func(t *testing.T) {
		r := e.get("/api/pipelines/?format=yaml", noCred)
		if got, want := r.status, http.StatusUnauthorized; got != want {
			t.Fatalf("status = %d, want %d", got, want)
		}
		if got, want := string(r.body), "error: authentication required\nerrors:\n    - field: \"\"\n      code: unauthorized\n      message: authentication required\n"; got != want {
			t.Fatalf("body = %q, want %q", got, want)
		}
	})
}
