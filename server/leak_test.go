package server_test

import (
	"strings"
	"testing"
)

// TestLoadErrorsDoNotQuoteSecrets: a load-time pipeline rule that fails on a plain
// secret (directly or after copying it to another field) does not quote it, and a
// YAML error on a password read as an alias does not name it.
func TestLoadErrorsDoNotQuoteSecrets(t *testing.T) {
	t.Parallel()
	e := newLoadEnv(t, envOptions{NoRunner: true})
	e.load(`
- {classname: _pipeline, keyname: toint_pw, content: "- field_toint: password"}
- {classname: _pipeline, keyname: copy_pw, content: "- field_copy: [password, note]\n- field_upper: note\n- field_toint: note"}
- {classname: _pipeline, keyname: toint_host, content: "- field_toint: hostname"}
`)
	users := e.key("usrload", keySpec{perms: []string{"p_api_load", "p_user_import"}})
	const secret = "Hunter2-plain-secret"
	for _, p := range []string{"toint_pw", "copy_pw"} {
		r := e.post("/api/load/?pipeline="+p, users, []byte(`[{"classname": "_user", "keyname": "leaky", "password": "`+secret+`"}]`))
		if r.status != 200 || strings.Contains(strings.ToLower(string(r.body)), strings.ToLower(secret)) ||
			!strings.Contains(string(r.body), "(value not shown)") {
			t.Fatalf("pipeline %s: status %d, body %s: want the error without the secret", p, r.status, r.body)
		}
	}
	// Classes without secret fields keep the quoted value: it helps the operator.
	r := e.post("/api/load/?pipeline=toint_host", e.loader, []byte(`[{"classname": "server", "keyname": "h1", "hostname": "abc"}]`))
	if !strings.Contains(string(r.body), `cannot convert \"abc\" to int`) {
		t.Fatalf("class without secrets: body %s, want the value quoted", r.body)
	}
	r = e.post("/api/load/", users, []byte("- classname: _user\n  keyname: leaky\n  password: *"+secret+"\n"))
	if r.status != 400 || strings.Contains(string(r.body), secret) {
		t.Fatalf("alias-looking password: status %d body %s, want 400 without it", r.status, r.body)
	}
}
