package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"dataservice/store"
)

const people = `
- {classname: _user, keyname: reader, password: reader-pass-1}
- {classname: _user, keyname: nodata, password: nodata-pass-1}
- {classname: _user, keyname: writer, password: writer-pass-1}
- {classname: _group, keyname: staff, users: [writer]}
- {classname: _role, keyname: readers, permissions: [p_data_access, p_data_read], users: [reader]}
- {classname: _role, keyname: writers, permissions: [p_data_access, p_data_read, p_data_create, p_data_update, p_data_delete, p_data_export, p_keyname_rename], subgroups: [staff]}
- {classname: _schema, keyname: site, displayname: Sites, location: {displayname: Location, dataformat: string}}
- {classname: _schema, keyname: rack, displayname: Racks,
   site: {displayname: Site, dataformat: schema, dataformat_ext: site},
   units: {displayname: Units, dataformat: int, dataformat_ext: gte_1 lte_60},
   mgmt: {displayname: Management address, dataformat: ipv4},
   tags: {displayname: Tags, dataformat: string, cardinal_max: 0}}
- {classname: site, keyname: paris, displayname: Paris, location: "Rue A"}
- {classname: site, keyname: lyon, displayname: Lyon}
- {classname: rack, keyname: r1, site: paris, units: 42}
- {classname: rack, keyname: r2, site: lyon, units: 48, tags: [cold, spare]}
`

func TestSignInAndOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	b := e.browser()
	p := b.get("/")
	if p.status != http.StatusSeeOther || p.loc != "/login?next=%2F" {
		t.Fatalf("anonymous dashboard: %d %q", p.status, p.loc)
	}
	want(t, b.get("/login"), 200, `name="login"`, `type="password"`)
	p = b.post("/login", url.Values{"login": {"admin"}, "password": {"wrong"}})
	want(t, p, http.StatusUnauthorized, "Wrong login or password")
	if strings.Contains(p.body, "wrong") && strings.Contains(p.body, `value="wrong"`) {
		t.Fatal("the password is echoed back")
	}
	p = b.post("/login", url.Values{"login": {"admin"}, "password": {adminPassword}, "next": {"//evil.example/"}})
	if p.status != http.StatusSeeOther || p.loc != "/" {
		t.Fatalf("sign in with a foreign next: %d %q", p.status, p.loc)
	}
	ck := p.header.Get("Set-Cookie")
	for _, attr := range []string{"ds_session=", "HttpOnly", "SameSite=Lax", "Path=/"} {
		if !strings.Contains(ck, attr) {
			t.Fatalf("cookie %q lacks %s", ck, attr)
		}
	}
	if strings.Contains(ck, "Secure") {
		t.Fatalf("cookie is Secure without an https base URL: %q", ck)
	}
	want(t, b.get("/"), 200, "Dashboard", "admin", `id="tile-data"`)
	if n := e.queryInt("SELECT count(*) FROM sessions"); n != 1 {
		t.Fatalf("%d sessions", n)
	}
	// Signing out needs the CSRF token too, and ends the session in the file.
	want(t, b.post("/logout", url.Values{}), http.StatusForbidden)
	p = b.post("/logout", url.Values{"csrf": {b.csrf()}})
	if p.status != http.StatusSeeOther || p.loc != "/login" {
		t.Fatalf("logout: %d %q", p.status, p.loc)
	}
	if n := e.queryInt("SELECT count(*) FROM sessions"); n != 0 {
		t.Fatalf("%d sessions after logout", n)
	}
	if p := b.get("/"); p.status != http.StatusSeeOther {
		t.Fatalf("dashboard after logout: %d", p.status)
	}
}

func TestSecureCookieWithHTTPSBaseURL(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "https://data.example.org")
	b := e.browser()
	b.origin = "https://data.example.org"
	p := b.post("/login", url.Values{"login": {"admin"}, "password": {adminPassword}})
	if p.status != http.StatusSeeOther || !strings.Contains(p.header.Get("Set-Cookie"), "Secure") {
		t.Fatalf("sign in: %d, cookie %q", p.status, p.header.Get("Set-Cookie"))
	}
	// The request's own host is not the configured origin.
	b2 := e.browser()
	want(t, b2.post("/login", url.Values{"login": {"admin"}, "password": {adminPassword}}), http.StatusForbidden)
}

