package server_test

import (
	"strings"
	"testing"
)

// refusedEntry posts one load entry and wants it refused with a permission error.
func (e *loadEnv) refusedEntry(t *testing.T, c cred, path, body string) {
	t.Helper()
	res := decodeLoad(t, e.post(path, c, []byte(body)))
	if res.Errors != 1 || res.Created+res.Updated+res.Deleted+res.Enabled+res.Disabled != 0 ||
		!strings.Contains(res.Messages[0].Message, "permission denied") {
		t.Fatalf("%s: got %+v, want one permission error", body, res)
	}
}

// TestEscalationPaths: each path by which a modest credential became admin is closed.
func TestEscalationPaths(t *testing.T) {
	t.Parallel()
	e := newLoadEnv(t, envOptions{NoRunner: true})
	adminHash := e.queryString("SELECT data ->> 'password' FROM instances WHERE classname = '_user' AND keyname = 'admin'")

	t.Run("p_data_admin cannot create an admin API key and read /api/conf/", func(t *testing.T) {
		da := e.key("esc_data_admin", keySpec{perms: []string{"p_api_load", "p_data_admin"}})
		e.refusedEntry(t, da, "/api/load/",
			`[{"classname": "_apikey", "keyname": "evil", "secret": "chosen", "is_readonly": false, "permissions": ["role:role_admin"]}]`)
		if r := e.get("/api/conf/", bearer("evil", "chosen")); r.status != 401 {
			t.Fatalf("the key was created: /api/conf/ answered %d", r.status)
		}
	})
	t.Run("p_data_update cannot rewrite a pipeline", func(t *testing.T) {
		du := e.key("esc_data_update", keySpec{perms: []string{"p_api_load", "p_data_update", "p_data_admin"}})
		e.refusedEntry(t, du, "/api/load/", `[{"classname": "_pipeline", "keyname": "bulk_delete_disabled", "_action": "update", "content": "- field_set: ['', _action, delete]"}]`)
	})
	ui := e.key("esc_user_import", keySpec{perms: []string{"p_api_load", "p_user_import"}})
	t.Run("p_user_import cannot make a user a member of role_admin", func(t *testing.T) {
		e.load(`[{classname: _user, keyname: mallory}]`)
		e.refusedEntry(t, ui, "/api/load/", `[{"classname": "_role", "keyname": "role_admin", "_action": "update", "users": ["mallory"]}]`)
		e.refusedEntry(t, ui, "/api/load/", `[{"classname": "_role", "keyname": "r_conf", "permissions": ["p_conf_admin"], "users": ["mallory"]}]`)
	})
	t.Run("p_user_import cannot add a user to a group that a powerful role lists", func(t *testing.T) {
		e.load(`[{classname: _group, keyname: g_ops}, {classname: _role, keyname: r_ops, permissions: [p_conf_admin], subgroups: [g_ops]}]`)
		e.refusedEntry(t, ui, "/api/load/", `[{"classname": "_group", "keyname": "g_ops", "_action": "update", "users": ["mallory"]}]`)
		e.load(`[{classname: _group, keyname: g_mine, users: [mallory]}]`)
		e.refusedEntry(t, ui, "/api/load/", `[{"classname": "_group", "keyname": "g_ops", "_action": "update", "subgroups": ["g_mine"]}]`)
	})
	t.Run("p_user_import cannot set admin's password", func(t *testing.T) {
		e.refusedEntry(t, ui, "/api/load/", `[{"classname": "_user", "keyname": "admin", "_action": "update", "password": "owned"}]`)
	})
	t.Run("p_user_import cannot disable admin", func(t *testing.T) {
		e.refusedEntry(t, ui, "/api/load/?action=disable", `[{"classname": "_user", "keyname": "admin"}]`)
		e.refusedEntry(t, ui, "/api/load/", `[{"classname": "_user", "keyname": "admin", "_action": "update", "is_enabled": false}]`)
	})
	if got := e.queryString("SELECT (data ->> 'password') || is_enabled FROM instances WHERE classname = '_user' AND keyname = 'admin'"); got != adminHash+"1" {
		t.Fatalf("admin account changed: %s", got)
	}
	t.Run("p_user_import writes roles and users within its own permissions", func(t *testing.T) {
		res := decodeLoad(t, e.post("/api/load/", ui, []byte(`[{"classname": "_role", "keyname": "r_small", "permissions": ["p_user_import"], "users": ["mallory"]}, {"classname": "_user", "keyname": "mallory", "_action": "update", "password": "fresh"}]`)))
		if res.Created != 1 || res.Updated != 1 || res.Errors != 0 {
			t.Fatalf("got %+v, want the role created and the user updated", res)
		}
	})
	ka := e.key("esc_key_admin", keySpec{perms: []string{"p_api_load", "p_apikey_admin", "p_data_read"}})
	t.Run("p_apikey_admin cannot create a key with permissions it lacks", func(t *testing.T) {
		e.refusedEntry(t, ka, "/api/load/", `[{"classname": "_apikey", "keyname": "k_conf", "permissions": ["p_conf_admin"]}]`)
		e.refusedEntry(t, ka, "/api/load/", `[{"classname": "_apikey", "keyname": "k_role", "permissions": ["role:r_ops"]}]`)
	})
	t.Run("p_apikey_admin cannot give a key admin's identity", func(t *testing.T) {
		e.refusedEntry(t, ka, "/api/load/", `[{"classname": "_apikey", "keyname": "k_admin", "permissions": ["p_data_read"], "user": "admin"}]`)
	})
	t.Run("p_apikey_admin creates keys within its own permissions", func(t *testing.T) {
		res := decodeLoad(t, e.post("/api/load/", ka, []byte(`[{"classname": "_apikey", "keyname": "k_ok", "permissions": ["p_data_read"]}]`)))
		if res.Created != 1 {
			t.Fatalf("got %+v", res)
		}
	})
	t.Run("p_apikey_admin cannot rotate the secret of a more powerful key", func(t *testing.T) {
		e.key("k_root", keySpec{perms: []string{"role:role_admin"}})
		e.refusedEntry(t, ka, "/api/load/", `[{"classname": "_apikey", "keyname": "k_root", "_action": "update", "secret": "mine"}]`)
	})
}

