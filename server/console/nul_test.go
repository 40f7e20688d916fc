package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"dataservice/internal/testkit"
)

// TestNULIsTheCallersError: a NUL character in a console path, query or form value is
// the caller's error (4xx) or harmless, never a server error, on both engines
// (PostgreSQL's text cannot hold a NUL and refuses one even in a comparison), and no
// NUL reaches the database through a form.
func TestNULIsTheCallersError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(toolPeople)
	b := e.browser()
	b.signIn("admin", adminPassword)
	tok := b.csrf()
	const n = "%00" // in a path or query
	gets := []string{
		"/data/private/" + n + "/", "/data/private/a" + n + "b/?search=x",
		"/data/private/site/" + n + "/", "/data/private/site/pa" + n + "ris/?do=edit",
		"/data/private/site/pa" + n + "ris/?do=delete", "/data/private/_user/vic" + n + "tim/?do=password",
		"/data/private/site/?search=" + n, "/data/private/site/?search=pa" + n + "ris&page=" + n + "&size=" + n,
		"/data/private/site/?view=" + n, "/data/private/site/?sort=" + n, "/data/private/site/?sort=location" + n,
		"/data/private/site/?do=lookup&q=" + n, "/data/private/site/?do=lookup&q=pa" + n,
		"/data/private/site/?export=" + n, "/data/private/site/?export=csv&search=" + n,
		"/data/private/site/?export=yaml&search=a" + n + "b&view=" + n, "/data/private/site/?do=" + n,
		"/data/private/site/paris/?do=" + n, "/data/private/rack/?do=new&" + n + "=" + n,
		"/data/private/?done=" + n, "/?done=" + n, "/login?next=" + n, "/login?next=/data/private/" + n + "/",
		"/static/" + n, "/static/css/" + n + ".css",
	}
	for _, p := range gets {
		if got := b.get(p); got.status >= 500 {
			t.Errorf("GET %s: %d\n%.1000s", p, got.status, got.body)
		}
	}
	nul := func(s string) string { return strings.ReplaceAll(s, "0", "\x00") }
	posts := []struct {
		path string
		form url.Values
	}{
		{"/data/private/site/?do=new", url.Values{"keyname": {nul("s0x")}, "displayname": {"S"}, "f_location": {"L"}}},
		{"/data/private/site/?do=new", url.Values{"keyname": {"s1"}, "displayname": {nul("S0")}, "f_location": {nul("L0")}}},
		{"/data/private/rack/?do=new", url.Values{"keyname": {"r9"}, "f_site": {nul("paris0")}, "f_units": {nul("40")},
			"f_tags": {nul("a0"), nul("0")}}},
		{"/data/private/site/paris/?do=edit", url.Values{"displayname": {nul("P0")}, "f_location": {nul("0")}}},
		{"/data/private/rack/r1/?do=edit", url.Values{"f_site": {nul("0")}, "f_units": {"4"}}},
		{"/data/private/site/paris/?do=rename", url.Values{"new_keyname": {nul("lyon0")}}},
		{"/data/private/site/pa%00ris/?do=rename", url.Values{"new_keyname": {"lyon"}}},
		{"/data/private/site/pa%00ris/?do=delete", url.Values{}},
		{"/data/private/site/pa%00ris/?do=disable", url.Values{}},
		{"/data/private/_user/victim/?do=password", url.Values{"password": {nul("new-pass-0")}, "password2": {nul("new-pass-0")}}},
		{"/data/private/_user/?do=new", url.Values{"keyname": {nul("u0")}, "f_password": {nul("p0p0p0p0p0")}}},
		{"/data/private/_user/?do=new", url.Values{"keyname": {"u1"}, "f_email": {nul("a0@example.org")}}},
		{"/data/private/%00/?do=new", url.Values{"keyname": {"x"}}},
		{"/data/private/code_editor/", url.Values{"doc": {nul("- {classname: site, keyname: c0}")}, "do": {"load"}}},
		{"/data/private/import/", url.Values{"format": {"yaml"}, "text": {nul("- {classname: site, keyname: i0}")}, "do": {"load"}}},
		{"/data/private/import/", url.Values{"format": {"csv"}, "schema": {"site"}, "text": {nul("keyname;location\ni0;l0\n")},
			"do": {"load"}}},
		{"/data/private/revision/1/", url.Values{"version": {nul("0")}}},
		{"/logout", url.Values{"next": {nul("0")}}},
	}
	for _, p := range posts {
		p.form.Set("csrf", tok)
		if got := b.post(p.path, p.form); got.status >= 500 {
			t.Errorf("POST %s %q: %d\n%.1000s", p.path, p.form, got.status, got.body)
		}
		if p.path == "/logout" {
			b.signIn("admin", adminPassword)
			tok = b.csrf()
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

	// Signing in last: the failed attempts count against this address.
	for _, f := range []url.Values{
		{"login": {nul("admi0")}, "password": {adminPassword}},
		{"login": {"admin"}, "password": {nul(adminPassword + "0")}},
		{"login": {nul("0")}, "password": {nul("0")}, "next": {nul("/0")}},
	} {
		if got := e.browser().post("/login", f); got.status >= 500 || got.status == http.StatusSeeOther {
			t.Errorf("POST /login %q: %d\n%.1000s", f, got.status, got.body)
		}
	}
}