func TestSignInThrottle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(people)
	b := e.browser()
	for i := 0; i < 5; i++ {
		want(t, b.post("/login", url.Values{"login": {"reader"}, "password": {"nope"}}), http.StatusUnauthorized)
	}
	// Refused even with the right password until the login's delay has passed (the
	// test clock does not move).
	want(t, b.post("/login", url.Values{"login": {"reader"}, "password": {"reader-pass-1"}}), http.StatusTooManyRequests, "Too many")
	// Another login from the same address is not blocked yet.
	b.signIn("writer", "writer-pass-1")
}

func TestDisabledUserSessionEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(people)
	b := e.browser()
	b.signIn("reader", "reader-pass-1")
	want(t, b.get("/data/private/"), 200)
	e.load(`[{classname: _user, keyname: reader, _action: disable}]`)
	if p := b.get("/data/private/"); p.status != http.StatusSeeOther || !strings.HasPrefix(p.loc, "/login") {
		t.Fatalf("disabled user's request: %d %q", p.status, p.loc)
	}
	if n := e.queryInt("SELECT count(*) FROM sessions"); n != 0 {
		t.Fatalf("disabled user's sessions kept: %d", n)
	}
	want(t, b.post("/login", url.Values{"login": {"reader"}, "password": {"reader-pass-1"}}), http.StatusUnauthorized)
}

func TestIdleTimeoutFromConfiguration(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	b := e.browser()
	b.signIn("admin", adminPassword)
	if err := e.db.SetConfig(context.Background(), map[string]string{"CONSOLE_SESSION_IDLE_MINUTES": "1"}); err != nil {
		t.Fatal(err)
	}
	e.exec("UPDATE sessions SET last_seen = last_seen - 120")
	if p := b.get("/"); p.status != http.StatusSeeOther {
		t.Fatalf("idle session still works: %d", p.status)
	}
}

func TestPermissionsOnPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(people)
	nodata := e.browser()
	nodata.signIn("nodata", "nodata-pass-1")
	p := nodata.get("/")
	want(t, p, 200)
	lacks(t, p, `id="tile-data"`, `href="/data/private/"`)
	want(t, nodata.get("/data/private/"), http.StatusForbidden, "permission")
	want(t, nodata.get("/data/private/site/"), http.StatusForbidden)
	want(t, nodata.get("/data/private/site/paris/"), http.StatusForbidden)

	reader := e.browser()
	reader.signIn("reader", "reader-pass-1")
	want(t, reader.get("/"), 200, `id="tile-data"`)
	p = reader.get("/data/private/")
	want(t, p, 200, "site", "rack")
	lacks(t, p, "_apikey") // needs p_apikey_admin
	want(t, reader.get("/data/private/_apikey/"), http.StatusForbidden)
	// Read-only: no actions shown, none reachable.
	p = reader.get("/data/private/site/paris/")
	want(t, p, 200, "Rue A")
	lacks(t, p, `id="edit"`, `id="delete"`, `id="rename"`)
	lacks(t, reader.get("/data/private/site/"), `id="new"`, "export=csv")
	want(t, reader.get("/data/private/site/?do=new"), http.StatusForbidden)
	want(t, reader.get("/data/private/site/paris/?do=edit"), http.StatusForbidden)
	want(t, reader.get("/data/private/site/paris/?do=rename"), http.StatusForbidden)
	want(t, reader.get("/data/private/site/?export=csv"), http.StatusForbidden)
	tok := reader.csrf()
	want(t, reader.post("/data/private/site/paris/?do=delete", url.Values{"csrf": {tok}}), http.StatusForbidden)
	want(t, reader.post("/data/private/site/paris/?do=disable", url.Values{"csrf": {tok}}), http.StatusForbidden)
	if in, err := e.db.Instance(context.Background(), "site", "paris"); err != nil || !in.IsEnabled {
		t.Fatalf("paris after refused writes: %+v %v", in, err)
	}
}

