package console_test

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store/codec"
)

// garbage are query values that are wrong in many ways at once.
var garbage = []string{"", "%", "'\"<x>", "-1", "0", "99999999999999999999", "9223372036854775807",
	"10.0.0.0/0", "0.0.0.0/0", "::/0", "10.1.2.0/24/", "255.255.255.255", "1.2.3", "\x00", strings.Repeat("a", 5000),
	strings.Repeat("1.2.3.4,", 600), "../../etc", "//evil.example/", "true", "json", "csv"}

// No tool page fails (500) or panics on garbage in its query or form, for an
// administrator and for a modest user.
func TestToolsGarbageInput(t *testing.T) {
	t.Parallel()
	re := newRunEnv(t, 0, nil) // the runner stays stopped: tasks stay queued
	e := re.env
	e.load(ipamPeople)
	e.load(ipamNet)
	e.load(toolPeople)
	users := map[string]string{"admin": adminPassword, "importer": "importer-pass-1", "netops": "netops-pass-1"}
	gets := []string{
		"/data/private/pipeline/?x=%s", "/data/private/pipeline/%s/", "/data/private/pipeline/upper_tag/?do=%s",
		"/data/private/task/?status=%s", "/data/private/task/%s/", "/data/private/task/%s/progress/",
		"/data/private/revision/?class=%[1]s&keyname=%[1]s&author=%[1]s&action=%[1]s&from=%[1]s&to=%[1]s&before=%[1]s",
		"/data/private/revision/%s/", "/data/private/revision/?from=2020-01-01&to=%s",
		"/data/private/ipam/?within=%[1]s&page=%[1]s&size=%[1]s", "/data/private/ipam/%s/",
		"/data/private/ipam/10.1.2.0/24/?from=%[1]s&size=%[1]s", "/data/private/ipam/find/?ip=%s",
		"/data/private/ipam/vlan/?page=%[1]s&size=%[1]s", "/data/private/code_editor/?schema=%[1]s&keys=%[1]s&format=%[1]s",
		"/data/private/code_editor/?schema=rack&keys=%s", "/data/private/code_editor/?schema=ipam_ip&keys=%s",
		"/data/private/import/?%s", "/data/private/configuration/?done=%s",
	}
	posts := []struct {
		path   string
		fields []string
	}{
		{"/data/private/pipeline/upper_tag/?do=run", []string{"schema", "dryrun"}},
		{"/data/private/pipeline/upper_tag/?do=edit", []string{"content"}},
		{"/data/private/task/%s/cancel/", nil},
		{"/data/private/revision/1/", []string{"version"}},
		{"/data/private/import/", []string{"format", "text", "schema", "keyfield", "delimiter", "encoding", "pipeline", "do"}},
		{"/data/private/code_editor/", []string{"doc", "do"}},
		{"/data/private/configuration/", []string{"v_GLOBAL_APPNAME", "v_DATA_MAX_SIZE", "v_CSV_DELIMITER"}},
	}
	for login, pw := range users {
		b := e.browser()
		b.signIn(login, pw)
		csrf := b.csrf()
		for _, g := range garbage {
			esc := url.QueryEscape(g)
			for _, f := range gets {
				path := strings.ReplaceAll(f, "%[1]s", esc)
				path = strings.ReplaceAll(path, "%s", esc)
				if p := b.get(path); p.status >= 500 {
					t.Fatalf("%s GET %s: %d\n%.2000s", login, path, p.status, p.body)
				}
			}
			for _, ps := range posts {
				v := url.Values{"csrf": {csrf}}
				for _, f := range ps.fields {
					v.Set(f, g)
				}
				path := strings.ReplaceAll(ps.path, "%s", esc)
				if p := b.post(path, v); p.status >= 500 {
					t.Fatalf("%s POST %s %v: %d\n%.2000s", login, path, v, p.status, p.body)
				}
			}
		}
	}
}

// A deleted user's tasks are not inherited by the user created next: tasks are owned
// by user id, so ids must not be reused; the new user neither lists, opens nor
// cancels them.
func TestDeletedUserTasksNotInherited(t *testing.T) {
	t.Parallel()
	re := newRunEnv(t, 0, nil) // the runner stays stopped: tasks stay queued
	e := re.env
	e.load(`
- {classname: _role, keyname: runners, permissions: [p_data_access, p_data_read, p_data_update, p_pipeline_run]}
- {classname: _schema, keyname: host, note: {dataformat: string}}
- {classname: _pipeline, keyname: tag, content: "- field_set: ['', note, checked]"}
- {classname: host, keyname: h1}
- {classname: _user, keyname: eve, password: eve-pass-12}
- {classname: _role, keyname: runners, users: [eve]}
`)
	eve := e.browser()
	eve.signIn("eve", "eve-pass-12")
	p := eve.post("/data/private/pipeline/tag/?do=run", url.Values{"csrf": {eve.csrf()}, "schema": {"host"}})
	if p.status != 303 || !strings.HasPrefix(p.loc, "/data/private/task/") {
		t.Fatalf("run: %d %q\n%s", p.status, p.loc, p.body)
	}
	taskPage := p.loc
	evesID := e.queryInt("SELECT id FROM instances WHERE classname = '_user' AND keyname = 'eve'")
	e.load(`- {classname: _user, keyname: eve, _action: delete}`)
	e.load(`- {classname: _user, keyname: frank, password: frank-pass-12}`)
	e.load(`- {classname: _role, keyname: runners, users: [frank]}`)
	if id := e.queryInt("SELECT id FROM instances WHERE classname = '_user' AND keyname = 'frank'"); id == evesID {
		t.Fatalf("frank got the deleted eve's id %d", id)
	}
	frank := e.browser()
	frank.signIn("frank", "frank-pass-12")
	lacks(t, frank.get("/data/private/task/"), taskPage)
	want(t, frank.get(taskPage), 404)
	want(t, frank.get(taskPage+"progress/"), 404)
	want(t, frank.post(taskPage+"cancel/", url.Values{"csrf": {frank.csrf()}}), 404)
}

