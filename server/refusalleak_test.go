package server_test

import (
	"strings"
	"testing"
)

// TestRefusedWriteRevealsNoInstance: a caller who may not write a schema learns from
// a refused write (a one-instance write or a load's dry run, with a bad keyname so
// that the entry's problems are listed) nothing of whether the instance a reference
// names exists in a schema it cannot read: the answers for an existing and a missing
// keyname are the same, the guess aside.
func TestRefusedWriteRevealsNoInstance(t *testing.T) {
	t.Parallel()
	e := writeEnv(t, envOptions{})
	e.load(`
- {classname: _permission, keyname: p_hidden_read}
- {classname: _schema, keyname: hidden, p_read: p_hidden_read, note: {dataformat: string}}
- {classname: hidden, keyname: alice-salary-2026, note: x}
- {classname: _schema, keyname: pub, ref: {dataformat: schema, dataformat_ext: hidden}}
- {classname: pub, keyname: p1}
`)
	reader := e.key("reader", keySpec{perms: []string{"p_data_access", "p_data_read"}})
	loader := e.key("loader", keySpec{perms: []string{"p_data_access", "p_api_load"}})
	if r := e.get("/api/instances/hidden/", reader); r.status != 403 {
		t.Fatalf("the reader reads the hidden schema: %d", r.status)
	}
	const there, missing = "alice-salary-2026", "bob-salary-2026"
	answers := func(guess string) []string {
		body := `{"keyname": "bad key", "ref": "` + guess + `"}`
		var out []string
		for _, r := range []reply{
			e.send("POST", "/api/instances/pub/", reader, "application/json", body),
			e.send("PUT", "/api/instances/pub/p1/", reader, "application/json", body),
			e.post("/api/load/?dryrun=1", both(loader, header("Content-Type", "application/yaml")),
				[]byte("- {classname: pub, keyname: bad key, ref: "+guess+"}\n")),
		} {
			out = append(out, strings.ReplaceAll(string(r.body), guess, "GUESS"))
		}
		return out
	}
	a, b := answers(there), answers(missing)
	for i := range a {
		if a[i] != b[i] {
			t.Errorf("answer %d differs between an existing and a missing keyname:\n%s\n%s", i, a[i], b[i])
		}
	}
	// A caller who may write the schema gets every problem, the reference's included.
	writer := e.key("writer", keySpec{perms: []string{"p_data_access", "p_data_read", "p_data_create"}})
	r := e.send("POST", "/api/instances/pub/", writer, "application/json", `{"keyname": "bad key", "ref": "`+missing+`"}`)
	if r.status != 400 || !strings.Contains(string(r.body), missing) {
		t.Fatalf("a writer's refusal does not name the missing reference: %d %s", r.status, r.body)
	}
}

// TestGrantRefusalNamesNoPermission: a write refused by grant containment does not list
// the permissions the object confers, which may be another principal's.
func TestGrantRefusalNamesNoPermission(t *testing.T) {
	t.Parallel()
	e := writeEnv(t, envOptions{})
	e.load(`
- {classname: _permission, keyname: p_top_secret_thing}
- {classname: _role, keyname: secret_role, permissions: [p_top_secret_thing, p_data_access], users: [bob]}
- {classname: _user, keyname: bob, email: bob@example.org}
`)
	e.key("powerful", keySpec{perms: []string{"p_conf_admin", "p_api_conf"}})
	loader := e.key("uloader", keySpec{perms: []string{"p_api_load", "p_user_import", "p_data_access"}})
	writer := e.key("uwriter", keySpec{perms: []string{"p_user_import", "p_data_access", "p_data_read"}})
	keyAdmin := e.key("kadmin", keySpec{perms: []string{"p_apikey_admin", "p_data_access"}})
	for _, r := range []reply{
		e.post("/api/load/", both(loader, header("Content-Type", "application/yaml")), []byte("- {classname: _user, keyname: bob, email: x@example.org}\n")),
		e.send("PATCH", "/api/instances/_user/bob/", writer, "application/json", `{"email": "y@example.org"}`),
		e.send("PATCH", "/api/instances/_apikey/powerful/", keyAdmin, "application/json", `{"description": "x"}`),
	} {
		body := string(r.body)
		if !strings.Contains(body, "permissions you do not hold") {
			t.Fatalf("not refused by grant containment: %d %s", r.status, body)
		}
		for _, p := range []string{"p_top_secret_thing", "p_conf_admin", "p_api_conf"} {
			if strings.Contains(body, p) {
				t.Fatalf("the refusal names %s: %s", p, body)
			}
		}
	}
}

// TestSecretFieldHoldsOneValue: a secret field with several values is refused at its
// definition, so no request can have the store hash a list of them.
func TestSecretFieldHoldsOneValue(t *testing.T) {
	t.Parallel()
	e := writeEnv(t, envOptions{})
	before := e.instanceRows()
	for _, max := range []string{"0", "40"} {
		r := e.post("/api/load/", both(adminCred, header("Content-Type", "application/yaml")),
			[]byte("- {classname: _schema, keyname: vault, pins: {dataformat: secret, cardinal_max: "+max+"}}\n"))
		if !strings.Contains(string(r.body), "a secret field holds one value") {
			t.Fatalf("cardinal_max %s: %d %s", max, r.status, r.body)
		}
	}
	if e.instanceRows() != before {
		t.Fatal("a refused schema changed the tables")
	}
}
