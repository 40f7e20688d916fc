package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"dataservice/internal/testkit"
)

// rackSchema adds a schema whose instances reference servers (for renames).
const rackSchema = `
- classname: _schema
  keyname: rack
  room: {dataformat: string}
  hosts: {dataformat: schema, dataformat_ext: server, cardinal_max: 0}
- {classname: rack, keyname: r1, hosts: [srv1, srv3]}
`

// writeEnv is a server with the server and rack schemas and an administrator.
func writeEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	o.NoRunner = true
	e := newEnv(t, o)
	e.load(serverSchema)
	e.load(rackSchema)
	return e
}

// send sends one request with a body and the given Content-Type (none when empty).
func (e *env) send(method, path string, c cred, contentType, body string) reply {
	e.t.Helper()
	var b []byte
	if body != "" || method != http.MethodDelete {
		b = []byte(body)
	}
	if contentType != "" {
		c = both(c, header("Content-Type", contentType))
	}
	return e.do(method, path, c, b)
}

// instanceRows renders the instances and revisions tables (to show nothing changed).
func (e *env) instanceRows() string {
	e.t.Helper()
	var out []string
	for _, q := range []string{
		`SELECT id, classname, keyname, displayname, is_enabled, data, updated_at FROM instances WHERE classname <> '_apikey' ORDER BY id`,
		`SELECT id, classname, keyname, action FROM revisions ORDER BY id`,
	} {
		_, rows := testkit.Rows(e.t, e.db, q)
		for _, r := range rows {
			out = append(out, fmt.Sprint(r...))
		}
	}
	return strings.Join(out, "\n")
}

