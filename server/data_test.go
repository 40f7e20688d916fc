package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"dataservice/store"
)

// TestPingHealthReady: the unauthenticated probes, and 503 until start-up is done.
func TestPingHealthReady(t *testing.T) {
	t.Parallel()
	var ready atomic.Bool
	e := newEnv(t, envOptions{NoRunner: true, Ready: ready.Load})
	reader := e.key("reader", keySpec{perms: []string{"p_data_access"}})

	t.Run("ping without credentials is ok", func(t *testing.T) {
		if got, want := string(e.get("/api/ping/", noCred).body), "{\"status\":\"ok\"}\n"; got != want {
			t.Fatalf("body = %q, want %q", got, want)
		}
	})
	t.Run("healthz is ok while starting", func(t *testing.T) {
		if got, want := object(t, e.get("/healthz", noCred), 200)["status"], any("ok"); got != want {
			t.Fatalf("status = %v, want %v", got, want)
		}
	})
	t.Run("readyz is 503 while starting", func(t *testing.T) {
		wantError(t, e.get("/readyz", noCred), 503, "starting up")
	})
	t.Run("api is 503 while starting", func(t *testing.T) {
		wantError(t, e.get("/api/version/", reader), 503, "starting up")
	})
	t.Run("ping is ok while starting", func(t *testing.T) {
		object(t, e.get("/api/ping/", noCred), 200)
	})
	ready.Store(true)
	t.Run("readyz is 200 once started", func(t *testing.T) {
		if got, want := object(t, e.get("/readyz", noCred), 200)["status"], any("ready"); got != want {
			t.Fatalf("status = %v, want %v", got, want)
		}
	})
	t.Run("api answers once started", func(t *testing.T) {
		object(t, e.get("/api/version/", reader), 200)
	})
}

// TestVersion: GET /api/version/ for any allowed caller.
func TestVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRunner: true})
	nothing := e.key("nothing", keySpec{})
	uuid, err := e.db.Registry(context.Background(), store.RegInstanceUUID)
	if err != nil || uuid == "" {
		t.Fatalf("INSTANCE_UUID = %q, %v", uuid, err)
	}
	var got map[string]string
	wantJSON(t, e.get("/api/version/", nothing), 200, &got)
	want := map[string]string{"version": "4.9.0", "version_date": "2026-11-22", "db_version": "4.9.0", "instance_uuid": uuid}
	if g, w := fmt.Sprint(got), fmt.Sprint(want); g != w {
		t.Fatalf("version = %s, want %s", g, w)
	}
	t.Run("no credentials is 401", func(t *testing.T) {
		wantError(t, e.get("/api/version/", noCred), 401, "authentication required")
	})
}

// TestSchemas: the list holds only schemas the caller may read; the detail is the
// schema in the load format.
func TestSchemas(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRunner: true})
	e.load(serverSchema)
	e.load(`
- {classname: _permission, keyname: p_secret_read, displayname: Secret read}
- classname: _schema
  keyname: vault
  p_read: p_secret_read
  code: {dataformat: string}
`)
	reader := e.key("reader", keySpec{perms: []string{"p_data_access", "p_data_read"}})
	keyAdmin := e.key("key_admin", keySpec{perms: []string{"p_data_access", "p_apikey_admin", "p_secret_read"}})
	noAccess := e.key("no_access", keySpec{perms: []string{"p_data_read"}})

	names := func(t *testing.T, c cred) map[string]bool {
		t.Helper()
		var body struct {
			Count   json.Number `json:"count"`
			Schemas []struct {
				Keyname string      `json:"keyname"`
				Count   json.Number `json:"count"`
			} `json:"schemas"`
		}
		wantJSON(t, e.get("/api/schemas/", c), 200, &body)
		if got, want := body.Count.String(), fmt.Sprint(len(body.Schemas)); got != want {
			t.Fatalf("count = %s, want %s", got, want)
		}
		out := map[string]bool{}
		for _, s := range body.Schemas {
			out[s.Keyname] = true
			if s.Keyname == "server" && s.Count.String() != "3" {
				t.Fatalf("server count = %s, want 3", s.Count)
			}
		}
		return out
	}
	t.Run("reader lists schemas without their own p_read only", func(t *testing.T) {
		got := names(t, reader)
		for name, want := range map[string]bool{"server": true, "_pipeline": true, "_apikey": false, "vault": false} {
			if got[name] != want {
				t.Fatalf("listed %s = %v, want %v (list %v)", name, got[name], want, got)
			}
		}
	})
	t.Run("schema p_read holders list those schemas only", func(t *testing.T) {
		got := names(t, keyAdmin)
		for name, want := range map[string]bool{"server": false, "_apikey": true, "vault": true} {
			if got[name] != want {
				t.Fatalf("listed %s = %v, want %v (list %v)", name, got[name], want, got)
			}
		}
	})
	t.Run("list without p_data_access is 403", func(t *testing.T) {
		wantError(t, e.get("/api/schemas/", noAccess), 403, "permission denied")
	})
	t.Run("detail is the schema with its fields", func(t *testing.T) {
		d := object(t, e.get("/api/schemas/server/", reader), 200)
		if got, want := d["classname"], any("_schema"); got != want {
			t.Fatalf("classname = %v, want %v", got, want)
		}
		if got, want := d["keyname"], any("server"); got != want {
			t.Fatalf("keyname = %v, want %v", got, want)
		}
		for _, f := range []string{"hostname", "site"} {
			fd, ok := d[f].(map[string]any)
			if !ok {
				t.Fatalf("field %s missing in %v", f, d)
			}
			if got, want := fd["dataformat"], any("string"); got != want {
				t.Fatalf("%s dataformat = %v, want %v", f, got, want)
			}
		}
	})
	t.Run("detail of an unreadable schema is 403", func(t *testing.T) {
		wantError(t, e.get("/api/schemas/vault/", reader), 403, "permission denied")
	})
	t.Run("detail of an unknown schema is 404", func(t *testing.T) {
		wantError(t, e.get("/api/schemas/nope/", reader), 404, `schema "nope" not found`)
	})
}

