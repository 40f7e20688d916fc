package server_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"dataservice/internal/testkit"
)

// TestAuthRefused: every credential that is not good is a 401 with the same message,
// and no credentials at all is "authentication required"; both carry WWW-Authenticate.
func TestAuthRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRunner: true})
	perms := []string{"p_data_access"}
	e.key("good", keySpec{perms: perms})
	e.key("off", keySpec{perms: perms, disabled: true})
	e.key("old", keySpec{perms: perms, expires: "2026-11-21"})
	e.key("far", keySpec{perms: perms, ipFilter: []string{"10.0.0.0/8", "192.168.0.0/16"}})
	e.user("carol", false)
	e.user("dave", true)
	secret := func(k string) string { return "s3cret-" + k }
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

	cases := []struct {
		name string
		c    cred
	}{
		{"disabled key", bearer("off", secret("off"))},
		{"expired key", bearer("old", secret("old"))},
		{"client address outside ip_filter", bearer("far", secret("far"))},
		{"wrong secret", bearer("good", "wrong")},
		{"wrong secret by X-Service-Key", serviceKey("good", "wrong")},
		{"unknown key", bearer("nobody", "whatever")},
		{"built-in key without a secret", bearer("api_builtin", "anything")},
		{"empty secret", header("Authorization", "Bearer good:")},
		{"empty key", header("Authorization", "Bearer :"+secret("good"))},
		{"bearer without separator", header("Authorization", "Bearer good"+secret("good"))},
		{"bearer with a space instead of a colon", header("Authorization", "Bearer good "+secret("good"))},
		{"empty bearer", header("Authorization", "Bearer")},
		{"X-Service-Key without separator", header("X-Service-Key", "good:"+secret("good"))},
		{"X-Service-Key with only a key", header("X-Service-Key", "good")},
		{"non-UTF-8 secret", header("Authorization", "Bearer good:\xff\xfe")},
		{"non-UTF-8 key", header("X-Service-Key", "go\xc3od "+secret("good"))},
		{"unknown scheme", header("Authorization", "Token good:"+secret("good"))},
		{"basic login of an inactive user", basic("carol", "pw-carol")},
		{"basic wrong password", basic("dave", "wrong")},
		{"basic unknown login", basic("nobody", "pw-nobody")},
		{"basic without colon", header("Authorization", "Basic "+b64("dave"))},
		{"basic not base64", header("Authorization", "Basic !!!")},
		{"basic empty password", header("Authorization", "Basic "+b64("dave:"))},
	}
	for _, tc := range cases {
		t.Run(tc.name+" is 401", func(t *testing.T) {
			wantError(t, e.get("/api/version/", tc.c), 401, "authentication required")
		})
	}
	t.Run("no credentials is 401 authentication required", func(t *testing.T) {
		r := e.get("/api/version/", noCred)
		wantError(t, r, 401, "authentication required")
		if got := strings.Join(r.header.Values("WWW-Authenticate"), " "); !strings.Contains(got, "Bearer") || !strings.Contains(got, "Basic") {
			t.Fatalf("WWW-Authenticate = %q, want Bearer and Basic challenges", got)
		}
	})
	t.Run("refused keys keep last_used unset", func(t *testing.T) {
		for _, k := range []string{"good", "off", "old", "far"} {
			if got := e.queryString(`SELECT COALESCE(data ->> 'last_used', 'unset') FROM instances
				WHERE classname = '_apikey' AND keyname = ?`, k); got != "unset" {
				t.Fatalf("key %s: last_used = %q after refused requests, want unset", k, got)
			}
		}
	})
}

// TestAuthAccepted: the accepted credential forms.
func TestAuthAccepted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRunner: true})
	perms := []string{"p_data_access"}
	good := e.key("good", keySpec{perms: perms})
	e.key("today", keySpec{perms: perms, expires: "2026-11-22"})
	e.key("near", keySpec{perms: perms, ipFilter: []string{"10.0.0.0/8", "127.0.0.0/8"}})
	e.key("ro", keySpec{perms: perms, readOnly: true})
	dave := e.user("dave", true)
	cases := []struct {
		name string
		c    cred
	}{
		{"bearer KEY:SECRET", good},
		{"lower-case bearer scheme", header("Authorization", "bearer good:s3cret-good")},
		{"X-Service-Key KEY SECRET", serviceKey("good", "s3cret-good")},
		{"key expiring today", bearer("today", "s3cret-today")},
		{"client address inside ip_filter", bearer("near", "s3cret-near")},
		{"read-only key reads", bearer("ro", "s3cret-ro")},
		{"basic login of an active user", dave},
		{"basic admin login", adminCred},
		{"bearer wins over a bad X-Service-Key", both(good, serviceKey("good", "wrong"))},
	}
	for _, tc := range cases {
		t.Run(tc.name+" is allowed", func(t *testing.T) {
			if got, want := object(t, e.get("/api/version/", tc.c), 200)["version"], any("4.9.0"); got != want {
				t.Fatalf("version = %v, want %v", got, want)
			}
		})
	}
	t.Run("bad bearer is refused even with a good X-Service-Key", func(t *testing.T) {
		wantError(t, e.get("/api/version/", both(bearer("good", "wrong"), serviceKey("good", "s3cret-good"))), 401, "authentication required")
	})
}