// TestInstanceWrites: create, replace, merge and delete one instance, with the
// replies GET gives.
func TestInstanceWrites(t *testing.T) {
	t.Parallel()
	e := writeEnv(t, envOptions{})
	json := "application/json"

	t.Run("POST creates: 201, Location, ETag, the instance as GET shows it", func(t *testing.T) {
		r := e.send("POST", "/api/instances/server/", adminCred, json, `{"keyname": "web/1", "hostname": "w1", "site": "par"}`)
		got := object(t, r, 201)
		if got["keyname"] != "web/1" || got["hostname"] != "w1" || got["site"] != "par" || got["is_enabled"] != true {
			t.Fatalf("reply = %v", got)
		}
		if loc := r.header.Get("Location"); loc != "/api/instances/server/web/1/" {
			t.Fatalf("Location = %q", loc)
		}
		g := e.get(r.header.Get("Location"), adminCred)
		if string(g.body) != string(r.body) {
			t.Fatalf("GET = %s, POST replied %s", g.body, r.body)
		}
		if et := r.header.Get("ETag"); et == "" || et != g.header.Get("ETag") {
			t.Fatalf("ETag of POST %q, of GET %q", et, g.header.Get("ETag"))
		}
		if got := e.queryString("SELECT action FROM revisions WHERE classname = 'server' AND keyname = 'web/1'"); got != "create" {
			t.Fatalf("revision action = %q, want create", got)
		}
	})
	t.Run("POST of an existing keyname is 409 and changes nothing", func(t *testing.T) {
		before := e.instanceRows()
		wantError(t, e.send("POST", "/api/instances/server/", adminCred, json, `{"keyname": "srv1", "hostname": "x"}`),
			409, `server "srv1" already exists`)
		if e.instanceRows() != before {
			t.Fatal("a refused create changed the tables")
		}
	})
	t.Run("PUT replaces: what the body leaves out is cleared", func(t *testing.T) {
		r := e.send("PUT", "/api/instances/server/web/1/", adminCred, json, `{"hostname": "w2", "displayname": "Web"}`)
		got := object(t, r, 200)
		if got["hostname"] != "w2" || got["displayname"] != "Web" || got["site"] != nil {
			t.Fatalf("reply = %v", got)
		}
		if _, ok := got["site"]; ok {
			t.Fatalf("site not cleared: %v", got)
		}
	})
	t.Run("PATCH merges; null clears a field", func(t *testing.T) {
		object(t, e.send("PATCH", "/api/instances/server/web/1/", adminCred, "application/merge-patch+json", `{"site": "lyo"}`), 200)
		got := object(t, e.send("PATCH", "/api/instances/server/web/1/", adminCred, json, `{"hostname": null, "is_enabled": false}`), 200)
		if _, ok := got["hostname"]; ok || got["site"] != "lyo" || got["displayname"] != "Web" || got["is_enabled"] != false {
			t.Fatalf("reply = %v", got)
		}
		if got := e.queryString("SELECT data FROM instances WHERE classname = 'server' AND keyname = 'web/1'"); strings.Contains(got, "hostname") {
			t.Fatalf("stored data still holds hostname: %s", got)
		}
		if got := e.queryString("SELECT COUNT(*) FROM revisions WHERE classname = 'server' AND keyname = 'web/1' AND action = 'update'"); got != "3" {
			t.Fatalf("%s update revisions after a PUT and two PATCHes, want 3", got)
		}
	})
	t.Run("a YAML body and a YAML reply", func(t *testing.T) {
		r := e.send("POST", "/api/instances/server/?format=yaml", adminCred, "application/yaml", "keyname: y1\nhostname: yaml-host\n")
		if r.status != 201 || r.header.Get("Content-Type") != "application/yaml; charset=utf-8" {
			t.Fatalf("status %d, Content-Type %q: %s", r.status, r.header.Get("Content-Type"), r.body)
		}
		var m map[string]any
		if err := yaml.Unmarshal(r.body, &m); err != nil || m["hostname"] != "yaml-host" {
			t.Fatalf("YAML reply %q: %v", r.body, err)
		}
	})
	t.Run("a YAML body over the YAML bound is 413", func(t *testing.T) {
		big := "hostname: " + strings.Repeat("y", 9<<20) + "\n"
		wantError(t, e.send("PUT", "/api/instances/server/srv1/", adminCred, "application/yaml", big), 413,
			"body: a YAML body is limited to 8 MiB (send JSON for larger loads)")
	})
	t.Run("DELETE deletes and answers the deleted instance", func(t *testing.T) {
		got := object(t, e.send("DELETE", "/api/instances/server/web/1/", adminCred, "", ""), 200)
		if got["keyname"] != "web/1" || got["site"] != "lyo" {
			t.Fatalf("reply = %v", got)
		}
		wantError(t, e.get("/api/instances/server/web/1/", adminCred), 404, `server "web/1" not found`)
		wantError(t, e.send("DELETE", "/api/instances/server/web/1/", adminCred, "", ""), 404, `server "web/1" not found`)
		if got := e.queryString("SELECT action FROM revisions WHERE classname = 'server' AND keyname = 'web/1' ORDER BY id DESC LIMIT 1"); got != "delete" {
			t.Fatalf("last revision action = %q, want delete", got)
		}
	})
	t.Run("PUT and PATCH of a missing instance are 404", func(t *testing.T) {
		wantError(t, e.send("PUT", "/api/instances/server/nope/", adminCred, json, `{"hostname": "x"}`), 404, `server "nope" not found`)
		wantError(t, e.send("PATCH", "/api/instances/server/nope/", adminCred, json, `{"hostname": "x"}`), 404, `server "nope" not found`)
	})
	t.Run("wrong method for the path is 405, unknown schema 404", func(t *testing.T) {
		for _, tc := range []struct{ method, path, allow string }{
			{"POST", "/api/instances/server/srv1/", "GET, PUT, PATCH, DELETE"},
			{"DELETE", "/api/instances/server/", "GET, POST"},
			{"PUT", "/api/instances/server/", "GET, POST"},
		} {
			r := e.send(tc.method, tc.path, adminCred, json, `{}`)
			wantError(t, r, 405, "method not allowed")
			if got := r.header.Get("Allow"); got != tc.allow {
				t.Fatalf("%s %s: Allow %q, want %q", tc.method, tc.path, got, tc.allow)
			}
		}
		wantError(t, e.send("POST", "/api/instances/nosuch/", adminCred, json, `{"keyname": "a"}`), 404, `schema "nosuch" not found`)
		wantError(t, e.send("DELETE", "/api/instances/server/srv1", adminCred, "", ""), 404, "not found")
		// Schema and permission definitions are not instances: loads write them.
		wantError(t, e.send("POST", "/api/instances/_schema/", adminCred, json, `{"keyname": "x"}`), 404, `schema "_schema" not found`)
		wantError(t, e.send("DELETE", "/api/instances/_permission/p_data_read/", adminCred, "", ""), 404, `schema "_permission" not found`)
	})
	t.Run("a secret is kept by a PUT that leaves it out, and never shown", func(t *testing.T) {
		e.key("k1", keySpec{perms: []string{"p_data_access"}})
		hash := e.queryString("SELECT data ->> 'secret' FROM instances WHERE classname = '_apikey' AND keyname = 'k1'")
		g := object(t, e.get("/api/instances/_apikey/k1/", adminCred), 200)
		if _, ok := g["secret"]; ok {
			t.Fatalf("GET shows the secret: %v", g)
		}
		b, _ := jsonMarshal(g)
		r := object(t, e.send("PUT", "/api/instances/_apikey/k1/", adminCred, json, b), 200)
		if _, ok := r["secret"]; ok {
			t.Fatalf("PUT shows the secret: %v", r)
		}
		if got := e.queryString("SELECT data ->> 'secret' FROM instances WHERE classname = '_apikey' AND keyname = 'k1'"); got != hash {
			t.Fatalf("secret changed by a PUT of what GET showed: %q, was %q", got, hash)
		}
	})
}

