package server_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/server"
)

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct{ testkit.Buffer }

func (l *lockedBuffer) lines(t *testing.T) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// observed serves e's database a second time with the access log and hook on.
func observed(t *testing.T, e *env, accessLog bool, hook func(server.RequestInfo)) (*httptest.Server, *lockedBuffer) {
	buf := &lockedBuffer{}
	log := slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv := testkit.Serve(t, server.New(server.Options{DB: e.db, Runner: e.runner, Logger: log,
		Version: "4.9.0", VersionDate: "2026-11-22", AccessLog: accessLog, OnRequest: hook}), nil)
	return srv, buf
}

func send(t *testing.T, base, method, path string, c cred) int {
	t.Helper()
	req, err := http.NewRequest(method, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	c(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestAccessLogOneLinePerRequestWithoutSecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRunner: true})
	key := e.key("logkey", keySpec{perms: []string{"p_data_access"}})
	usr := e.user("loguser", true)
	var mu sync.Mutex
	var infos []server.RequestInfo
	srv, buf := observed(t, e, true, func(ri server.RequestInfo) {
		mu.Lock()
		infos = append(infos, ri)
		mu.Unlock()
	})

	calls := []struct {
		path   string
		c      cred
		status int
		route  string
		kind   string
		name   string
		failed bool
	}{
		{"/api/ping/", noCred, 200, "/api/ping/", "", "", false},
		{"/api/version/", key, 200, "/api/version/", "apikey", "logkey", false},
		{"/api/version/", bearer("logkey", "wrong-secret-xyz"), 401, "/api/version/", "apikey", "logkey", true},
		{"/api/version/", usr, 200, "/api/version/", "basic", "loguser", false},
		{"/api/version/", basic("loguser", "bad-password-xyz"), 401, "/api/version/", "basic", "loguser", true},
		// Malformed: the one token could be a secret, so no name is kept.
		{"/api/version/", header("Authorization", "Bearer only-a-secret-xyz"), 401, "/api/version/", "apikey", "", true},
		{"/api/schemas/secret-in-path/", key, 404, "/api/schemas/:name/", "apikey", "logkey", false},
		{"/no/such/path", noCred, 404, "unmatched", "", "", false},
	}
	for _, c := range calls {
		if got := send(t, srv.URL, http.MethodGet, c.path, c.c); got != c.status {
			t.Fatalf("GET %s: status %d, want %d", c.path, got, c.status)
		}
	}
	lines := buf.lines(t)
	var access []map[string]any
	for _, l := range lines {
		if l["msg"] == "request" {
			access = append(access, l)
		}
	}
	if len(access) != len(calls) {
		t.Fatalf("%d access log lines for %d requests:\n%v", len(access), len(calls), lines)
	}
	for i, c := range calls {
		l := access[i]
		if l["level"] != "INFO" || l["method"] != "GET" || l["route"] != c.route ||
			l["status"] != float64(c.status) || l["credential"] != c.kind || l["name"] != c.name ||
			l["auth_failed"] != c.failed {
			t.Errorf("line %d for %s: %v", i, c.path, l)
		}
		if b, _ := l["bytes"].(float64); b <= 0 {
			t.Errorf("line %d: bytes %v", i, l["bytes"])
		}
		if _, ok := l["duration"].(float64); !ok {
			t.Errorf("line %d: duration %v", i, l["duration"])
		}
	}
	all := buf.String()
	for _, secret := range []string{"s3cret-logkey", "wrong-secret-xyz", "pw-loguser", "bad-password-xyz", "only-a-secret-xyz"} {
		if strings.Contains(all, secret) {
			t.Errorf("log contains the secret %q", secret)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(infos) != len(calls) {
		t.Fatalf("hook called %d times for %d requests", len(infos), len(calls))
	}
	for i, c := range calls {
		if infos[i].Route != c.route || infos[i].Status != c.status || infos[i].AuthFailed != c.failed {
			t.Errorf("hook %d: %+v", i, infos[i])
		}
	}
}

func TestAccessLogOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRunner: true})
	srv, buf := observed(t, e, false, nil)
	if got := send(t, srv.URL, http.MethodGet, "/api/ping/", noCred); got != 200 {
		t.Fatalf("status %d", got)
	}
	for _, l := range buf.lines(t) {
		if l["msg"] == "request" {
			t.Fatalf("access log line with the log off: %v", l)
		}
	}
}
