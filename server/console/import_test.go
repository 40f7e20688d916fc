package console_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/server"
	"dataservice/store"
	"dataservice/tasks"
)

// toolPeople: importer may import (data permissions, no user import), editor may use
// the code editor and write users, plain has neither tool.
const toolPeople = `
- {classname: _user, keyname: importer, password: importer-pass-1}
- {classname: _user, keyname: editor, password: editor-pass-1}
- {classname: _user, keyname: plain, password: plain-pass-1}
- {classname: _user, keyname: victim, password: victim-pass-1, email: v@example.org}
- {classname: _role, keyname: importers, users: [importer],
   permissions: [p_data_access, p_data_read, p_data_create, p_data_update, p_data_import, p_pipeline_run]}
- {classname: _role, keyname: editors, users: [editor],
   permissions: [p_data_access, p_data_read, p_data_create, p_data_update, p_code_editor, p_user_import]}
- {classname: _role, keyname: plains, users: [plain], permissions: [p_data_access, p_data_read, p_data_create, p_data_update]}
- {classname: _schema, keyname: site, displayname: Sites, location: {displayname: Location, dataformat: string}}
- {classname: _schema, keyname: rack, displayname: Racks,
   site: {displayname: Site, dataformat: schema, dataformat_ext: site},
   units: {displayname: Units, dataformat: int, dataformat_ext: gte_1 lte_60},
   tags: {displayname: Tags, dataformat: string, cardinal_max: 0}}
- {classname: _schema, keyname: vault, displayname: Vault, p_read: p_vault_read, code: {dataformat: string}}
- {classname: _permission, keyname: p_vault_read, displayname: Vault}
- {classname: site, keyname: paris, displayname: Paris, location: "Rue A"}
- {classname: rack, keyname: r1, site: paris, units: 42}
- {classname: vault, keyname: v1, code: hidden-1}
- {classname: _pipeline, keyname: upper_tag, run_permission: p_pipeline_run,
   content: "- field_upper: tags"}
- {classname: _pipeline, keyname: admin_only, run_permission: p_pipeline_admin, content: "[]"}
`

// postMultipart posts a multipart form (an upload) with the session's CSRF token.
func (b *browser) postMultipart(path string, fields map[string]string, fileName, file string) page {
	b.e.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		mw.WriteField(k, v)
	}
	if fileName != "" {
		fw, _ := mw.CreateFormFile("file", fileName)
		io.WriteString(fw, file)
	}
	mw.Close()
	return b.send("POST", path, &buf, mw.FormDataContentType(), nil)
}

func toolEnv(t *testing.T) *env {
	e := newEnv(t, "")
	e.load(toolPeople)
	return e
}

func signedIn(e *env, login string) (*browser, string) {
	b := e.browser()
	b.signIn(login, login+"-pass-1")
	return b, b.csrf()
}

// count reads a report's counter.
func count(t *testing.T, p page, name string) string {
	t.Helper()
	m := regexp.MustCompile(`data-count="` + name + `">(\d+)<`).FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no %s count in the report:\n%s", name, p.body)
	}
	return m[1]
}

