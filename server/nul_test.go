package server_test

import (
	"fmt"
	"strings"
	"testing"

	"dataservice/internal/testkit"
)

// TestNULIsTheCallersError: a NUL character in an API path, query, body or Basic
// credential is the caller's error (4xx), never a server error, on both engines
// (PostgreSQL's text cannot hold a NUL and refuses one even in a comparison), and no
// NUL is stored.
func TestNULIsTheCallersError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRunner: true})
	e.load(serverSchema)
	const n = "%00"
	gets := []string{
		"/api/schemas/" + n + "/", "/api/schemas/ser" + n + "ver/", "/api/instances/" + n + "/",
		"/api/instances/server/" + n + "/", "/api/instances/server/srv" + n + "1/",
		"/api/instances/server/?search=" + n, "/api/instances/server/?search=al" + n + "pha",
		"/api/instances/server/?hostname=" + n, "/api/instances/server/?sort=" + n + "&page=" + n + "&size=" + n,
		"/api/instances/server/?format=" + n, "/api/instances/server/srv1/?fields=" + n,
		"/api/tasks/" + n + "/", "/api/tasks/?status=" + n, "/api/pipelines/" + n + "/",
		"/api/pipelines/?" + n + "=" + n, "/api/conf/?" + n, "/api/docs/" + n, "/api/version/?" + n,
	}
	for _, p := range gets {
		if r := e.get(p, adminCred); r.status >= 500 {
			t.Errorf("GET %s: %d %s", p, r.status, r.body)
		}
	}
	posts := []struct{ path, body string }{
		{"/api/load/", "- {classname: server, keyname: \"n\\0\", hostname: x}"},
		{"/api/load/", "- {classname: server, keyname: n1, displayname: \"d\\0\", hostname: x}"},
		{"/api/load/", `[{"classname": "server", "keyname": "n2", "hostname": "a\u0000b"}]`},
		{"/api/load/", "- {classname: server, keyname: n3, site: \"s\\0\"}"},
		{"/api/load/", "- {classname: server, keyname: srv1, hostname: \"alpha\\0\", _action: update}"},
		{"/api/load/", "- {classname: \"ser\\0ver\", keyname: n4}"},
		{"/api/load/", "- {classname: server, keyname: srv1, _action: \"upd\\0ate\"}"},
		{"/api/load/?dryrun=1", "- {classname: server, keyname: n6, hostname: \"\\0\"}"},
		{"/api/load/", "- {classname: _schema, keyname: s1, _options: {description: \"d\\0\"}}"},
		{"/api/load/", "- {classname: _schema, keyname: s2, f: {dataformat: string, displayname: \"d\\0\"}}"},
		{"/api/load/", "- {classname: _schema, keyname: s3, f: {dataformat: string, dataformat_ext: \"d\\0\"}}"},
		{"/api/load/", "- {classname: _pipeline, keyname: p1, content: \"[]\\0\"}"},
		{"/api/load/", "- {classname: _permission, keyname: p_x, displayname: \"d\\0\"}"},
		{"/api/rawfile/?schema=server&keyfield=" + n, "keyname;hostname\nn7;x\n"},
		{"/api/rawfile/?schema=server", "keyname;hostname\nn8;a\x00b\n"},
		{"/api/conf/", `{"GLOBAL_APPNAME": "a\u0000b"}`},
		{"/api/pipelines/" + n + "/", ""},
		{"/api/pipelines/upper/?schema=" + n, ""},
		{"/api/tasks/" + n + "/cancel/", ""},
	}
	for _, p := range posts {
		// A load answers 200 with the entry's error; anything else answers 4xx.
		r := e.post(p.path, adminCred, []byte(p.body))
		if r.status >= 500 || r.status < 400 && !strings.Contains(string(r.body), `"created":0,"updated":0,`) {
			t.Errorf("POST %s %q: %d %s", p.path, p.body, r.status, r.body)
		}
	}
	for _, c := range []cred{basic("ad\x00min", adminPassword), basic("admin", adminPassword+"\x00"), basic("\x00", "\x00")} {
		if r := e.get("/api/schemas/", c); r.status != 401 {
			t.Errorf("a Basic credential with a NUL: %d %s", r.status, r.body)
		}
	}
	_, rows := testkit.Rows(t, e.db, `SELECT classname, keyname, displayname, data FROM instances`)
	for _, r := range rows {
		for _, v := range r {
			if s := fmt.Sprint(v); strings.Contains(s, "\x00") || strings.Contains(s, `\u0000`) {
				t.Errorf("stored: %q", r)
			}
		}
	}
	for _, q := range []string{`SELECT keyname, value FROM configuration`,
		`SELECT keyname, displayname, description, options FROM schemas`, `SELECT * FROM schema_fields`} {
		_, rows = testkit.Rows(t, e.db, q)
		for _, r := range rows {
			if s := fmt.Sprint(r...); strings.Contains(s, "\x00") || strings.Contains(s, `\u0000`) {
				t.Errorf("stored: %q", r)
			}
		}
	}
}