func TestCSRFAndOrigin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(people)
	b := e.browser()
	b.signIn("writer", "writer-pass-1")
	tok := b.csrf()
	form := func(extra ...string) url.Values {
		v := url.Values{"keyname": {"nice"}, "displayname": {"Nice"}, "is_enabled": {"true"}}
		for i := 0; i+1 < len(extra); i += 2 {
			v.Set(extra[i], extra[i+1])
		}
		return v
	}
	want(t, b.post("/data/private/site/?do=new", form()), http.StatusForbidden, "CSRF")
	want(t, b.post("/data/private/site/?do=new", form("csrf", "not-the-token")), http.StatusForbidden)
	p := b.do("POST", "/data/private/site/?do=new", form("csrf", tok), map[string]string{"Origin": "http://evil.example"})
	want(t, p, http.StatusForbidden)
	if _, err := e.db.Instance(context.Background(), "site", "nice"); !store.IsNotFound(err) {
		t.Fatalf("a refused form wrote: %v", err)
	}
	p = b.post("/data/private/site/?do=new", form("csrf", tok))
	if p.status != http.StatusSeeOther {
		t.Fatalf("good form: %d\n%s", p.status, p.body)
	}
}

// TestPostWithoutOriginIsRefused: a console POST carrying neither Origin nor Referer
// is refused with 403 and changes nothing, the sign-in form included, even with the
// session's CSRF token; a same-origin Referer alone still passes.
func TestPostWithoutOriginIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(people)
	b := e.browser()
	b.signIn("writer", "writer-pass-1")
	tok := b.csrf()
	bare := map[string]string{"Origin": "", "Referer": ""}
	const why = "neither an Origin nor a Referer header"

	p := b.do("POST", "/data/private/site/?do=new", url.Values{"csrf": {tok}, "keyname": {"nice"}, "is_enabled": {"true"}}, bare)
	want(t, p, http.StatusForbidden, why)
	if _, err := e.db.Instance(context.Background(), "site", "nice"); !store.IsNotFound(err) {
		t.Fatalf("a POST without origin information wrote: %v", err)
	}
	want(t, b.do("POST", "/data/private/site/paris/?do=disable", url.Values{"csrf": {tok}}, bare), http.StatusForbidden, why)
	if in, err := e.db.Instance(context.Background(), "site", "paris"); err != nil || !in.IsEnabled {
		t.Fatalf("paris after a refused disable: %+v %v", in, err)
	}
	// Sign-out is a state change too: the session stays.
	want(t, b.do("POST", "/logout", url.Values{"csrf": {tok}}, bare), http.StatusForbidden, why)
	want(t, b.get("/"), http.StatusOK)
	// The sign-in form: refused before the password is looked at (no session is made).
	other := e.browser()
	p = other.do("POST", "/login", url.Values{"login": {"writer"}, "password": {"writer-pass-1"}, "next": {"/"}}, bare)
	want(t, p, http.StatusForbidden, why)
	if len(p.header.Values("Set-Cookie")) != 0 {
		t.Fatalf("a refused sign-in set a cookie: %v", p.header.Values("Set-Cookie"))
	}
	// A Referer of this console without Origin passes (older browsers on same-origin forms).
	p = b.do("POST", "/data/private/site/?do=new", url.Values{"csrf": {tok}, "keyname": {"nice"}, "is_enabled": {"true"}},
		map[string]string{"Origin": "", "Referer": e.srv.URL + "/data/private/site/?do=new"})
	if p.status != http.StatusSeeOther {
		t.Fatalf("same-origin Referer without Origin: %d\n%s", p.status, p.body)
	}
}

func TestSessionCookieNeverAuthenticatesAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	b := e.browser()
	b.signIn("admin", adminPassword)
	p := b.get("/api/schemas/")
	if p.status != http.StatusUnauthorized {
		t.Fatalf("/api/ with a session cookie: %d %s", p.status, p.body)
	}
	// And the console never accepts API credentials.
	anon := e.browser()
	p = anon.do("GET", "/", nil, map[string]string{"Authorization": "Basic YWRtaW46YWRtaW4tcGFzcy0x"})
	if p.status != http.StatusSeeOther {
		t.Fatalf("console with Basic credentials: %d", p.status)
	}
}

