package server_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestEventRuleAPI: an event rule written through the per-instance API is checked as
// a whole (each problem named on its field), its secret is stored sealed and appears
// in no reply (the write's, GET's, the list's), and a change that leaves the secret
// out keeps it.
func TestEventRuleAPI(t *testing.T) {
	t.Parallel()
	e := writeEnv(t, envOptions{})
	const json = "application/json"
	const plain = "plain-signing-secret-xyz"
	events := e.key("events", keySpec{perms: []string{"p_data_access", "p_event_admin", "p_data_read"}})
	clean := func(what string, r reply) {
		t.Helper()
		body := string(r.body)
		if strings.Contains(body, plain) || strings.Contains(body, "enc:v1:") || strings.Contains(body, `"secret"`) {
			t.Fatalf("%s shows the secret: %s", what, body)
		}
	}
	r := e.send("POST", "/api/instances/_eventrule/", events, json,
		`{"keyname": "r1", "schemas": ["server"], "webhook_url": "https://r.example/h", "secret": "`+plain+`", "condition": ["changed", "hostname"]}`)
	if r.status != http.StatusCreated {
		t.Fatalf("POST: status %d, body %s", r.status, r.body)
	}
	clean("the POST reply", r)
	stored := e.queryString("SELECT data ->> 'secret' FROM instances WHERE classname = '_eventrule' AND keyname = 'r1'")
	if !strings.HasPrefix(stored, "enc:v1:") {
		t.Fatalf("stored secret %q, want it sealed", stored)
	}
	got := object(t, e.get("/api/instances/_eventrule/r1/", events), 200)
	if got["condition"] != "[changed, hostname]" || got["author"] != "apikey:events" {
		t.Fatalf("GET: %v", got)
	}
	clean("GET", e.get("/api/instances/_eventrule/r1/", events))
	clean("the list", e.get("/api/instances/_eventrule/", events))
	object(t, e.send("PATCH", "/api/instances/_eventrule/r1/", events, "application/merge-patch+json", `{"description": "watch hosts"}`), 200)
	if now := e.queryString("SELECT data ->> 'secret' FROM instances WHERE classname = '_eventrule' AND keyname = 'r1'"); now != stored {
		t.Fatal("a PATCH without the secret changed it")
	}

	r = e.send("POST", "/api/instances/_eventrule/", events, json,
		`{"keyname": "r2", "schemas": ["server", "_apikey"], "actions": ["create", "boom"], "webhook_url": "ftp://r.example/h"}`)
	body := string(r.body)
	for _, want := range []string{
		"schemas: watching _apikey needs p_apikey_admin, which the writer does not hold",
		`actions: \"boom\" is not an action`,
		"webhook_url: not an http:// or https:// URL",
		"secret: a webhook rule needs a secret",
	} {
		if r.status != http.StatusBadRequest || !strings.Contains(body, want) {
			t.Errorf("POST of a faulty rule: status %d, body %s: want 400 naming %q", r.status, body, want)
		}
	}
	// A refusal never echoes the secret given.
	r = e.send("POST", "/api/instances/_eventrule/", events, json,
		`{"keyname": "r3", "schemas": ["server"], "webhook_url": "https://u:p@r.example/h", "secret": "`+plain+`"}`)
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "the URL carries user information") {
		t.Fatalf("POST with user info: status %d, body %s", r.status, r.body)
	}
	clean("a refusal", r)
}