// TestInstances: paging, search and single instances (keynames with a slash).
func TestInstances(t *testing.T) {
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
		Count     json.Number      `json:"count"`
		Page      json.Number      `json:"page"`
		Size      json.Number      `json:"size"`
		Instances []map[string]any `json:"instances"`
	}
	list := func(t *testing.T, query string) (page, string) {
		t.Helper()
		var p page
		wantJSON(t, e.get("/api/instances/server/"+query, reader), 200, &p)
		var keys []string
		for _, in := range p.Instances {
			keys = append(keys, in["keyname"].(string))
		}
		return p, strings.Join(keys, ",")
	}
	ok := []struct {
		name                    string
		query                   string
		count, page, size, keys string
	}{
		{"default size is DATA_DEFAULT_SIZE", "", "5", "1", "2", "srv1,srv2"},
		{"second page follows the first", "?page=2", "5", "2", "2", "srv3,rack/1"},
		{"last page is short", "?page=3", "5", "3", "2", "srv5"},
		{"page past the end is empty", "?page=9", "5", "9", "2", ""},
		{"size up to DATA_MAX_SIZE", "?size=4&page=2", "5", "2", "4", "srv5"},
		{"search matches the keyname", "?search=RACK", "1", "1", "2", "rack/1"},
		{"search matches field values", "?search=eps", "1", "1", "2", "srv5"},
		{"search treats % literally", "?search=%25", "0", "1", "2", ""},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			p, keys := list(t, tc.query)
			if got, want := p.Count.String()+" "+p.Page.String()+" "+p.Size.String()+" "+keys,
				tc.count+" "+tc.page+" "+tc.size+" "+tc.keys; got != want {
				t.Fatalf("count page size keys = %q, want %q", got, want)
			}
		})
	}
	bad := []struct {
		name  string
		query string
		msg   string
	}{
		{"size over DATA_MAX_SIZE is 400", "?size=5", "size must be an integer from 1 to 4"},
		{"zero size is 400", "?size=0", "size must be an integer from 1 to 4"},
		{"non-numeric size is 400", "?size=all", "size must be an integer from 1 to 4"},
		{"zero page is 400", "?page=0", "page must be an integer from 1 to 1000000"},
		{"non-numeric page is 400", "?page=x", "page must be an integer from 1 to 1000000"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, e.get("/api/instances/server/"+tc.query, reader), 400, tc.msg)
		})
	}
	t.Run("instance with a slash in its keyname", func(t *testing.T) {
		d := object(t, e.get("/api/instances/server/rack/1/", reader), 200)
		for k, want := range map[string]any{"classname": "server", "keyname": "rack/1", "hostname": "delta", "is_enabled": true} {
			if got := d[k]; got != want {
				t.Fatalf("%s = %v, want %v", k, got, want)
			}
		}
	})
	t.Run("unknown instance is 404", func(t *testing.T) {
		wantError(t, e.get("/api/instances/server/rack/2/", reader), 404, `server "rack/2" not found`)
	})
	t.Run("unknown schema is 404", func(t *testing.T) {
		wantError(t, e.get("/api/instances/nope/", reader), 404, `schema "nope" not found`)
	})
	t.Run("unreadable schema is 403", func(t *testing.T) {
		wantError(t, e.get("/api/instances/_apikey/", reader), 403, "permission denied")
	})
	t.Run("without p_data_access is 403", func(t *testing.T) {
		c := e.key("no_access", keySpec{perms: []string{"p_data_read"}})
		wantError(t, e.get("/api/instances/server/", c), 403, "permission denied")
	})
}

// TestSecretsNeverShown: reads of _apikey and _user never carry secrets or hashes.
func TestSecretsNeverShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRunner: true})
	e.key("plain", keySpec{perms: []string{"p_data_access"}, plain: true})
	e.key("legacy", keySpec{perms: []string{"p_data_access"}})
	e.user("dave", true)
	paths := []string{
		"/api/instances/_apikey/",
		"/api/instances/_apikey/plain/",
		"/api/instances/_apikey/legacy/",
		"/api/instances/_user/",
		"/api/instances/_user/admin/",
		"/api/instances/_user/dave/",
		"/api/instances/_apikey/?format=yaml",
		"/api/instances/_user/?format=yaml",
	}
	for _, p := range paths {
		t.Run(p+" has no secret", func(t *testing.T) {
			r := e.get(p, adminCred)
			if r.status != 200 {
				t.Fatalf("status = %d, want 200 (body %s)", r.status, r.body)
			}
			body := string(r.body)
			for _, leak := range []string{"$argon2id$", "$sha256$", "s3cret-", "pw-dave", adminPassword, `"secret"`, `"password"`, "secret:", "password:"} {
				if strings.Contains(body, leak) {
					t.Fatalf("body contains %q: %s", leak, body)
				}
			}
		})
	}
	t.Run("search cannot probe a hash", func(t *testing.T) {
		var p struct {
			Count json.Number `json:"count"`
		}
		wantJSON(t, e.get("/api/instances/_apikey/?search=argon2id", adminCred), 200, &p)
		if got, want := p.Count.String(), "0"; got != want {
			t.Fatalf("count = %s, want %s", got, want)
		}
	})
}