func TestToolGates(t *testing.T) {
	t.Parallel()
	e := toolEnv(t)
	plain, _ := signedIn(e, "plain")
	dash := plain.get("/")
	want(t, dash, 200, `id="tile-data"`)
	lacks(t, dash, `id="tile-code_editor"`, `href="/data/private/code_editor/"`, `href="/data/private/import/"`)
	want(t, plain.get("/data/private/code_editor/"), http.StatusForbidden)
	want(t, plain.get("/data/private/code_editor/?schema=rack&keys=r1"), http.StatusForbidden)
	want(t, plain.get("/data/private/import/"), http.StatusForbidden)
	lacks(t, plain.get("/data/private/"), `href="/data/private/import/"`)
	tok := plain.csrf()
	p := plain.postMultipart("/data/private/import/", map[string]string{"csrf": tok, "do": "import", "text": "- {classname: site, keyname: x}"}, "", "")
	want(t, p, http.StatusForbidden)
	p = plain.post("/data/private/code_editor/?schema=site", url.Values{"csrf": {tok}, "do": {"save"}, "doc": {"- {classname: site, keyname: x}"}})
	want(t, p, http.StatusForbidden)
	if n := e.queryInt("SELECT count(*) FROM instances WHERE classname = 'site' AND keyname = 'x'"); n != 0 {
		t.Fatal("a refused tool wrote")
	}

	imp, _ := signedIn(e, "importer")
	dash = imp.get("/")
	want(t, dash, 200, `href="/data/private/import/"`)
	lacks(t, dash, `id="tile-code_editor"`)
	want(t, imp.get("/data/private/import/"), 200, `id="import-form"`, `enctype="multipart/form-data"`, "<option>upper_tag</option>")
	lacks(t, imp.get("/data/private/import/"), "<option>admin_only</option>") // a pipeline the user may not run
	want(t, imp.get("/data/private/code_editor/"), http.StatusForbidden)
	want(t, imp.get("/data/private/import/x/"), http.StatusNotFound) // a one-page tool

	ed, _ := signedIn(e, "editor")
	dash = ed.get("/")
	want(t, dash, 200, `id="tile-code_editor"`)
	lacks(t, dash, `href="/data/private/import/"`)
	want(t, ed.get("/data/private/code_editor/"), 200, `id="open-form"`)
	want(t, ed.get("/data/private/code_editor/site/"), http.StatusNotFound)
	want(t, ed.get("/data/private/import/"), http.StatusForbidden)

	// No p_data_access: no tool, even with the tool's own permission.
	e.load(`- {classname: _role, keyname: editors, permissions: [p_code_editor, p_data_import], _action: update}`)
	want(t, ed.get("/data/private/code_editor/"), http.StatusForbidden)
	lacks(t, ed.get("/"), `id="tile-code_editor"`, `href="/data/private/import/"`)
}

func TestImportNeedsCSRF(t *testing.T) {
	t.Parallel()
	e := toolEnv(t)
	b, tok := signedIn(e, "importer")
	doc := "- {classname: site, keyname: lyon}"
	want(t, b.postMultipart("/data/private/import/", map[string]string{"do": "import", "text": doc}, "", ""), http.StatusForbidden, "CSRF")
	b.origin = "http://evil.example"
	want(t, b.postMultipart("/data/private/import/", map[string]string{"csrf": tok, "do": "import", "text": doc}, "", ""), http.StatusForbidden, "CSRF")
	if n := e.queryInt("SELECT count(*) FROM instances WHERE classname = 'site' AND keyname = 'lyon'"); n != 0 {
		t.Fatal("an import without a valid CSRF token or origin wrote")
	}
}

const importDoc = `
- {classname: site, keyname: lyon, displayname: Lyon}
- {classname: rack, keyname: r2, site: lyon, units: 48}
- {classname: rack, keyname: r3, site: paris, units: 99}
- {classname: rack, keyname: r1, units: 40}
`

func TestImportCheckChangesNothing(t *testing.T) {
	t.Parallel()
	e := toolEnv(t)
	b, tok := signedIn(e, "importer")
	inst, revs := e.queryInt("SELECT count(*) FROM instances"), e.queryInt("SELECT count(*) FROM revisions")
	p := b.postMultipart("/data/private/import/", map[string]string{"csrf": tok, "do": "check", "text": importDoc}, "", "")
	want(t, p, 200, "Check: nothing was written (dry run)", `id="report-errors"`)
	for name, n := range map[string]string{"entries": "4", "created": "2", "updated": "1", "errors": "1"} {
		if got := count(t, p, name); got != n {
			t.Fatalf("%s: got %s, want %s", name, got, n)
		}
	}
	// The failing entry: its index, class, keyname and reason.
	if !regexp.MustCompile(`<tr class="failed"><td class="num">3</td><td>rack</td><td>r3</td><td>[^<]*units[^<]*</td>`).MatchString(p.body) {
		t.Fatalf("the failed entry's row:\n%s", p.body)
	}
	// The pasted document is kept for Import.
	want(t, p, 200, "keyname: r3, site: paris")
	if got := e.queryInt("SELECT count(*) FROM instances"); got != inst {
		t.Fatalf("instances after Check: %d, want %d", got, inst)
	}
	if got := e.queryInt("SELECT count(*) FROM revisions"); got != revs {
		t.Fatalf("revisions after Check: %d, want %d", got, revs)
	}
	if got := e.queryInt("SELECT data ->> 'units' FROM instances WHERE classname = 'rack' AND keyname = 'r1'"); got != 42 {
		t.Fatalf("r1 units after Check: %d", got)
	}

	p = b.postMultipart("/data/private/import/", map[string]string{"csrf": tok, "do": "import", "text": importDoc}, "", "")
	want(t, p, 200, "Import: done", `<td>r3</td>`)
	if got := count(t, p, "created"); got != "2" {
		t.Fatalf("created: %s", got)
	}
	if got := e.queryInt("SELECT count(*) FROM instances WHERE classname = 'rack' AND keyname IN ('r2', 'r3')"); got != 1 {
		t.Fatalf("racks r2, r3 after Import: %d, want 1 (r3 is invalid)", got)
	}
	if got := e.queryInt("SELECT count(*) FROM revisions WHERE author = 'user:importer'"); got != 3 {
		t.Fatalf("revisions by the importer: %d, want 3", got)
	}
}

