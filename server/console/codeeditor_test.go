package console_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// editorDoc is the document of the code editor's textarea, unescaped.
func editorDoc(t *testing.T, p page) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<textarea id="doc"[^>]*>(.*?)</textarea>`).FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no editor on the page:\n%s", p.body)
	}
	return html.UnescapeString(m[1])
}

func TestCodeEditorOpenHidesSecretsAndUnreadable(t *testing.T) {
	t.Parallel()
	e := toolEnv(t)
	b, _ := signedIn(e, "editor")
	p := b.get("/data/private/code_editor/?schema=_user&keys=victim,nosuch")
	want(t, p, 200, "Not found in _user: nosuch.")
	doc := editorDoc(t, p)
	for _, s := range []string{"classname: _user", "keyname: victim", "email: v@example.org"} {
		if !strings.Contains(doc, s) {
			t.Fatalf("document lacks %q:\n%s", s, doc)
		}
	}
	for _, s := range []string{"password", "$argon2", "victim-pass-1"} {
		if strings.Contains(p.body, s) {
			t.Fatalf("the editor shows %q:\n%s", s, p.body)
		}
	}
	p = b.get("/data/private/code_editor/?schema=rack&keys=r1&format=json")
	if doc := editorDoc(t, p); !strings.Contains(doc, `"keyname": "r1"`) || !strings.Contains(doc, `"units": 42`) {
		t.Fatalf("JSON document:\n%s", doc)
	}
	// An address of a hexip schema may be named as written.
	e.load("- {classname: ipam_ip, keyname: 10.9.8.7}")
	if doc := editorDoc(t, b.get("/data/private/code_editor/?schema=ipam_ip&keys=10.9.8.7")); !strings.Contains(doc, "keyname: 0a090807") ||
		!strings.Contains(doc, "displayname: 10.9.8.7") {
		t.Fatalf("ipam_ip document:\n%s", doc)
	}
	// A schema the user may not read is neither offered nor opened.
	lacks(t, b.get("/data/private/code_editor/"), "<option>vault</option>")
	want(t, b.get("/data/private/code_editor/?schema=vault"), http.StatusForbidden)
	lacks(t, b.get("/data/private/code_editor/?schema=vault&keys=v1"), "hidden-1")
	want(t, b.get("/data/private/code_editor/?schema=nosuch"), http.StatusNotFound)
}

func TestCodeEditorWholeSchemaIsBounded(t *testing.T) {
	t.Parallel()
	e := toolEnv(t)
	var sb strings.Builder
	for i := 0; i < 505; i++ {
		fmt.Fprintf(&sb, "- {classname: site, keyname: s%03d}\n", i)
	}
	e.load(sb.String())
	b, tok := signedIn(e, "editor")
	p := b.get("/data/private/code_editor/?schema=site")
	want(t, p, 200, "site has 506 instances: the first 500 are open")
	if n := strings.Count(editorDoc(t, p), "classname: site"); n != 500 {
		t.Fatalf("objects open: %d, want 500", n)
	}
	sb.WriteString("- {classname: site, keyname: s999}\n")
	p = b.post("/data/private/code_editor/?schema=site", url.Values{"csrf": {tok}, "do": {"save"}, "doc": {sb.String()}})
	want(t, p, http.StatusRequestEntityTooLarge, "more than 500 entries", "the import tool takes more")
	if n := e.queryInt("SELECT count(*) FROM instances WHERE classname = 'site' AND keyname = 's999'"); n != 0 {
		t.Fatal("an oversized document was saved")
	}
}

func TestCodeEditorValidateDryRunSave(t *testing.T) {
	t.Parallel()
	e := toolEnv(t)
	b, tok := signedIn(e, "editor")
	doc := editorDoc(t, b.get("/data/private/code_editor/?schema=_user&keys=victim"))
	hash := func() string {
		var h string
		e.db.Reader().QueryRowContext(context.Background(), "SELECT data ->> 'password' FROM instances WHERE classname = '_user' AND keyname = 'victim'").Scan(&h)
		return h
	}
	before := hash()
	revs := e.queryInt("SELECT count(*) FROM revisions")
	post := func(do, doc string) page {
		return b.post("/data/private/code_editor/?schema=_user&keys=victim", url.Values{"csrf": {tok}, "do": {do}, "doc": {doc}})
	}

	edited := strings.Replace(doc, "email: v@example.org", "email: new@example.org", 1)
	if edited == doc {
		t.Fatalf("no email line to edit:\n%s", doc)
	}
	p := post("validate", edited)
	want(t, p, 200, `id="valid"`, "The document is valid: 1 entry would load")
	lacks(t, p, `id="report-changes"`)

	p = post("validate", strings.Replace(edited, "email:", "emial:", 1))
	want(t, p, 200, "emial is not a field of _user and would be ignored")
	p = post("validate", edited+"- {classname: rack, keyname: r9, units: 0}\n")
	want(t, p, 200, `<td>rack</td><td>r9</td>`)
	lacks(t, p, `id="valid"`)
	p = post("validate", "- {classname: rack, keyname: [unclosed\n")
	want(t, p, http.StatusBadRequest, `id="editor-error"`, "unclosed") // the text is kept

	p = post("dryrun", edited)
	want(t, p, 200, "Dry run: nothing was written (dry run)", "What would change", `data-field="email"`,
		"<del>v@example.org</del> → <ins>new@example.org</ins>")
	// A change to what the user may not read is counted, never shown.
	p = post("dryrun", "- {classname: vault, keyname: v9, code: not-for-you}\n")
	want(t, p, 200, `data-count="created">1<`, `id="no-changes"`)
	lacks(t, p, "not-for-you</del>", "<ins>not-for-you")
	if got := e.queryInt("SELECT count(*) FROM revisions"); got != revs {
		t.Fatalf("validate and dry run wrote %d revisions", got-revs)
	}
	if got := e.queryInt("SELECT count(*) FROM instances WHERE CAST(data AS TEXT) LIKE '%new@example.org%' OR keyname = 'v9'"); got != 0 {
		t.Fatal("validate or dry run wrote")
	}

	p = post("save", edited)
	want(t, p, 200, "Save: done", "What changed", `data-field="email"`, `id="revisions-link"`)
	if got := e.queryInt("SELECT count(*) FROM instances WHERE classname = '_user' AND keyname = 'victim' AND data ->> 'email' = 'new@example.org'"); got != 1 {
		t.Fatal("the saved email is not stored")
	}
	if got := hash(); got != before || got == "" {
		t.Fatalf("saving a document without the password changed it: %q, was %q", got, before)
	}
	if got := e.queryInt("SELECT count(*) FROM revisions WHERE classname = '_user' AND keyname = 'victim' AND author = 'user:editor'"); got != 1 {
		t.Fatalf("revisions by the editor: %d, want 1", got)
	}
	// Saving it again changes nothing.
	p = post("save", edited)
	want(t, p, 200, `data-count="unchanged">1<`, `id="no-changes"`)

	// Writes the user lacks are refused per entry, as in a load.
	p = post("save", "- {classname: _role, keyname: editors, permissions: [p_data_admin]}\n- {classname: _apikey, keyname: k1, permissions: [p_data_read]}\n")
	want(t, p, 200, `data-count="errors">2<`, "permission denied")
	if got := e.queryInt("SELECT count(*) FROM instances WHERE classname = '_apikey' AND keyname = 'k1'"); got != 0 {
		t.Fatal("a key was created without p_apikey_admin")
	}
	want(t, post("nonsense", edited), http.StatusBadRequest, "do must be validate, dryrun or save")
	want(t, b.post("/data/private/code_editor/?schema=_user", url.Values{"do": {"save"}, "doc": {edited}}), http.StatusForbidden, "CSRF")
}
