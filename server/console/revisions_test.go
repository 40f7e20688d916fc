package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

const revisionData = `
- {classname: _user, keyname: reader, password: reader-pass-1}
- {classname: _user, keyname: writer, password: writer-pass-1}
- {classname: _role, keyname: readers, permissions: [p_data_access, p_data_read], users: [reader]}
- {classname: _role, keyname: writers, permissions: [p_data_access, p_data_read, p_data_create, p_data_update, p_data_delete], users: [writer]}
- {classname: _schema, keyname: site, location: {dataformat: string}}
- {classname: _schema, keyname: rack, units: {dataformat: int, dataformat_ext: gte_1 lte_60}, tags: {dataformat: string, cardinal_max: 0}}
- {classname: _schema, keyname: vault, p_read: p_vault_read, code: {dataformat: string}}
- {classname: site, keyname: paris, location: "Rue A"}
- {classname: rack, keyname: r1, units: 42}
- {classname: rack, keyname: r2, units: 48, tags: [cold, spare]}
- {classname: vault, keyname: v1, code: hidden-code-1}
`

// loadAs loads doc with every permission, its revisions naming author.
func (e *env) loadAs(author, doc string) {
	e.t.Helper()
	testkit.MustLoad(e.t, e.db, doc, store.LoadOptions{Author: author})
}

// lastRevision is the id of the newest revision of an object.
func (e *env) lastRevision(cls, key string) int {
	e.t.Helper()
	return e.queryInt("SELECT max(id) FROM revisions WHERE classname = ? AND keyname = ?", cls, key)
}

var revRowRE = regexp.MustCompile(`<tr id="rev-(\d+)">`)

// revRows are the revision ids a list page shows, in order.
func revRows(p page) []string {
	var out []string
	for _, m := range revRowRE.FindAllStringSubmatch(p.body, -1) {
		out = append(out, m[1])
	}
	return out
}

func revURL(id int) string { return fmt.Sprintf("/data/private/revision/%d/", id) }

func TestRevisionsPageFiltersAndReadability(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(revisionData)
	e.loadAs("user:alice", `[{classname: site, keyname: paris, location: "Rue B"}, {classname: rack, keyname: r1, units: 40}]`)
	e.loadAs("user:bob", `[{classname: site, keyname: lyon}, {classname: rack, keyname: r1, _action: delete}, {classname: vault, keyname: v1, code: hidden-code-2}]`)
	// Every revision so far on 2026-01-10, lyon's create on 2026-01-12.
	e.exec("UPDATE revisions SET created_at = '2026-01-10T09:00:00Z'")
	e.exec("UPDATE revisions SET created_at = '2026-01-12T09:00:00Z' WHERE keyname = 'lyon'")
	id := func(cls, key, action string) string {
		return fmt.Sprint(e.queryInt("SELECT max(id) FROM revisions WHERE classname = ? AND keyname = ? AND action = ?", cls, key, action))
	}
	lyon, r1del, r1upd, parisUpd := id("site", "lyon", "create"), id("rack", "r1", "delete"), id("rack", "r1", "update"), id("site", "paris", "update")
	vaultUpd := id("vault", "v1", "update")

	rd := e.browser()
	rd.signIn("reader", "reader-pass-1")
	p := rd.get("/data/private/revision/")
	want(t, p, 200, `id="revision-filter"`, `href="/data/private/revision/`+lyon+`/"`)
	lacks(t, p, "vault", "hidden-code", `rev-`+vaultUpd+`"`, ">_schema ", "reader-pass", "********")
	if rows := revRows(p); rows[0] != r1del || rows[1] != lyon {
		t.Fatalf("newest first: %v", rows)
	}

	for _, c := range []struct {
		query string
		want  []string
	}{
		{"class=rack&author=user:alice", []string{r1upd}},
		{"class=site&keyname=paris&action=update", []string{parisUpd}},
		{"author=user:bob", []string{r1del, lyon}}, // not bob's vault change: unreadable
		{"action=delete", []string{r1del}},
		{"from=2026-01-11&to=2026-01-12", []string{lyon}},
		{"from=2026-01-12", []string{lyon}},
		{"class=vault", nil},
		{"author=user:nobody", nil},
	} {
		p := rd.get("/data/private/revision/?" + c.query)
		want(t, p, 200)
		if got := revRows(p); strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s: rows %v, want %v", c.query, got, c.want)
		}
	}
	p = rd.get("/data/private/revision/?from=2026-13-01")
	want(t, p, http.StatusBadRequest, `id="filter-error"`, "from: &#34;2026-13-01&#34; is not a date")
	want(t, rd.get("/data/private/revision/?from=2026-02-01&to=2026-01-01"), http.StatusBadRequest, "is before from")
	want(t, rd.get("/data/private/revision/?action=explode"), http.StatusBadRequest, "is not one of")
	want(t, rd.get("/data/private/revision/?before=x"), http.StatusBadRequest, "not a revision number")

	// A revision of a class the user may not read is not there for them.
	want(t, rd.get(revURL(atoi(t, vaultUpd))), http.StatusNotFound)
	p = rd.get(revURL(atoi(t, parisUpd)))
	want(t, p, 200, `id="diff"`, "Rue A", "Rue B", "user:alice")
	lacks(t, p, `id="restore"`) // reader may not update sites
	tok := rd.csrf()
	want(t, rd.post(revURL(atoi(t, parisUpd)), url.Values{"csrf": {tok}, "version": {"before"}}), http.StatusForbidden)
	if in, _ := e.db.Instance(context.Background(), "site", "paris"); in.Data["location"] != "Rue B" {
		t.Fatalf("restored without update permission: %v", in.Data)
	}

	// Without p_data_access the tool is closed.
	e.load(`[{classname: _user, keyname: nodata, password: nodata-pass-1}]`)
	nd := e.browser()
	nd.signIn("nodata", "nodata-pass-1")
	want(t, nd.get("/data/private/revision/"), http.StatusForbidden)
	want(t, nd.get(revURL(atoi(t, parisUpd))), http.StatusForbidden)
}

