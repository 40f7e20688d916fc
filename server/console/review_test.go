package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// An instance's detail, delete and rename pages list what refers to it only from
// schemas the user may read: a referrer's keyname and displayname are data of its
// schema.
func TestReferencedByHidesUnreadableSchemas(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(people)
	e.load(`
- {classname: _permission, keyname: p_vault_read}
- {classname: _schema, keyname: vault, p_read: p_vault_read, site: {dataformat: schema, dataformat_ext: site}}
- {classname: vault, keyname: hidden-vault-entry, displayname: Hidden vault display, site: paris}
`)
	w := e.browser()
	w.signIn("writer", "writer-pass-1")
	want(t, w.get("/data/private/vault/"), http.StatusForbidden)
	for _, path := range []string{"/data/private/site/paris/", "/data/private/site/paris/?do=delete", "/data/private/site/paris/?do=rename"} {
		p := w.get(path)
		want(t, p, 200, "rack r1") // a readable referrer is listed
		lacks(t, p, "hidden-vault-entry", "Hidden vault display")
	}
	// Renaming reports the references that followed, counting only readable ones.
	p := w.post("/data/private/site/paris/?do=rename", url.Values{"csrf": {w.csrf()}, "new_keyname": {"paris2"}})
	want(t, p, 200, "paris2", "; 1 instance(s) referring")
	lacks(t, p, "hidden-vault-entry")
	// An administrator still sees both.
	a := e.browser()
	a.signIn("admin", adminPassword)
	want(t, a.get("/data/private/site/paris2/"), 200, "rack r1", "hidden-vault-entry")
}

// After signing in, the console only goes to a path of its own: a next that a browser
// would read as another host (tabs and newlines are dropped by browsers' URL parsers,
// backslashes read as slashes) goes to the dashboard.
func TestSignInNextStaysLocal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	for _, next := range []string{"/\t/evil.example/", "/\n/evil.example/", "/\r\n/evil.example/", "/\t\\evil.example/",
		"/x\\..\\\\evil.example", "//evil.example/", "/\\evil.example/", "https://evil.example/"} {
		b := e.browser()
		p := b.post("/login", url.Values{"login": {"admin"}, "password": {adminPassword}, "next": {next}})
		if p.status != http.StatusSeeOther {
			t.Fatalf("next %q: %d", next, p.status)
		}
		if strings.ContainsAny(p.loc, "\t\r\n\\") || strings.HasPrefix(p.loc, "//") || !strings.HasPrefix(p.loc, "/") {
			t.Fatalf("next %q: Location %q leaves the console", next, p.loc)
		}
		// Signed in, the sign-in page redirects to next too.
		p = b.get("/login?next=" + url.QueryEscape(next))
		if strings.ContainsAny(p.loc, "\t\r\n\\") || strings.HasPrefix(p.loc, "//") {
			t.Fatalf("signed-in /login?next=%q: Location %q leaves the console", next, p.loc)
		}
	}
	// A local next with a query still works.
	b := e.browser()
	p := b.post("/login", url.Values{"login": {"admin"}, "password": {adminPassword}, "next": {"/data/private/?x=1"}})
	if p.status != http.StatusSeeOther || p.loc != "/data/private/?x=1" {
		t.Fatalf("local next: %d %q", p.status, p.loc)
	}
}

// A deleted user's sessions end with it: a user created afterwards (who may get the
// same row id) never inherits them.
func TestDeletedUserSessionNotInherited(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(people)
	e.load(`- {classname: _user, keyname: eve, password: eve-pass-12}`)
	eve := e.browser()
	eve.signIn("eve", "eve-pass-12")
	want(t, eve.get("/"), 200, "eve")
	e.load(`- {classname: _user, keyname: eve, _action: delete}`)
	e.load(`- {classname: _user, keyname: frank, password: frank-pass-12}`)
	if n := e.queryInt("SELECT count(*) FROM sessions"); n != 0 {
		t.Fatalf("%d sessions left after their user was deleted", n)
	}
	p := eve.get("/")
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.loc, "/login") {
		t.Fatalf("the deleted user's browser: %d %q\n%s", p.status, p.loc, p.body)
	}
}

// Setting a user's password (console, load or CLI: the one write path) ends the
// sessions opened with the old one.
func TestPasswordChangeEndsSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(people)
	w := e.browser()
	w.signIn("writer", "writer-pass-1")
	r := e.browser()
	r.signIn("reader", "reader-pass-1")
	admin := e.browser()
	admin.signIn("admin", adminPassword)
	p := admin.post("/data/private/_user/writer/?do=password", url.Values{"csrf": {admin.csrf()}, "password": {"new-pass-1"}, "password2": {"new-pass-1"}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("set password: %d\n%s", p.status, p.body)
	}
	if p := w.get("/"); p.status != http.StatusSeeOther || !strings.HasPrefix(p.loc, "/login") {
		t.Fatalf("writer's session after an administrator set the password: %d %q", p.status, p.loc)
	}
	want(t, admin.get("/"), 200, "admin") // other users' sessions stay
	// An edit that leaves the password alone keeps the sessions.
	e.load(`- {classname: _user, keyname: reader, displayname: Reader}`)
	want(t, r.get("/"), 200, "reader")
	e.load(`- {classname: _user, keyname: reader, password: reader-pass-2}`)
	if p := r.get("/"); p.status != http.StatusSeeOther || !strings.HasPrefix(p.loc, "/login") {
		t.Fatalf("reader's session after a load set the password: %d %q", p.status, p.loc)
	}
	r.signIn("reader", "reader-pass-2")
}

// A form larger than the console accepts (1 MiB) is refused as too large, not as a
// CSRF failure, and changes nothing.
func TestOversizeFormNamesTheProblem(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(people)
	w := e.browser()
	w.signIn("writer", "writer-pass-1")
	tok := w.csrf()
	big := strings.Repeat("a", 2<<20)
	p := w.post("/data/private/site/paris/?do=edit", url.Values{"csrf": {tok}, "displayname": {"Paris"}, "is_enabled": {"true"}, "f_location": {big}})
	want(t, p, http.StatusRequestEntityTooLarge, "larger than")
	lacks(t, p, "CSRF")
	want(t, w.get("/data/private/site/paris/"), 200, "Rue A")
	p = w.post("/login", url.Values{"login": {"writer"}, "password": {big}})
	want(t, p, http.StatusRequestEntityTooLarge, "larger than")
}