func TestBrowseAndEdit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(people)
	b := e.browser()
	b.signIn("writer", "writer-pass-1")
	tok := b.csrf()

	want(t, b.get("/data/private/"), 200, `href="/data/private/rack/"`, "Racks")
	p := b.get("/data/private/rack/")
	want(t, p, 200, "2 found", `href="/data/private/rack/r1/"`, `href="/data/private/site/paris/"`, "cold, spare")
	p = b.get("/data/private/rack/?search=cold")
	want(t, p, 200, "1 found", "r2")
	lacks(t, p, `href="/data/private/rack/r1/"`)
	want(t, b.get("/data/private/rack/?size=1&page=2"), 200, "page 2 of 2", "r2")

	// Sorting by a column, on the server: units descending puts r2 (48) before r1 (42).
	p = b.get("/data/private/rack/?sort=-units")
	want(t, p, 200, `class="desc"`)
	if i1, i2 := strings.Index(p.body, "/data/private/rack/r1/"), strings.Index(p.body, "/data/private/rack/r2/"); i2 < 0 || i1 < i2 {
		t.Fatalf("sort=-units: r1 at %d, r2 at %d", i1, i2)
	}
	p = b.get("/data/private/rack/?sort=units&size=1")
	want(t, p, 200, "r1")
	lacks(t, p, `href="/data/private/rack/r2/"`)
	want(t, b.get("/data/private/rack/?sort=nosuchfield"), http.StatusBadRequest, "cannot sort")

	// Detail: references as links, referenced-by, revisions.
	want(t, b.get("/data/private/site/paris/"), 200, `href="/data/private/rack/r1/"`, "Referenced by", "create")

	// Create with an invalid value: the error is next to the field, the input kept.
	form := url.Values{"csrf": {tok}, "keyname": {"r3"}, "displayname": {"Rack 3"}, "is_enabled": {"false", "true"},
		"f_site": {"paris"}, "f_units": {"99"}, "f_mgmt": {"10.0.0.300"}, "f_tags": {"hot", ""}}
	p = b.post("/data/private/rack/?do=new", form)
	want(t, p, http.StatusBadRequest, `id="error-`, `value="Rack 3"`, `value="hot"`)
	if _, err := e.db.Instance(context.Background(), "rack", "r3"); !store.IsNotFound(err) {
		t.Fatalf("invalid create wrote: %v", err)
	}
	form.Set("f_units", "10")
	form.Set("f_mgmt", "10.0.0.3")
	p = b.post("/data/private/rack/?do=new", form)
	if p.status != http.StatusSeeOther || p.loc != "/data/private/rack/r3/?done=created" {
		t.Fatalf("create: %d %q\n%s", p.status, p.loc, p.body)
	}
	want(t, b.get(p.loc), 200, "Created.", "10.0.0.3", "user:writer")
	if in, _ := e.db.Instance(context.Background(), "rack", "r3"); !in.IsEnabled || in.Displayname != "Rack 3" {
		t.Fatalf("created r3: %+v", in)
	}

	// Edit.
	want(t, b.get("/data/private/rack/r3/?do=edit"), 200, `value="10.0.0.3"`, `value="hot"`)
	form.Set("f_units", "12")
	form.Del("keyname")
	p = b.post("/data/private/rack/r3/?do=edit", form)
	if p.status != http.StatusSeeOther {
		t.Fatalf("edit: %d\n%s", p.status, p.body)
	}
	if in, _ := e.db.Instance(context.Background(), "rack", "r3"); in.Data["units"] != int64(12) {
		t.Fatalf("units after edit: %v", in.Data["units"])
	}
	want(t, b.get("/data/private/rack/r3/"), 200, "<del>10</del> → <ins>12</ins>")

	// Disable, enable.
	b.post("/data/private/rack/r3/?do=disable", url.Values{"csrf": {tok}})
	if in, _ := e.db.Instance(context.Background(), "rack", "r3"); in.IsEnabled {
		t.Fatal("still enabled")
	}
	b.post("/data/private/rack/r3/?do=enable", url.Values{"csrf": {tok}})

	// Rename with references following.
	want(t, b.get("/data/private/site/paris/?do=rename"), 200, "rack r1")
	p = b.post("/data/private/site/paris/?do=rename", url.Values{"csrf": {tok}, "new_keyname": {"lyon"}})
	want(t, p, http.StatusConflict, "already exists")
	p = b.post("/data/private/site/paris/?do=rename", url.Values{"csrf": {tok}, "new_keyname": {"paris-1"}})
	want(t, p, 200, `id="rename-report"`, "2 instance(s) referring to it followed")
	want(t, b.get("/data/private/site/paris-1/"), 200, "Referenced by", `href="/data/private/rack/r1/"`)
	for _, k := range []string{"r1", "r3"} {
		if in, _ := e.db.Instance(context.Background(), "rack", k); in.Data["site"] != "paris-1" {
			t.Fatalf("%s site after rename: %v", k, in.Data["site"])
		}
	}

	// Export of the current view.
	p = b.get("/data/private/rack/?export=csv&search=cold")
	want(t, p, 200, "keyname;displayname;site;units;mgmt;tags;is_enabled", "r2;;lyon;48;;cold, spare;true")
	lacks(t, p, "r1")
	p = b.get("/data/private/rack/?export=json")
	var docs []map[string]any
	if err := json.Unmarshal([]byte(p.body), &docs); err != nil || len(docs) != 3 || docs[0]["classname"] != "rack" {
		t.Fatalf("JSON export: %v %s", err, p.body)
	}
	want(t, b.get("/data/private/rack/?export=yaml"), 200, "- classname: rack\n")

	// Recent revisions, only of readable classes.
	e.load(`[{classname: _apikey, keyname: hidden-key, secret: s3cret-value-1}]`)
	p = b.get("/data/private/revision/")
	want(t, p, 200, `href="/data/private/site/paris-1/"`, "user:writer")
	lacks(t, p, "_apikey", "hidden-key")
	want(t, b.get("/data/private/ipam/"), 200, "ipam_subnet")

	// Type-ahead lookup.
	want(t, b.get("/data/private/site/?do=lookup&q=ly"), 200, `"keyname":"lyon"`)

	// Delete asks first, then deletes.
	want(t, b.get("/data/private/rack/r3/?do=delete"), 200, `id="confirm-delete"`)
	p = b.post("/data/private/rack/r3/?do=delete", url.Values{"csrf": {tok}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("delete: %d\n%s", p.status, p.body)
	}
	if _, err := e.db.Instance(context.Background(), "rack", "r3"); !store.IsNotFound(err) {
		t.Fatalf("r3 after delete: %v", err)
	}
	want(t, b.get("/data/private/rack/r3/"), http.StatusNotFound)
}

func TestUsersPasswordAndEffectivePermissions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(people)
	admin := e.browser()
	admin.signIn("admin", adminPassword)
	tok := admin.csrf()
	p := admin.get("/data/private/_user/writer/")
	want(t, p, 200, "Effective permissions", "p_keyname_rename", `href="/data/private/_role/writers/"`, `href="/data/private/_group/staff/"`)
	lacks(t, p, "$argon2id") // the hash never shows
	p = admin.post("/data/private/_user/writer/?do=password", url.Values{"csrf": {tok}, "password": {"new-pass-1"}, "password2": {"new-pass-2"}})
	want(t, p, http.StatusBadRequest, "differ")
	p = admin.post("/data/private/_user/writer/?do=password", url.Values{"csrf": {tok}, "password": {"new-pass-1"}, "password2": {"new-pass-1"}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("set password: %d\n%s", p.status, p.body)
	}
	w := e.browser()
	want(t, w.post("/login", url.Values{"login": {"writer"}, "password": {"writer-pass-1"}}), http.StatusUnauthorized)
	w.signIn("writer", "new-pass-1")
	// writer lacks p_user_import: users are readable only with p_data_read, never writable.
	want(t, w.get("/data/private/_user/reader/?do=password"), http.StatusForbidden)
}