func TestImportRefusesPerEntryWhatTheUserLacks(t *testing.T) {
	t.Parallel()
	e := toolEnv(t)
	b, tok := signedIn(e, "importer")
	doc := `[
 {"classname": "site", "keyname": "nice"},
 {"classname": "_user", "keyname": "victim", "email": "attacker@example.org"},
 {"classname": "_role", "keyname": "importers", "permissions": ["p_data_admin"]},
 {"classname": "vault", "keyname": "v2", "code": "x"},
 {"classname": "_schema", "keyname": "newschema", "f": {"dataformat": "string"}},
 {"classname": "site", "keyname": "paris", "_action": "delete"}
]`
	p := b.postMultipart("/data/private/import/", map[string]string{"csrf": tok, "do": "import"}, "load.json", doc)
	want(t, p, 200, "Import: done", "load.json")
	if got := count(t, p, "created"); got != "2" { // site nice; vault v2 needs only p_data_create
		t.Fatalf("created: %s\n%s", got, p.body)
	}
	if got := count(t, p, "errors"); got != "4" {
		t.Fatalf("errors: %s\n%s", got, p.body)
	}
	for _, row := range []string{`<td>_user</td><td>victim</td><td>permission denied`, `<td>_role</td><td>importers</td><td>permission denied`,
		`<td>_schema</td><td>newschema</td><td>permission denied`, `<td>site</td><td>paris</td><td>permission denied`} {
		if !strings.Contains(p.body, row) {
			t.Fatalf("no refusal row %q:\n%s", row, p.body)
		}
	}
	if got := e.queryInt("SELECT count(*) FROM instances WHERE classname = '_user' AND keyname = 'victim' AND CAST(data AS TEXT) LIKE '%attacker%'"); got != 0 {
		t.Fatal("the import changed a user without p_user_import")
	}
	if got := e.queryInt("SELECT count(*) FROM instances WHERE classname = 'site' AND keyname IN ('nice', 'paris')"); got != 2 {
		t.Fatalf("sites: %d, want nice created and paris kept", got)
	}
}

func TestImportCSVAndPipeline(t *testing.T) {
	t.Parallel()
	e := toolEnv(t)
	b, tok := signedIn(e, "importer")
	csv := "name|units|tags\nc1|10|a\nc2|70|b\n"
	f := map[string]string{"csrf": tok, "do": "import", "format": "csv", "schema": "rack", "keyfield": "name", "delimiter": "|",
		"pipeline": "upper_tag"}
	p := b.postMultipart("/data/private/import/", f, "racks.csv", csv)
	want(t, p, 200, "Import: done", `<td>rack</td><td>c2</td>`)
	if got := count(t, p, "created"); got != "1" {
		t.Fatalf("created: %s\n%s", got, p.body)
	}
	if got := e.queryInt("SELECT count(*) FROM instances WHERE classname = 'rack' AND keyname = 'c1' AND data -> 'tags' ->> 0 = 'A'"); got != 1 {
		t.Fatal("the CSV row did not load through the pipeline (tag upper-cased)")
	}

	// The API's checks and messages, shown on the page; nothing is written.
	f["delimiter"] = "||"
	want(t, b.postMultipart("/data/private/import/", f, "racks.csv", csv), http.StatusBadRequest, "delimiter must be one character")
	f["delimiter"], f["keyfield"] = "|", "nope"
	want(t, b.postMultipart("/data/private/import/", f, "racks.csv", csv), http.StatusBadRequest, "no column named nope")
	f["keyfield"], f["schema"] = "name", ""
	want(t, b.postMultipart("/data/private/import/", f, "racks.csv", csv), http.StatusBadRequest, "Choose the schema")
	f["schema"], f["pipeline"] = "rack", "admin_only"
	want(t, b.postMultipart("/data/private/import/", f, "racks.csv", csv), http.StatusForbidden, "permission denied")
	f["pipeline"] = "nosuch"
	want(t, b.postMultipart("/data/private/import/", f, "racks.csv", csv), http.StatusNotFound, "pipeline not found")
	want(t, b.postMultipart("/data/private/import/", map[string]string{"csrf": tok, "do": "import"}, "", ""), http.StatusBadRequest, "Paste a document or choose a file")
	want(t, b.postMultipart("/data/private/import/", map[string]string{"csrf": tok, "do": "import"}, "racks.csv", csv), http.StatusBadRequest,
		"racks.csv looks like a CSV file")
	want(t, b.postMultipart("/data/private/import/", map[string]string{"csrf": tok, "do": "import", "text": "- [unclosed"}, "", ""), http.StatusBadRequest, "document")
	if got := e.queryInt("SELECT count(*) FROM instances WHERE classname = 'rack' AND keyname LIKE 'c%'"); got != 1 {
		t.Fatalf("racks c*: %d, want 1", got)
	}
}