// A pipeline's display name is instance data of `_pipeline`, as its description: the
// pipelines list and a pipeline's page show it only to users who may read `_pipeline`
// (GET /api/pipelines/ gives id, keyname and run_permission).
func TestPipelineDisplaynameNeedsRead(t *testing.T) {
	t.Parallel()
	re := newRunEnv(t, 0, nil)
	e := re.env
	e.load(pipelinePeople)
	e.load(`
- {classname: _user, keyname: blind, password: blind-pass-12}
- {classname: _role, keyname: blind_runners, permissions: [p_data_access, p_pipeline_run], users: [blind]}
`)
	b := e.browser()
	b.signIn("blind", "blind-pass-12")
	p := b.get("/data/private/pipeline/")
	want(t, p, 200, "tag")
	lacks(t, p, "Tag hosts", "Marks every host")
	p = b.get("/data/private/pipeline/tag/")
	want(t, p, 200, `id="no-read"`)
	lacks(t, p, "Tag hosts", "Marks every host")
	// A reader sees both.
	v := e.browser()
	v.signIn("viewer", "viewer-pass-1")
	want(t, v.get("/data/private/pipeline/"), 200, "Tag hosts", "Marks every host")
	want(t, v.get("/data/private/pipeline/tag/"), 200, "Tag hosts", "Marks every host")
}

// Every tool's POST is refused without the session's CSRF token or from another
// origin, and changes nothing.
func TestToolPostsNeedCSRFAndOrigin(t *testing.T) {
	t.Parallel()
	re := newRunEnv(t, 0, nil)
	e := re.env
	e.load(pipelinePeople)
	a := e.browser()
	a.signIn("admin", adminPassword)
	csrf := a.csrf()
	posts := map[string]url.Values{
		"/data/private/pipeline/tag/?do=run":  {"schema": {"host"}},
		"/data/private/pipeline/tag/?do=edit": {"content": {"[]"}},
		"/data/private/import/":               {"format": {"yaml"}, "text": {"- {classname: host, keyname: h9}"}, "do": {"import"}},
		"/data/private/code_editor/":          {"do": {"save"}, "doc": {"- {classname: host, keyname: h8}"}},
		"/data/private/configuration/":        {"v_GLOBAL_APPNAME": {"pwned"}},
		"/data/private/revision/1/":           {"version": {"before"}},
	}
	revs := e.queryInt("SELECT count(*) FROM revisions")
	for path, form := range posts {
		if p := a.post(path, form); p.status != 403 {
			t.Fatalf("POST %s without a token: %d", path, p.status)
		}
		f := url.Values{"csrf": {csrf}}
		for k, v := range form {
			f[k] = v
		}
		if p := a.do("POST", path, f, map[string]string{"Origin": "http://evil.example"}); p.status != 403 {
			t.Fatalf("POST %s from another origin: %d", path, p.status)
		}
		if p := a.do("POST", path, f, map[string]string{"Origin": "", "Referer": "http://evil.example/x"}); p.status != 403 {
			t.Fatalf("POST %s with a foreign Referer: %d", path, p.status)
		}
	}
	if n := e.queryInt("SELECT count(*) FROM revisions"); n != revs {
		t.Fatalf("refused posts wrote %d revisions", n-revs)
	}
	if n := e.queryInt("SELECT count(*) FROM tasks"); n != 0 {
		t.Fatalf("refused posts queued %d tasks", n)
	}
	// The same form with the token from this origin goes through.
	want(t, a.post("/data/private/configuration/", url.Values{"csrf": {csrf}, "v_GLOBAL_APPNAME": {"renamed"}}), 303)
}