func TestRevisionsPaging(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(revisionData)
	var doc strings.Builder
	for i := 0; i < 120; i++ {
		fmt.Fprintf(&doc, "- {classname: site, keyname: s%03d}\n", i)
	}
	e.load(doc.String())
	rd := e.browser()
	rd.signIn("reader", "reader-pass-1")
	seen := map[string]bool{}
	path := "/data/private/revision/?class=site"
	var sizes []int
	for i := 0; path != "" && i < 10; i++ {
		p := rd.get(path)
		want(t, p, 200)
		rows := revRows(p)
		sizes = append(sizes, len(rows))
		for _, r := range rows {
			if seen[r] {
				t.Fatalf("revision %s on two pages", r)
			}
			seen[r] = true
		}
		path = ""
		if m := regexp.MustCompile(`href="([^"]+)" rel="next"`).FindStringSubmatch(p.body); m != nil {
			path = strings.ReplaceAll(m[1], "&amp;", "&")
			if !strings.Contains(path, "class=site") {
				t.Fatalf("the next page lost the filter: %s", path)
			}
		}
	}
	// 121 site revisions (paris and the 120): 50, 50, 21.
	if fmt.Sprint(sizes) != "[50 50 21]" || len(seen) != 121 {
		t.Fatalf("pages %v, %d revisions", sizes, len(seen))
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRevisionRestore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, "")
	e.load(revisionData)
	w := e.browser()
	w.signIn("writer", "writer-pass-1")
	tok := w.csrf()
	instance := func(cls, key string) *store.Instance {
		t.Helper()
		in, err := e.db.Instance(ctx, cls, key)
		if err != nil {
			t.Fatal(err)
		}
		return in
	}

	// Edit in the console, then restore the version before the edit.
	p := w.post("/data/private/rack/r1/?do=edit", url.Values{"csrf": {tok}, "displayname": {"Rack one"}, "is_enabled": {"false", "true"}, "f_units": {"43"}, "f_tags": {"new"}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("edit: %d\n%s", p.status, p.body)
	}
	edit := e.lastRevision("rack", "r1")
	p = w.get(revURL(edit))
	want(t, p, 200, `id="diff-units"`, "<del>42</del>", "<ins>43</ins>", "<ins>Rack one</ins>", `id="restore-before"`, `id="restore-after"`)
	// Without the CSRF token nothing happens.
	want(t, w.post(revURL(edit), url.Values{"version": {"before"}}), http.StatusForbidden, "CSRF")
	if e.lastRevision("rack", "r1") != edit {
		t.Fatal("a post without the token wrote")
	}
	p = w.post(revURL(edit), url.Values{"csrf": {tok}, "version": {"before"}})
	if p.status != http.StatusSeeOther || p.loc != "/data/private/rack/r1/?done=restored" {
		t.Fatalf("restore: %d %s\n%s", p.status, p.loc, p.body)
	}
	in := instance("rack", "r1")
	if in.Data["units"] != int64(42) || in.Displayname != "" || in.Data["tags"] != nil || !in.IsEnabled {
		t.Fatalf("restored r1: %+v", in)
	}
	restored := e.lastRevision("rack", "r1")
	var author, action string
	if err := e.db.Reader().QueryRowContext(context.Background(), "SELECT author, action FROM revisions WHERE id = ?", restored).Scan(&author, &action); err != nil || restored <= edit || author != "user:writer" || action != "update" {
		t.Fatalf("restore revision %d (after %d): %s %s %v", restored, edit, author, action, err)
	}
	// The detail page links each of its revisions to its diff.
	want(t, w.get("/data/private/rack/r1/?done=restored"), 200, "Restored", `href="`+revURL(restored)+`"`, `href="`+revURL(edit)+`"`)
	// Restoring the same version again changes nothing and writes no revision.
	p = w.post(revURL(edit), url.Values{"csrf": {tok}, "version": {"before"}})
	if p.status != http.StatusSeeOther || !strings.HasSuffix(p.loc, "?done=unchanged") || e.lastRevision("rack", "r1") != restored {
		t.Fatalf("second restore: %d %s", p.status, p.loc)
	}
	// And the version the edit wrote comes back too.
	p = w.post(revURL(edit), url.Values{"csrf": {tok}, "version": {"after"}})
	if in := instance("rack", "r1"); p.status != http.StatusSeeOther || in.Data["units"] != int64(43) || in.Displayname != "Rack one" {
		t.Fatalf("restore after: %d %+v", p.status, in)
	}
	want(t, w.post(revURL(edit), url.Values{"csrf": {tok}, "version": {"sideways"}}), http.StatusConflict, "choose the version")

	// The instance changed shape: a field of that version no longer exists.
	p = w.post("/data/private/rack/r2/?do=edit", url.Values{"csrf": {tok}, "is_enabled": {"true"}, "f_units": {"47"}, "f_tags": {"cold"}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("edit r2: %d\n%s", p.status, p.body)
	}
	r2edit := e.lastRevision("rack", "r2")
	e.load(`{classname: _schema, keyname: rack, tags: {_action: delete}}`)
	p = w.get(revURL(r2edit))
	want(t, p, 200, `id="refused-before"`, "field tags of that version no longer exists in schema rack")
	lacks(t, p, `id="restore-before"`)
	p = w.post(revURL(r2edit), url.Values{"csrf": {tok}, "version": {"before"}})
	want(t, p, http.StatusConflict, `id="restore-error"`, "Not restored: the instance changed shape: field tags")
	if in := instance("rack", "r2"); in.Data["units"] != int64(47) || e.lastRevision("rack", "r2") != r2edit {
		t.Fatalf("a refused restore wrote: %+v", in)
	}

	// Deleted, and deleted then created again: refused.
	e.loadAs("user:writer", `[{classname: site, keyname: gone, location: A}, {classname: site, keyname: gone, location: B}]`)
	goneUpd := e.lastRevision("site", "gone")
	e.loadAs("user:writer", `[{classname: site, keyname: gone, _action: delete}]`)
	want(t, w.post(revURL(goneUpd), url.Values{"csrf": {tok}, "version": {"before"}}), http.StatusConflict, "site gone no longer exists (deleted, or renamed")
	e.loadAs("user:writer", `[{classname: site, keyname: gone, location: C}]`)
	want(t, w.post(revURL(goneUpd), url.Values{"csrf": {tok}, "version": {"before"}}), http.StatusConflict, "was deleted and created again since this revision")
	if in := instance("site", "gone"); in.Data["location"] != "C" {
		t.Fatalf("the new gone changed: %+v", in)
	}

	// A value the store refuses is refused with its reason: units bounds tightened.
	e.load(`{classname: _schema, keyname: rack, units: {dataformat: int, dataformat_ext: gte_1 lte_45}}`)
	p = w.post(revURL(r2edit), url.Values{"csrf": {tok}, "version": {"after"}})
	want(t, p, http.StatusConflict, "field tags of that version no longer exists") // r2edit's after still holds tags
	e.loadAs("user:writer", `[{classname: rack, keyname: r3, units: 44}, {classname: rack, keyname: r3, units: 40}]`)
	r3upd := e.lastRevision("rack", "r3")
	e.exec(`UPDATE revisions SET before = replace(before, '"units":44', '"units":50') WHERE id = ?`, r3upd)
	want(t, w.post(revURL(r3upd), url.Values{"csrf": {tok}, "version": {"before"}}), http.StatusBadRequest, "The store refused it: field units")

	// Schemas' and permissions' history is shown, never restored from here.
	adm := e.browser()
	adm.signIn("admin", adminPassword)
	atok := adm.csrf()
	sch := e.lastRevision("_schema", "rack")
	want(t, adm.get(revURL(sch)), 200, `id="refused-before"`, "restored by loading their definition", `id="diff-units"`, "lte_45")
	want(t, adm.post(revURL(sch), url.Values{"csrf": {atok}, "version": {"before"}}), http.StatusConflict)

	// A class whose schema is gone: only callers holding every permission see its
	// history, and nothing is restored.
	e.load(`[{classname: _schema, keyname: tmp, n: {dataformat: string}}, {classname: tmp, keyname: t1, n: a}, {classname: tmp, keyname: t1, n: b}]`)
	tmpUpd := e.lastRevision("tmp", "t1")
	e.load(`[{classname: tmp, keyname: t1, _action: delete}, {classname: _schema, keyname: tmp, _action: delete}]`)
	want(t, adm.get(revURL(tmpUpd)), 200, "the schema tmp no longer exists")
	want(t, adm.post(revURL(tmpUpd), url.Values{"csrf": {atok}, "version": {"before"}}), http.StatusConflict, "the schema tmp no longer exists")
	want(t, w.get(revURL(tmpUpd)), http.StatusNotFound)
	want(t, adm.get("/data/private/revision/?class=tmp"), 200, fmt.Sprintf(`id="rev-%d"`, tmpUpd))
	if rows := revRows(w.get("/data/private/revision/?class=tmp")); len(rows) != 0 {
		t.Fatalf("writer sees the history of a deleted schema: %v", rows)
	}
}

// Secrets: never shown in a diff, never taken from history; restoring keeps the
// current one.
func TestRevisionRestoreKeepsSecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(revisionData)
	adm := e.browser()
	adm.signIn("admin", adminPassword)
	tok := adm.csrf()
	// One edit changes the display name and the password, another only the password.
	p := adm.post("/data/private/_user/reader/?do=edit", url.Values{"csrf": {tok}, "displayname": {"Rita Reader"}, "is_enabled": {"true"}, "f_password": {"reader-pass-2"}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("edit reader: %d\n%s", p.status, p.body)
	}
	both := e.lastRevision("_user", "reader")
	p = adm.post("/data/private/_user/reader/?do=password", url.Values{"csrf": {tok}, "password": {"reader-pass-3"}, "password2": {"reader-pass-3"}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("password: %d\n%s", p.status, p.body)
	}
	only := e.lastRevision("_user", "reader")
	p = adm.get(revURL(only))
	want(t, p, 200, `id="diff-password"`, "changed (not shown)")
	lacks(t, p, "********", "argon2", "reader-pass")
	p = adm.get(revURL(both))
	want(t, p, 200, "<ins>Rita Reader</ins>", `id="diff-password"`)
	lacks(t, p, "********", "argon2", "reader-pass")
	want(t, adm.get("/data/private/revision/?class=_user"), 200)
	lacks(t, adm.get("/data/private/revision/?class=_user"), "argon2")

	p = adm.post(revURL(both), url.Values{"csrf": {tok}, "version": {"before"}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("restore reader: %d\n%s", p.status, p.body)
	}
	in, _ := e.db.Instance(context.Background(), "_user", "reader")
	if in.Displayname != "" {
		t.Fatalf("display name not restored: %q", in.Displayname)
	}
	// The password is the current one, not an old one nor the mask.
	r := e.browser()
	want(t, r.post("/login", url.Values{"login": {"reader"}, "password": {"reader-pass-1"}}), http.StatusUnauthorized)
	want(t, r.post("/login", url.Values{"login": {"reader"}, "password": {"********"}}), http.StatusUnauthorized)
	r.signIn("reader", "reader-pass-3")
}

// The history on an instance's page shows numbers as they were written: a million is
// 1000000, not 1e+06, in both the whole and the delta form.
func TestDetailHistoryNumbersAsWritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(revisionData + "- {classname: _schema, keyname: meter, reading: {dataformat: int}}\n")
	e.loadAs("user:writer", `[{classname: meter, keyname: m1, reading: 1000000}]`)
	e.loadAs("user:writer", `[{classname: meter, keyname: m1, reading: 2500000}]`)
	w := e.browser()
	w.signIn("writer", "writer-pass-1")
	p := w.get("/data/private/meter/m1/")
	if p.status != 200 || !strings.Contains(p.body, "1000000") || !strings.Contains(p.body, "2500000") || strings.Contains(p.body, "e+06") {
		t.Fatalf("the history does not show 1000000 → 2500000 as written (%d):\n%s", p.status, p.body)
	}
}