// TestNoSecretOracle: a load by a caller without every permission reports a plain
// password the same way whether it is the stored one or not.
func TestNoSecretOracle(t *testing.T) {
	t.Parallel()
	e := newLoadEnv(t, envOptions{NoRunner: true})
	e.load(`[{classname: _user, keyname: victim, password: "right-password"}]`)
	ui := e.key("oracle_user_import", keySpec{perms: []string{"p_api_load", "p_user_import"}})
	var got []string
	for _, pw := range []string{"right-password", "wrong-password"} {
		for _, dry := range []string{"?dryrun=1", ""} {
			res := decodeLoad(t, e.post("/api/load/"+dry, ui, []byte(`[{"classname": "_user", "keyname": "victim", "password": "`+pw+`"}]`)))
			got = append(got, strings.Join([]string{dry, pw[:5]}, " ")+": "+
				strings.Repeat("u", res.Updated)+strings.Repeat("=", res.Unchanged))
		}
	}
	want := []string{"?dryrun=1 right: u", " right: u", "?dryrun=1 wrong: u", " wrong: u"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("outcomes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestLoadRefusesDisabledPipeline: ?pipeline= names a disabled pipeline: 400, nothing loaded.
func TestLoadRefusesDisabledPipeline(t *testing.T) {
	t.Parallel()
	e := newLoadEnv(t, envOptions{NoRunner: true})
	e.load(`[{classname: _pipeline, keyname: off, content: "- field_noop:", is_enabled: false}]`)
	wantError(t, e.post("/api/load/?pipeline=off", e.loader, []byte(`[{"classname": "server", "keyname": "dp1"}]`)), 400,
		"pipeline off is disabled")
}

// TestExternalFieldFollowsReadPermission: an external field shows a value only when
// the caller may read the schema it comes from.
func TestExternalFieldFollowsReadPermission(t *testing.T) {
	t.Parallel()
	e := newLoadEnv(t, envOptions{NoRunner: true})
	e.load(`
- {classname: _permission, keyname: p_vault_read}
- {classname: _schema, keyname: vault, p_read: p_vault_read, code: {dataformat: string}}
- {classname: _schema, keyname: window, ref: {dataformat: schema, dataformat_ext: vault}, peek: {dataformat: external, dataformat_ext: "ref code"}}
- {classname: vault, keyname: v1, code: "launch-code-1234"}
- {classname: window, keyname: w1, ref: v1}
`)
	plain := e.key("ext_plain", keySpec{perms: []string{"p_data_access", "p_data_read"}})
	cleared := e.key("ext_cleared", keySpec{perms: []string{"p_data_access", "p_data_read", "p_vault_read"}})
	if r := e.get("/api/instances/window/w1/", plain); r.status != 200 || strings.Contains(string(r.body), "launch-code") {
		t.Fatalf("without the target's read permission: status %d body %s", r.status, r.body)
	}
	if r := e.get("/api/instances/window/", plain); r.status != 200 || strings.Contains(string(r.body), "launch-code") {
		t.Fatalf("list without the target's read permission: status %d body %s", r.status, r.body)
	}
	if r := e.get("/api/instances/window/w1/", cleared); r.status != 200 || !strings.Contains(string(r.body), "launch-code-1234") {
		t.Fatalf("with the target's read permission: status %d body %s", r.status, r.body)
	}
}