// TestInstanceWriteBuiltins: keyname modes, secrets and the admin account's
// protection apply to the one-instance writes as to a load.
func TestInstanceWriteBuiltins(t *testing.T) {
	t.Parallel()
	e := writeEnv(t, envOptions{})
	t.Run("a hexip keyname is derived from the address", func(t *testing.T) {
		r := e.send("POST", "/api/instances/ipam_ip/", adminCred, "application/json", `{"displayname": "10.0.0.5", "hostname": "h5"}`)
		got := object(t, r, 201)
		if got["keyname"] != "0a000005" || r.header.Get("Location") != "/api/instances/ipam_ip/0a000005/" {
			t.Fatalf("reply %v, Location %q", got, r.header.Get("Location"))
		}
		got = object(t, e.send("PUT", "/api/instances/ipam_ip/0a000005/", adminCred, "application/json", `{"description": "d"}`), 200)
		if got["keyname"] != "0a000005" || got["displayname"] != "10.0.0.5" || got["description"] != "d" {
			t.Fatalf("PUT reply %v", got)
		}
		if _, ok := got["hostname"]; ok {
			t.Fatalf("PUT kept hostname: %v", got)
		}
	})
	t.Run("a password set by PATCH is hashed and signs in", func(t *testing.T) {
		e.user("bob", true)
		object(t, e.send("PATCH", "/api/instances/_user/bob/", adminCred, "application/json", `{"password": "new-bob-pass"}`), 200)
		if got := e.queryString("SELECT data ->> 'password' FROM instances WHERE classname = '_user' AND keyname = 'bob'"); got == "new-bob-pass" || got == "" {
			t.Fatalf("stored password %q is not a hash", got)
		}
		if r := e.get("/api/version/", basic("bob", "new-bob-pass")); r.status != 200 {
			t.Fatalf("the new password does not sign in: %d %s", r.status, r.body)
		}
	})
	t.Run("the admin account cannot be deleted or renamed", func(t *testing.T) {
		before := e.instanceRows()
		wantError(t, e.send("DELETE", "/api/instances/_user/admin/", adminCred, "", ""), 403, "the admin account cannot be deleted")
		wantError(t, e.send("PATCH", "/api/instances/_user/admin/", adminCred, "application/json", `{"keyname": "root"}`), 403,
			"the admin account cannot be renamed")
		if e.instanceRows() != before {
			t.Fatal("a refused write changed the tables")
		}
	})
	t.Run("a role beyond the caller's permissions is refused", func(t *testing.T) {
		ui := e.key("ui", keySpec{perms: []string{"p_data_access", "p_data_read", "p_user_import"}})
		before := e.instanceRows()
		r := e.send("POST", "/api/instances/_role/", ui, "application/json", `{"keyname": "r_conf", "permissions": ["p_conf_admin"], "users": ["bob"]}`)
		if r.status != 403 || !strings.Contains(string(r.body), "permission denied") {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		if e.instanceRows() != before {
			t.Fatal("a refused write changed the tables")
		}
		object(t, e.send("POST", "/api/instances/_role/", ui, "application/json", `{"keyname": "r_small", "permissions": ["p_user_import"], "users": ["bob"]}`), 201)
	})
	t.Run("a user holding more than the caller cannot be changed by it", func(t *testing.T) {
		carol := e.user("carol", true)
		e.load(`[{classname: _role, keyname: r_carol, permissions: [p_conf_admin], users: [carol]}]`)
		ui := e.key("ui2", keySpec{perms: []string{"p_data_access", "p_data_read", "p_user_import"}})
		before := e.instanceRows()
		for _, body := range []string{`{"password": "taken-over"}`, `{"is_enabled": false}`, `{"keyname": "carol2"}`} {
			wantError(t, e.send("PATCH", "/api/instances/_user/carol/", ui, "application/json", body), 403,
				"permission denied: _user carol confers permissions you do not hold")
		}
		if r := e.send("DELETE", "/api/instances/_user/carol/", ui, "", ""); r.status != 403 || !strings.Contains(string(r.body), "permission denied") {
			t.Fatalf("DELETE: status %d: %s", r.status, r.body)
		}
		if e.instanceRows() != before {
			t.Fatal("a refused write changed the tables")
		}
		if r := e.get("/api/version/", carol); r.status != 200 {
			t.Fatalf("carol's own password no longer signs in: %d %s", r.status, r.body)
		}
	})
}

func jsonMarshal(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// TestInstanceRenameByPatch: a PATCH of keyname is the cascading rename, with its
// permission.
func TestInstanceRenameByPatch(t *testing.T) {
	t.Parallel()
	e := writeEnv(t, envOptions{})
	updater := e.key("updater", keySpec{perms: []string{"p_data_access", "p_data_read", "p_data_update"}})
	t.Run("without p_keyname_rename it is 403 and nothing changes", func(t *testing.T) {
		before := e.instanceRows()
		wantError(t, e.send("PATCH", "/api/instances/server/srv1/", updater, "application/json", `{"keyname": "srv9"}`),
			403, "permission denied: renaming needs p_keyname_rename")
		if e.instanceRows() != before {
			t.Fatal("a refused rename changed the tables")
		}
	})
	t.Run("references follow the renamed instance", func(t *testing.T) {
		r := e.send("PATCH", "/api/instances/server/srv1/", adminCred, "application/json", `{"keyname": "srv9", "site": "ber"}`)
		got := object(t, r, 200)
		if got["keyname"] != "srv9" || got["site"] != "ber" || got["hostname"] != "alpha" {
			t.Fatalf("reply = %v", got)
		}
		wantError(t, e.get("/api/instances/server/srv1/", adminCred), 404, `server "srv1" not found`)
		rack := object(t, e.get("/api/instances/rack/r1/", adminCred), 200)
		if fmt.Sprint(rack["hosts"]) != "[srv9 srv3]" {
			t.Fatalf("rack hosts = %v, want [srv9 srv3]", rack["hosts"])
		}
		if r.header.Get("ETag") != e.get("/api/instances/server/srv9/", adminCred).header.Get("ETag") {
			t.Fatal("the ETag of the reply is not the one GET gives")
		}
	})
	t.Run("a rename onto a taken keyname is refused", func(t *testing.T) {
		before := e.instanceRows()
		wantError(t, e.send("PATCH", "/api/instances/server/srv9/", adminCred, "application/json", `{"keyname": "srv3", "site": "x"}`),
			409, `server "srv3" already exists`)
		if e.instanceRows() != before {
			t.Fatal("a refused rename changed the tables")
		}
	})
	t.Run("a rename reaching references the caller may not update is refused", func(t *testing.T) {
		e.load(`
- {classname: _permission, keyname: p_shelf_update}
- {classname: _schema, keyname: shelf, p_update: p_shelf_update, hosts: {dataformat: schema, dataformat_ext: server, cardinal_max: 0}}
- {classname: shelf, keyname: s1, hosts: [srv3]}
`)
		renamer := e.key("renamer", keySpec{perms: []string{"p_data_access", "p_data_read", "p_data_update", "p_keyname_rename"}})
		before := e.instanceRows()
		wantError(t, e.send("PATCH", "/api/instances/server/srv3/", renamer, "application/json", `{"keyname": "srv4"}`), 403,
			"permission denied: renaming server srv3 would rewrite references in shelf, which you may not update")
		if e.instanceRows() != before {
			t.Fatal("a refused rename changed the tables")
		}
		// Without references in shelf, the same caller renames, and the revision names it.
		got := object(t, e.send("PATCH", "/api/instances/server/srv9/", renamer, "application/json", `{"keyname": "srv8"}`), 200)
		if got["keyname"] != "srv8" {
			t.Fatalf("reply = %v", got)
		}
		rack := object(t, e.get("/api/instances/rack/r1/", adminCred), 200)
		if fmt.Sprint(rack["hosts"]) != "[srv8 srv3]" {
			t.Fatalf("rack hosts = %v, want [srv8 srv3]", rack["hosts"])
		}
		if got := e.queryString("SELECT author FROM revisions WHERE classname = 'server' AND keyname = 'srv8' ORDER BY id DESC LIMIT 1"); got != "apikey:renamer" {
			t.Fatalf("revision author = %q, want apikey:renamer", got)
		}
	})
}

// TestInstanceWritePermissions: the write permissions, the read-only key and grant
// containment apply as they do to a load.
func TestInstanceWritePermissions(t *testing.T) {
	t.Parallel()
	e := writeEnv(t, envOptions{})
	reader := e.key("reader", keySpec{perms: []string{"p_data_access", "p_data_read"}})
	ro := e.key("ro", keySpec{perms: []string{"p_data_access", "p_data_read", "p_data_update", "p_data_create", "p_data_delete"}, readOnly: true})
	keyAdmin := e.key("keyadmin", keySpec{perms: []string{"p_data_access", "p_apikey_admin"}})
	for _, tc := range []struct {
		name, method, path, body string
		c                        cred
		status                   int
		msg                      string
	}{
		{"no credentials", "PATCH", "/api/instances/server/srv1/", `{"site": "x"}`, noCred, 401, "authentication required"},
		{"create without p_data_create", "POST", "/api/instances/server/", `{"keyname": "n1"}`, reader, 403, "permission denied: create of server needs p_data_create"},
		{"replace without p_data_update", "PUT", "/api/instances/server/srv1/", `{"hostname": "x"}`, reader, 403, "permission denied: update of server needs p_data_update"},
		{"an unchanged replace without p_data_update", "PUT", "/api/instances/server/srv1/", `{"hostname": "alpha"}`, reader, 403, "permission denied: update of server needs p_data_update"},
		{"merge without p_data_update", "PATCH", "/api/instances/server/srv1/", `{"site": "x"}`, reader, 403, "permission denied: update of server needs p_data_update"},
		{"delete without p_data_delete", "DELETE", "/api/instances/server/srv1/", "", reader, 403, "permission denied: delete of server needs p_data_delete"},
		{"read-only key", "PATCH", "/api/instances/server/srv1/", `{"site": "x"}`, ro, 403, "API key is read-only"},
		{"read-only key deleting", "DELETE", "/api/instances/server/srv1/", "", ro, 403, "API key is read-only"},
		{"a key beyond the caller's permissions", "POST", "/api/instances/_apikey/", `{"keyname": "evil", "secret": "chosen", "permissions": ["p_conf_admin"]}`, keyAdmin, 403, ""},
		{"raising a key beyond the caller's permissions", "PATCH", "/api/instances/_apikey/reader/", `{"permissions": ["p_data_access", "p_conf_admin"]}`, keyAdmin, 403, ""},
		{"data_admin does not reach built-in classes", "POST", "/api/instances/_user/", `{"keyname": "mallory"}`, e.key("da", keySpec{perms: []string{"p_data_access", "p_data_admin"}}), 403, ""},
	} {
		t.Run(tc.name+" is refused and changes nothing", func(t *testing.T) {
			before := e.instanceRows()
			ct := "application/json"
			if tc.body == "" {
				ct = ""
			}
			r := e.send(tc.method, tc.path, tc.c, ct, tc.body)
			if tc.msg != "" {
				wantError(t, r, tc.status, tc.msg)
			} else if r.status != tc.status || !strings.Contains(string(r.body), "permission denied") {
				t.Fatalf("status %d, want %d permission denied: %s", r.status, tc.status, r.body)
			}
			if e.instanceRows() != before {
				t.Fatal("a refused write changed the tables")
			}
		})
	}
	t.Run("a schema's own write permissions replace the global ones", func(t *testing.T) {
		e.load(`
- {classname: _permission, keyname: p_vault_create}
- {classname: _permission, keyname: p_vault_delete}
- {classname: _schema, keyname: vault, p_create: p_vault_create, p_delete: p_vault_delete, note: {dataformat: string}}
`)
		global := e.key("global", keySpec{perms: []string{"p_data_access", "p_data_read", "p_data_create", "p_data_delete"}})
		own := e.key("own", keySpec{perms: []string{"p_data_access", "p_data_read", "p_vault_create", "p_vault_delete"}})
		before := e.instanceRows()
		wantError(t, e.send("POST", "/api/instances/vault/", global, "application/json", `{"keyname": "v1"}`), 403,
			"permission denied: create of vault needs p_vault_create")
		if e.instanceRows() != before {
			t.Fatal("a refused write changed the tables")
		}
		object(t, e.send("POST", "/api/instances/vault/", own, "application/json", `{"keyname": "v1", "note": "n"}`), 201)
		wantError(t, e.send("DELETE", "/api/instances/vault/v1/", global, "", ""), 403, "permission denied: delete of vault needs p_vault_delete")
		object(t, e.send("DELETE", "/api/instances/vault/v1/", own, "", ""), 200)
	})
	t.Run("a key within the caller's permissions is created", func(t *testing.T) {
		object(t, e.send("POST", "/api/instances/_apikey/", keyAdmin, "application/json",
			`{"keyname": "small", "secret": "chosen-secret", "permissions": ["p_data_access"]}`), 201)
		if r := e.get("/api/version/", bearer("small", "chosen-secret")); r.status != 200 {
			t.Fatalf("the created key does not authenticate: %d %s", r.status, r.body)
		}
	})
}

// TestInstanceWriteDryRun: ?dryrun=1 reports the write and changes nothing.
func TestInstanceWriteDryRun(t *testing.T) {
	t.Parallel()
	e := writeEnv(t, envOptions{})
	before := e.instanceRows()
	tag := e.get("/api/instances/server/srv1/", adminCred).header.Get("ETag")
	for _, tc := range []struct {
		method, path, body, result string
		c                          cred
		keyname, changed           string
	}{
		{"POST", "/api/instances/server/?dryrun=1", `{"keyname": "d1", "hostname": "h"}`, "created", adminCred, "d1", "[keyname hostname]"},
		{"PUT", "/api/instances/server/srv1/?dryrun=true", `{"hostname": "h", "displayname": "D"}`, "updated", adminCred, "srv1", "[displayname hostname]"},
		{"PATCH", "/api/instances/server/srv1/?dryrun=1", `{"keyname": "srv7"}`, "updated", both(adminCred, header("If-Match", tag)), "srv7", "[keyname]"},
		{"PATCH", "/api/instances/server/srv2/?dryrun=1", `{"is_enabled": true, "site": "s", "hostname": null}`, "updated", adminCred, "srv2", "[is_enabled hostname site]"},
		{"PATCH", "/api/instances/server/srv1/?dryrun=1", `{"hostname": "alpha"}`, "unchanged", adminCred, "srv1", "[]"},
		{"DELETE", "/api/instances/server/srv1/?dryrun=1", "", "deleted", adminCred, "srv1", "[]"},
	} {
		t.Run(tc.method+" "+tc.result, func(t *testing.T) {
			ct := "application/json"
			if tc.body == "" {
				ct = ""
			}
			got := object(t, e.send(tc.method, tc.path, tc.c, ct, tc.body), 200)
			inst, _ := got["instance"].(map[string]any)
			renamed := tc.keyname == "srv7"
			if got["dryrun"] != true || got["result"] != tc.result || inst["keyname"] != tc.keyname || got["renamed"] != renamed ||
				fmt.Sprint(got["changed"]) != tc.changed {
				t.Fatalf("reply = %v, want changed %s", got, tc.changed)
			}
		})
	}
	t.Run("a changed secret is named, never shown", func(t *testing.T) {
		e.user("bob", true)
		rows := e.instanceRows()
		r := e.send("PATCH", "/api/instances/_user/bob/?dryrun=1", adminCred, "application/json", `{"password": "bob-new-secret", "email": "b@example.org"}`)
		got := object(t, r, 200)
		if fmt.Sprint(got["changed"]) != "[email password]" {
			t.Fatalf("changed = %v", got["changed"])
		}
		if strings.Contains(string(r.body), "bob-new-secret") || strings.Contains(string(r.body), "$argon2") || strings.Contains(string(r.body), "$sha256") {
			t.Fatalf("the reply shows the secret: %s", r.body)
		}
		if e.instanceRows() != rows {
			t.Fatal("a dry run changed the tables")
		}
	})
	before = e.instanceRows() // with bob
	t.Run("a dry run's refusal is the real one", func(t *testing.T) {
		r := e.send("PATCH", "/api/instances/server/srv1/?dryrun=1", both(adminCred, header("If-Match", `"old"`)), "application/json", `{"site": "x"}`)
		if r.status != 412 {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		wantError(t, e.send("PATCH", "/api/instances/server/srv1/?dryrun=1", adminCred, "application/json", `{"is_enabled": "maybe"}`),
			400, `is_enabled "maybe" is not a boolean`)
	})
	if e.instanceRows() != before {
		t.Fatal("a dry run changed the tables")
	}
}

// TestInstanceWriteHostileBodies: bad bodies get a 4xx naming the problem and change
// nothing.
func TestInstanceWriteHostileBodies(t *testing.T) {
	t.Parallel()
	e := writeEnv(t, envOptions{MaxBody: 64 << 10})
	before := e.instanceRows()
	deep := `{"hostname": ` + strings.Repeat("[", 30000) + strings.Repeat("]", 30000) + `}`
	for _, tc := range []struct {
		name, method, ct, body string
		status                 int
		msg                    string
	}{
		{"huge", "PUT", "application/json", `{"hostname": "` + strings.Repeat("a", 70<<10) + `"}`, 413, "request body too large"},
		{"not JSON", "PUT", "application/json", `hostname=x`, 400, ""},
		{"truncated JSON", "PATCH", "application/json", `{"hostname": "x"`, 400, ""},
		{"deeply nested", "PATCH", "application/json", deep, 400, ""},
		{"a list", "PUT", "application/json", `[{"hostname": "x"}]`, 400, "request body must be one JSON object"},
		{"a YAML list", "PUT", "application/yaml", "- hostname: x\n", 400, "request body must be one YAML mapping, not a list"},
		{"two YAML documents", "PUT", "application/yaml", "hostname: x\n---\nhostname: y\n", 400, "request body must be one object (POST /api/load/ takes several)"},
		{"a scalar", "PATCH", "application/yaml", "42\n", 400, ""},
		{"empty", "PATCH", "application/json", "", 400, "request body is empty: send one object"},
		{"a form", "PATCH", "application/x-www-form-urlencoded", "a=b", 415, `unsupported Content-Type "application/x-www-form-urlencoded"; send application/merge-patch+json, application/json or application/yaml`},
		{"merge-patch on PUT", "PUT", "application/merge-patch+json", `{"hostname": "x"}`, 415, ""},
		{"unknown fields", "PATCH", "application/json", `{"hostnme": "x", "zz": 1}`, 400, `server has no field "hostnme", "zz" (fields are set by name; classname, keyname, displayname and is_enabled are the other keys)`},
		{"another classname", "PUT", "application/json", `{"classname": "rack"}`, 400, `classname "rack" is not the schema of the path (server)`},
		{"_action", "PUT", "application/json", `{"_action": "delete"}`, 400, "_action is not taken here: the method says what the write does (POST creates, PUT replaces, PATCH changes, DELETE deletes)"},
		{"a map for a string", "PATCH", "application/json", `{"hostname": {"a": 1}}`, 400, ""},
		{"a list for a string", "PATCH", "application/json", `{"hostname": [1, 2]}`, 400, ""},
		{"a wrong is_enabled", "PATCH", "application/json", `{"is_enabled": "maybe"}`, 400, `is_enabled "maybe" is not a boolean`},
		{"a list keyname", "PATCH", "application/json", `{"keyname": ["a"]}`, 400, "keyname must be a scalar"},
		{"a NUL", "PATCH", "application/json", `{"hostname": "a\u0000b"}`, 400, ""},
	} {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			r := e.send(tc.method, "/api/instances/server/srv1/", adminCred, tc.ct, tc.body)
			switch {
			case tc.msg != "":
				wantError(t, r, tc.status, tc.msg)
			case tc.status != 0 && r.status != tc.status, r.status < 400 || r.status >= 500:
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			default:
				var m map[string]any
				if err := json.Unmarshal(r.body, &m); err != nil || m["error"] == "" {
					t.Fatalf("body %s is not an error: %v", r.body, err)
				}
				t.Logf("%d %s", r.status, m["error"])
			}
		})
	}
	if e.instanceRows() != before {
		t.Fatal("a refused body changed the tables")
	}
	object(t, e.get("/api/instances/server/srv1/", adminCred), 200)
}