// The import tool takes documents as large as the API does, not the 1 MiB of forms.
func TestImportTakesLargeDocuments(t *testing.T) {
	t.Parallel()
	e := toolEnv(t)
	b, tok := signedIn(e, "importer")
	var sb strings.Builder
	sb.WriteString("[\n")
	for i := 0; sb.Len() < 3<<19; i++ { // 1.5 MiB in 40 entries
		if i > 0 {
			sb.WriteString(",\n")
		}
		sb.WriteString(`{"classname": "site", "keyname": "s` + fmt.Sprintf("%06d", i) + `", "location": "` + strings.Repeat("x", 40000) + `"}`)
	}
	sb.WriteString("]\n")
	p := b.postMultipart("/data/private/import/", map[string]string{"csrf": tok, "do": "check"}, "big.json", sb.String())
	want(t, p, 200, "Check: nothing was written")
	if got := count(t, p, "errors"); got != "0" {
		t.Fatalf("errors: %s", got)
	}
	if got := count(t, p, "created"); got != "40" {
		t.Fatalf("created: %s, want 40", got)
	}
}

// The import tool's body limit is the API's (MaxBody), named when exceeded; a body is
// read only for a signed-in session.
func TestImportBodyLimit(t *testing.T) {
	t.Parallel()
	st := testkit.NewStack(t, testkit.StackOptions{AdminPassword: adminPassword, NoRunner: true,
		Handler: func(db *store.DB, _ *tasks.Runner) http.Handler {
			return server.New(server.Options{DB: db, Logger: testkit.Logger(t, slog.LevelWarn), MaxBody: 256 << 10,
				Version: testkit.Version, VersionDate: testkit.VersionDate})
		}})
	e := &env{t: t, db: st.DB, srv: st.Server}
	e.load(toolPeople)
	b, tok := signedIn(e, "importer")
	big := "- {classname: site, keyname: big, location: " + strings.Repeat("x", 300<<10) + "}\n"
	want(t, b.postMultipart("/data/private/import/", map[string]string{"csrf": tok, "do": "import"}, "big.yml", big),
		http.StatusRequestEntityTooLarge, "The form is larger than 256 KiB.")
	small := "- {classname: site, keyname: small, location: " + strings.Repeat("x", 200<<10) + "}\n"
	want(t, b.postMultipart("/data/private/import/", map[string]string{"csrf": tok, "do": "import"}, "small.yml", small),
		http.StatusOK, "Import: done")
	anon := e.browser()
	want(t, anon.postMultipart("/data/private/import/", map[string]string{"do": "import"}, "big.yml", big), http.StatusUnauthorized)
	if n := e.queryInt("SELECT count(*) FROM instances WHERE classname = 'site' AND keyname IN ('big', 'small')"); n != 1 {
		t.Fatalf("sites big, small: %d, want only small", n)
	}
}

// TestImportReportsEveryProblem: the import tool's report lists every problem of a
// failed entry, and warns of values under unknown field names.
func TestImportReportsEveryProblem(t *testing.T) {
	t.Parallel()
	e := toolEnv(t)
	b, tok := signedIn(e, "importer")
	doc := "- {classname: rack, keyname: r7, site: nowhere, units: 99}\n- {classname: rack, keyname: r8, units: 4, colour: red}\n"
	p := b.postMultipart("/data/private/import/", map[string]string{"csrf": tok, "do": "check", "text": doc}, "", "")
	want(t, p, 200, `id="report-errors"`, `<div class="problem">field site: no site instance &#34;nowhere&#34;</div>`,
		`<div class="problem">field units: 99 is out of bounds`, `id="report-warnings"`,
		"1 value under unknown field names was ignored (rack.colour)")
}