// TestAuthSecretForms: a plain-text secret is stored as an argon2id hash; a
// $sha256$<salt hex>$<digest hex> secret is stored as is and verifies.
func TestAuthSecretForms(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRunner: true})
	plain := e.key("plain", keySpec{perms: []string{"p_data_access"}, plain: true})
	stored := e.queryString(`SELECT data ->> 'secret' FROM instances WHERE classname = '_apikey' AND keyname = 'plain'`)
	if !strings.HasPrefix(stored, "$argon2id$v=19$") {
		t.Fatalf("stored secret = %q, want an argon2id hash", stored)
	}
	t.Run("plain-text secret verifies against its hash", func(t *testing.T) {
		object(t, e.get("/api/version/", plain), 200)
	})
	t.Run("plain-text secret rejects a wrong one", func(t *testing.T) {
		wantError(t, e.get("/api/version/", bearer("plain", "s3cret-plainx")), 401, "authentication required")
	})

	hash := sha256Hash([]byte{0x01, 0x02, 0xfe}, "legacy-secret")
	e.load(`[{classname: _apikey, keyname: legacy, permissions: [p_data_access], secret: '` + hash + `'}]`)
	if got := e.queryString(`SELECT data ->> 'secret' FROM instances WHERE classname = '_apikey' AND keyname = 'legacy'`); got != hash {
		t.Fatalf("stored secret = %q, want the given hash %q", got, hash)
	}
	t.Run("sha256 secret verifies", func(t *testing.T) {
		object(t, e.get("/api/version/", bearer("legacy", "legacy-secret")), 200)
	})
	t.Run("sha256 secret rejects a wrong one", func(t *testing.T) {
		wantError(t, e.get("/api/version/", bearer("legacy", "legacy-secreT")), 401, "authentication required")
	})
	t.Run("the hash itself is not a secret", func(t *testing.T) {
		wantError(t, e.get("/api/version/", bearer("legacy", hash)), 401, "authentication required")
	})
}

// TestAuthKeyPermissions: role: entries add a role's permissions, ! entries remove.
func TestAuthKeyPermissions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRunner: true})
	e.load(`
- {classname: _role, keyname: r_ops, permissions: [p_data_access, p_pipeline_run]}
- {classname: _role, keyname: r_off, is_enabled: false, permissions: [p_data_access]}
`)
	cases := []struct {
		name   string
		perms  []string
		path   string
		status int
	}{
		{"role entry grants the role's permission", []string{"role:r_ops"}, "/api/pipelines/", 200},
		{"role entry grants every role permission", []string{"role:r_ops"}, "/api/tasks/", 200},
		{"removal beats a role's permission", []string{"role:r_ops", "!p_data_access"}, "/api/pipelines/", 403},
		{"removal listed first still removes", []string{"!p_data_access", "role:r_ops"}, "/api/pipelines/", 403},
		{"removal keeps the role's other permissions", []string{"role:r_ops", "!p_data_access"}, "/api/tasks/", 200},
		{"removal beats a plain permission", []string{"p_data_access", "!p_data_access"}, "/api/pipelines/", 403},
		{"disabled role grants nothing", []string{"role:r_off"}, "/api/pipelines/", 403},
		{"unknown role grants nothing", []string{"role:r_none"}, "/api/pipelines/", 403},
		{"role_admin grants every permission", []string{"role:role_admin"}, "/api/conf/", 200},
		{"removal beats role_admin", []string{"role:role_admin", "!p_conf_view", "!p_conf_admin"}, "/api/conf/", 403},
		{"plain permission grants it", []string{"p_data_access"}, "/api/pipelines/", 200},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := e.key("k"+string(rune('a'+i)), keySpec{perms: tc.perms})
			r := e.get(tc.path, c)
			if tc.status == 403 {
				wantError(t, r, 403, "permission denied")
				return
			}
			object(t, r, tc.status)
		})
	}
}

// TestAuthLastUsed: an accepted key records last_used, at most once a minute.
func TestAuthLastUsed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRunner: true})
	c := e.key("busy", keySpec{perms: []string{"p_data_access"}})
	other := e.key("other", keySpec{perms: []string{"p_data_access"}})
	lastUsed := func(k string) string {
		return e.queryString(`SELECT COALESCE(data ->> 'last_used', 'unset') FROM instances
			WHERE classname = '_apikey' AND keyname = ?`, k)
	}
	if got, want := lastUsed("busy"), "unset"; got != want {
		t.Fatalf("last_used before use = %q, want %q", got, want)
	}
	object(t, e.get("/api/version/", c), 200)
	first := lastUsed("busy")
	if _, err := time.Parse("2006-01-02T15:04:05", first); err != nil {
		t.Fatalf("last_used = %q after use: %v", first, err)
	}
	// A marker shows whether the next request writes again.
	testkit.SetDataField(t, e.db, "_apikey", "busy", "last_used", "2001-01-01T00:00:00")
	object(t, e.get("/api/version/", c), 200)
	object(t, e.get("/api/pipelines/", c), 200)
	if got, want := lastUsed("busy"), "2001-01-01T00:00:00"; got != want {
		t.Fatalf("last_used = %q after quick repeats, want %q (written again within a minute)", got, want)
	}
	t.Run("each key has its own minute", func(t *testing.T) {
		object(t, e.get("/api/version/", other), 200)
		if got := lastUsed("other"); got == "unset" {
			t.Fatalf("last_used of a second key not written")
		}
	})
	t.Run("a key read by API shows last_used", func(t *testing.T) {
		d := object(t, e.get("/api/instances/_apikey/busy/", adminCred), 200)
		if got, want := d["last_used"], any("2001-01-01T00:00:00"); got != want {
			t.Fatalf("last_used = %v, want %v", got, want)
		}
	})
}