// A CSV costs memory per cell, not per byte: one cell is a delimiter, but an entry's
// field. The import tool refuses a CSV of more than codec.CSVMaxCells cells (rows ×
// columns) with 413 naming the bound, before loading anything (a 32 MiB CSV of empty
// cells took over 4 GiB).
func TestImportCSVCellsBounded(t *testing.T) {
	t.Parallel()
	e := toolEnv(t)
	b, csrf := signedIn(e, "importer")
	p := b.postMultipart("/data/private/import/", map[string]string{"csrf": csrf, "format": "csv", "schema": "site", "do": "import"}, "wide.csv", testkit.WideCSV())
	want(t, p, http.StatusRequestEntityTooLarge, fmt.Sprintf("more than %d cells", codec.CSVMaxCells))
	if n := e.queryInt("SELECT count(*) FROM instances WHERE classname = 'site' AND keyname LIKE 'wide%'"); n != 0 {
		t.Fatalf("%d instances written by a refused import", n)
	}
	// A CSV within the bound imports.
	p = b.postMultipart("/data/private/import/", map[string]string{"csrf": csrf, "format": "csv", "schema": "site", "do": "import"},
		"small.csv", "keyname;location\nnarrow1;Rue B\n")
	want(t, p, 200)
	if n := e.queryInt("SELECT count(*) FROM instances WHERE classname = 'site' AND keyname = 'narrow1'"); n != 1 {
		t.Fatal("a small CSV did not import")
	}
}

// Markup in stored values (keynames, display names, descriptions, rule arguments,
// subnet fields) is shown as text on every tool page, never as markup.
func TestToolPagesEscapeStoredMarkup(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t, 0, nil).env
	e.load(ipamPeople)
	e.load(ipamNet)
	e.load(`
- {classname: _schema, keyname: host, note: {dataformat: string}}
- {classname: host, keyname: '"><b>k1</b>', displayname: '<script>x1</script>', note: '<img src=x onerror=x2>'}
- {classname: _pipeline, keyname: mark, displayname: '<script>x3</script>', description: '<b>x4</b>', content: "- field_set: ['', note, '<i>x5</i>']"}
- {classname: ipam_subnet, keyname: 10.9.0.0/24, displayname: '<b>x6</b>', description: '<script>x7</script>', site: '<b>x8</b>'}
`)
	rev := e.queryInt("SELECT max(id) FROM revisions WHERE classname = 'host'")
	a := e.browser()
	a.signIn("admin", adminPassword)
	for _, path := range []string{"/data/private/pipeline/", "/data/private/pipeline/mark/",
		"/data/private/revision/", "/data/private/revision/?class=host", fmt.Sprintf("/data/private/revision/%d/", rev),
		"/data/private/code_editor/?schema=host", "/data/private/ipam/", "/data/private/ipam/10.9.0.0/24/",
		"/data/private/ipam/find/?ip=10.9.0.1", "/data/private/revision/?keyname=" + url.QueryEscape("<b>k1</b>")} {
		p := a.get(path)
		if p.status != 200 {
			t.Fatalf("GET %s: %d\n%.1500s", path, p.status, p.body)
		}
		if strings.Contains(path, "/mark/") {
			want(t, p, 200, "&lt;script&gt;x3", "&lt;b&gt;x4&lt;/b&gt;", "x5") // shown, as text
		}
		lacks(t, p, "<b>k1</b>", "<script>x1", "<img src=x", "<script>x3", "<b>x4</b>", "<i>x5</i>", "<b>x6</b>", "<script>x7", "<b>x8</b>")
	}
}

// A revisions filter the indexes do not serve (author, action, dates, a keyname
// without a class) reads a bounded part of the history per page (100,000 revisions):
// a filter that matches nothing recent ends the page early with a link to search
// older, and does not read the whole history in one request.
func TestRevisionFilterScanBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(people)
	// 110,000 recent revisions of site by one author, and one older by another.
	e.exec(`INSERT INTO revisions(classname, keyname, action, before, after, author, created_at)
		VALUES ('site', 'old', 'update', NULL, NULL, 'user:rare', '2020-01-01T00:00:00Z')`)
	e.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 110000)
		INSERT INTO revisions(classname, keyname, action, before, after, author, created_at)
		SELECT 'site', 'bulk' || i, 'update', NULL, NULL, 'user:bulk', '2021-01-01T00:00:00Z' FROM n`)
	a := e.browser()
	a.signIn("admin", adminPassword)
	for _, q := range []string{"author=user%3Arare", "keyname=old", "action=update&author=user%3Arare", "from=2020-01-01&to=2020-01-01"} {
		p := a.get("/data/private/revision/?" + q)
		want(t, p, 200, `id="partial"`, `id="older"`)
		lacks(t, p, ">old<")
		// Searching older finds it.
		m := regexp.MustCompile(`href="([^"]+)" rel="next"`).FindStringSubmatch(p.body)
		if m == nil {
			t.Fatalf("%s: no link to search older", q)
		}
		p = a.get(html.UnescapeString(m[1]))
		want(t, p, 200, "user:rare")
	}
	// The class filter is served by its index: it finds the old revision at once.
	want(t, a.get("/data/private/revision/?class=site&keyname=old"), 200, "user:rare")
}
