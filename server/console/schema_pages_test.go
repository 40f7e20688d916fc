package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"dataservice/internal/testkit"
)

// schemaData: an editor who may change schemas, a reader who may only read, and a
// schema server with 1,250 instances of which 1,200 hold notes.
const schemaData = `
- {classname: _user, keyname: editor, password: editor-pass-1}
- {classname: _user, keyname: reader, password: reader-pass-1}
- {classname: _role, keyname: schema_editors, permissions: [p_data_access, p_data_read, p_schema_import], users: [editor]}
- {classname: _role, keyname: readers, permissions: [p_data_access, p_data_read], users: [reader]}
- {classname: _schema, keyname: site, displayname: Sites, location: {dataformat: string}}
- {classname: _schema, keyname: server, displayname: Servers, _options: {description: Physical servers},
   hostname: {displayname: Hostname, dataformat: string, order: 10},
   site: {displayname: Site, dataformat: schema, dataformat_ext: site, order: 20},
   units: {displayname: Units, dataformat: int, dataformat_ext: gte_1 lte_4, default: 1, order: 30},
   notes: {displayname: Notes, dataformat: text, order: 40}}
- {classname: _dataview, keyname: server_default, displayname: Servers, target_class: server, content: "columns: [keyname, hostname, site]"}
- {classname: site, keyname: paris}
`

func newSchemaEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t, "")
	e.load(schemaData)
	rows := make([]testkit.Row, 0, 1250)
	for i := range 1250 {
		data := map[string]any{"hostname": fmt.Sprintf("srv%04d", i), "site": "paris"}
		if i < 1200 {
			data["notes"] = "rack note"
		}
		rows = append(rows, testkit.Row{Keyname: fmt.Sprintf("srv%04d", i), Enabled: true, Data: data})
	}
	testkit.InsertInstances(t, e.db, "server", rows)
	return e
}

var previewedRE = regexp.MustCompile(`name="previewed" value="([0-9a-f]+)"`)

func TestSchemaPagesShowDefinitionsCountsAndReferences(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t)
	b := e.browser()
	b.signIn("reader", "reader-pass-1")

	list := b.get("/data/private/_schema/")
	want(t, list, http.StatusOK, `<a href="server/">server</a>`, "1,250", "_user")
	lacks(t, list, "New schema", `<a href="_apikey/">`) // no p_schema_import; _apikey needs p_apikey_admin to read

	p := b.get("/data/private/_schema/server/")
	want(t, p, http.StatusOK, "Physical servers", "gte_1 lte_4", `id="field-notes"`, "1,200", // notes held by 1,200
		"server_default", `<a href="/data/private/_schema/site/">site</a>`)
	lacks(t, p, "Add a field", "?do=delete_field")
	site := b.get("/data/private/_schema/site/")
	want(t, site, http.StatusOK, `<a href="/data/private/_schema/server/">server</a>.site (schema)`)

	want(t, b.get("/data/private/_schema/nosuch/"), http.StatusNotFound, "There is no schema")
	want(t, b.get("/data/private/_schema/_apikey/"), http.StatusForbidden, "it needs p_apikey_admin.")
}

func TestSchemaFormsNeedTheSchemaPermission(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t)
	b := e.browser()
	b.signIn("reader", "reader-pass-1")
	csrf := b.csrf()
	for _, u := range []string{"/data/private/_schema/?do=new", "/data/private/_schema/server/?do=field",
		"/data/private/_schema/server/?do=delete_field&field=notes"} {
		want(t, b.get(u), http.StatusForbidden, "it needs p_schema_import.")
		want(t, b.post(u, url.Values{"csrf": {csrf}, "keyname": {"x"}, "step": {"apply"}}), http.StatusForbidden, "it needs p_schema_import.")
	}
	if n := e.queryInt("SELECT count(*) FROM schema_fields WHERE classname = 'server'"); n != 4 {
		t.Fatalf("server has %d fields after refused posts", n)
	}
}

func TestSchemaFieldDeletePreviewsTheCountThenClears(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t)
	b := e.browser()
	b.signIn("editor", "editor-pass-1")
	csrf := b.csrf()
	u := "/data/private/_schema/server/?do=delete_field&field=notes"

	p := b.get(u)
	want(t, p, http.StatusOK, "Deleting <code>notes</code> clears it on 1,200 server instances (of 1,250).")
	m := previewedRE.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no apply digest on the preview:\n%s", p.body)
	}
	// Without the CSRF token the post is refused and nothing changes.
	want(t, b.post(u, url.Values{"previewed": {m[1]}}), http.StatusForbidden, "CSRF")
	// A digest of another preview shows the preview again, writing nothing.
	want(t, b.post(u, url.Values{"csrf": {csrf}, "previewed": {"00"}}), http.StatusOK, "clears it on 1,200")
	const held = "SELECT count(*) FROM instances WHERE classname = 'server' AND data ->> 'notes' = 'rack note'"
	if n := e.queryInt(held); n != 1200 {
		t.Fatalf("%d notes before the delete", n)
	}
	// The schema changed after the preview: the apply shows the new preview instead.
	e.load(`[{classname: _schema, keyname: server, notes: {displayname: Remarks}}]`)
	want(t, b.post(u, url.Values{"csrf": {csrf}, "previewed": {m[1]}}), http.StatusOK, "clears it on 1,200")
	if n := e.queryInt(held); n != 1200 {
		t.Fatalf("%d notes after an apply of a stale preview", n)
	}
	m = previewedRE.FindStringSubmatch(b.get(u).body)
	done := b.post(u, url.Values{"csrf": {csrf}, "previewed": {m[1]}})
	if done.status != http.StatusSeeOther || done.loc != "/data/private/_schema/server/?done=deleted" {
		t.Fatalf("delete: %d %s\n%s", done.status, done.loc, done.body)
	}
	if n := e.queryInt(held); n != 0 {
		t.Fatalf("%d notes after the delete", n)
	}
	if n := e.queryInt("SELECT count(*) FROM revisions WHERE classname = '_schema' AND keyname = 'server' AND author = 'user:editor'"); n != 1 {
		t.Fatalf("%d revisions of the schema by the editor", n)
	}
	lacks(t, b.get("/data/private/_schema/server/"), `id="field-notes"`)
}

func TestSchemaFieldChangePreviewsThenApplies(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t)
	b := e.browser()
	b.signIn("editor", "editor-pass-1")
	csrf := b.csrf()
	u := "/data/private/_schema/server/?do=field&field=hostname"
	form := url.Values{"csrf": {csrf}, "displayname": {"Host name"}, "dataformat": {"string"}, "cardinal_min": {"1"},
		"cardinal_max": {"1"}, "order": {"10"}, "is_enabled": {"false", "true"}, "step": {"preview"}}
	p := b.post(u, form)
	want(t, p, http.StatusOK, "No instance is written", "Preview")
	// All 1,250 hold a hostname: none lacks the value the new minimum asks for.
	lacks(t, p, "have no value")
	m := previewedRE.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no apply digest:\n%s", p.body)
	}
	// Applying a form that differs from the previewed one shows its preview instead.
	other := url.Values{}
	for k, v := range form {
		other[k] = v
	}
	other.Set("displayname", "Something else")
	other.Set("step", "apply")
	other.Set("previewed", m[1])
	want(t, b.post(u, other), http.StatusOK, "Preview: nothing is written yet")
	if n := e.queryInt("SELECT count(*) FROM schema_fields WHERE classname = 'server' AND keyname = 'hostname' AND cardinal_min = 1"); n != 0 {
		t.Fatal("a change was applied without its preview")
	}
	form.Set("step", "apply")
	form.Set("previewed", m[1])
	done := b.post(u, form)
	if done.status != http.StatusSeeOther {
		t.Fatalf("apply: %d\n%s", done.status, done.body)
	}
	if n := e.queryInt("SELECT count(*) FROM schema_fields WHERE classname = 'server' AND keyname = 'hostname' AND cardinal_min = 1 AND displayname = 'Host name'"); n != 1 {
		t.Fatal("the change was not applied")
	}

	// An invalid definition is refused with the load's message, and nothing changes.
	bad := b.post("/data/private/_schema/server/?do=field", url.Values{"csrf": {csrf}, "keyname": {"rack"},
		"dataformat": {"schema"}, "step": {"preview"}})
	want(t, bad, http.StatusBadRequest, "dataformat schema needs dataformat_ext")
	lacks(t, bad, `name="previewed"`)

	// A field with a minimum added to a schema with instances: the preview names them.
	add := url.Values{"csrf": {csrf}, "keyname": {"serial"}, "dataformat": {"string"}, "cardinal_min": {"1"},
		"cardinal_max": {"1"}, "is_enabled": {"true"}, "step": {"preview"}}
	want(t, b.post("/data/private/_schema/server/?do=field", add), http.StatusOK,
		"The 1,250 server instances existing now get no value for <code>serial</code>.",
		"updating any of the 1,250 server instances fails until the update gives it a value")

	// The unchanged default of units keeps its type (a number) when the field is saved.
	keep := url.Values{"csrf": {csrf}, "displayname": {"Units"}, "dataformat": {"int"}, "dataformat_ext": {"gte_1 lte_4"},
		"cardinal_min": {"0"}, "cardinal_max": {"1"}, "default": {"1"}, "order": {"30"}, "is_enabled": {"true"}, "step": {"preview"}}
	want(t, b.post("/data/private/_schema/server/?do=field&field=units", keep), http.StatusOK, "Nothing changes")
	sch, err := e.db.Schema(context.Background(), "server")
	if err != nil || sch.Field("units").Default != int64(1) {
		t.Fatalf("units default: %#v %v", sch.Field("units").Default, err)
	}
}

func TestSchemaCreateThroughPreview(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t)
	b := e.browser()
	b.signIn("editor", "editor-pass-1")
	csrf := b.csrf()
	form := url.Values{"csrf": {csrf}, "keyname": {"switch"}, "displayname": {"Switches"}, "keyname_mode": {"edit"}, "step": {"preview"}}
	p := b.post("/data/private/_schema/?do=new", form)
	want(t, p, http.StatusOK, "Creates the schema <code>switch</code>")
	if _, err := e.db.Schema(context.Background(), "switch"); err == nil {
		t.Fatal("the preview created the schema")
	}
	form.Set("step", "apply")
	form.Set("previewed", previewedRE.FindStringSubmatch(p.body)[1])
	done := b.post("/data/private/_schema/?do=new", form)
	if done.status != http.StatusSeeOther || done.loc != "/data/private/_schema/switch/?done=created" {
		t.Fatalf("create: %d %s\n%s", done.status, done.loc, done.body)
	}
	want(t, b.post("/data/private/_schema/?do=new", form), http.StatusConflict, "exists already")
	// An empty keyname mode is the default, edit.
	noMode := url.Values{"csrf": {csrf}, "keyname": {"router"}, "keyname_mode": {""}, "step": {"preview"}}
	want(t, b.post("/data/private/_schema/?do=new", noMode), http.StatusOK, "Creates the schema <code>router</code>")
	for _, bad := range []struct{ keyname, mode, msg string }{
		{"_mine", "edit", "built-in"},
		{"Bad Name", "edit", "must match"},
		{"router", "dataformat nosuch", "unknown dataformat"},
	} {
		f := url.Values{"csrf": {csrf}, "keyname": {bad.keyname}, "keyname_mode": {bad.mode}, "step": {"preview"}}
		p := b.post("/data/private/_schema/?do=new", f)
		if p.status == http.StatusOK {
			t.Fatalf("%s: accepted\n%s", bad.keyname, p.body)
		}
		want(t, p, p.status, bad.msg)
	}
	// Built-in schemas have no forms.
	want(t, b.get("/data/private/_schema/_user/?do=field"), http.StatusForbidden, "built-in")
}

// A change of a field's definition keeps the values stored under the old one, and a
// raised minimum does not fill the instances lacking a value: the preview counts both
// groups before anything is written, and the apply leaves every value in place.
func TestSchemaFieldChangePreviewCountsTheInstancesItConcerns(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t)
	b := e.browser()
	b.signIn("editor", "editor-pass-1")
	u := "/data/private/_schema/server/?do=field&field=notes"
	form := url.Values{"csrf": {b.csrf()}, "displayname": {"Notes"}, "dataformat": {"string"}, "cardinal_min": {"1"},
		"cardinal_max": {"1"}, "order": {"40"}, "is_enabled": {"true"}, "step": {"preview"}}
	p := b.post(u, form)
	want(t, p, http.StatusOK, "No instance is written: only the definition changes.",
		"1,200 server instances hold a value for <code>notes</code> and keep it as stored",
		"50 server instances have no value for <code>notes</code>: updating one fails until the update gives it one.")
	if n := e.queryInt("SELECT count(*) FROM schema_fields WHERE classname = 'server' AND keyname = 'notes' AND dataformat = 'string'"); n != 0 {
		t.Fatal("the preview changed the field")
	}
	m := previewedRE.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no apply digest:\n%s", p.body)
	}
	form.Set("step", "apply")
	form.Set("previewed", m[1])
	if done := b.post(u, form); done.status != http.StatusSeeOther || done.loc != "/data/private/_schema/server/?done=updated" {
		t.Fatalf("apply: %d %s\n%s", done.status, done.loc, done.body)
	}
	if n := e.queryInt("SELECT count(*) FROM schema_fields WHERE classname = 'server' AND keyname = 'notes' AND dataformat = 'string' AND cardinal_min = 1"); n != 1 {
		t.Fatal("the change was not applied")
	}
	if n := e.queryInt("SELECT count(*) FROM instances WHERE classname = 'server' AND data ->> 'notes' = 'rack note'"); n != 1200 {
		t.Fatalf("%d servers hold their notes after the change, want 1200", n)
	}
	want(t, b.get("/data/private/_schema/server/?done=updated"), http.StatusOK, "Saved.")
}

// Every schema form is a console form like the others: a post without the session's
// CSRF token and a body over the console's 1 MiB are refused before anything is read
// or written, and a user without p_data_access cannot open the tool at all.
func TestSchemaFormsRefuseForgedAndOversizedPosts(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t)
	e.load(`
- {classname: _user, keyname: importer, password: importer-pass-1}
- {classname: _role, keyname: schema_only, permissions: [p_schema_import], users: [importer]}
`)
	b := e.browser()
	b.signIn("editor", "editor-pass-1")
	csrf := b.csrf()
	big := strings.Repeat("x", 2<<20)
	forms := map[string]url.Values{
		"/data/private/_schema/?do=new": {"keyname": {"switch"}, "step": {"apply"}},
		"/data/private/_schema/server/?do=field": {"keyname": {"rack"}, "dataformat": {"string"}, "cardinal_max": {"1"},
			"is_enabled": {"true"}, "step": {"apply"}},
		"/data/private/_schema/server/?do=field&field=notes": {"displayname": {"Remarks"}, "dataformat": {"text"},
			"cardinal_max": {"1"}, "is_enabled": {"true"}, "step": {"apply"}},
		"/data/private/_schema/server/?do=delete_field&field=notes": {},
	}
	for u, f := range forms {
		// The digest the apply would need, taken from the form's real preview.
		pf := url.Values{"csrf": {csrf}, "step": {"preview"}}
		for k, v := range f {
			if k != "step" {
				pf[k] = v
			}
		}
		var p page
		if strings.Contains(u, "delete_field") {
			p = b.get(u)
		} else {
			p = b.post(u, pf)
		}
		m := previewedRE.FindStringSubmatch(p.body)
		if p.status != http.StatusOK || m == nil {
			t.Fatalf("%s: no preview: %d\n%s", u, p.status, p.body)
		}
		f.Set("previewed", m[1])
		want(t, b.post(u, f), http.StatusForbidden, "CSRF")
		f.Set("csrf", "not-the-token")
		want(t, b.post(u, f), http.StatusForbidden, "CSRF")
		f.Set("csrf", csrf)
		f.Set("description", big)
		want(t, b.post(u, f), http.StatusRequestEntityTooLarge, "larger than")
	}
	if _, err := e.db.Schema(context.Background(), "switch"); err == nil {
		t.Fatal("a refused post created a schema")
	}
	sch, err := e.db.Schema(context.Background(), "server")
	if err != nil || len(sch.Fields) != 4 || sch.Field("notes").Displayname != "Notes" {
		t.Fatalf("server changed by refused posts: %v %v", sch, err)
	}
	if n := e.queryInt("SELECT count(*) FROM instances WHERE classname = 'server' AND data ->> 'notes' IS NOT NULL"); n != 1200 {
		t.Fatalf("%d servers hold notes after refused posts", n)
	}

	// p_schema_import alone opens nothing: the console's pages need p_data_access.
	o := e.browser()
	o.signIn("importer", "importer-pass-1")
	want(t, o.get("/data/private/_schema/"), http.StatusForbidden)
	want(t, o.get("/data/private/_schema/server/?do=delete_field&field=notes"), http.StatusForbidden)
}

// References in come only from the schemas the user may read; references out name
// their target (linked when readable) and say through which field an external field
// reads.
func TestSchemaReferencesFollowReadPermissions(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t)
	e.load(`
- {classname: _schema, keyname: vault, p_read: p_vault_read, host: {dataformat: schema, dataformat_ext: server}}
- {classname: _schema, keyname: rack, row: {dataformat: string}, servers: {dataformat: schema, dataformat_ext: server, cardinal_max: 0}}
- {classname: _schema, keyname: server, city: {dataformat: external, dataformat_ext: site location, description: The city of its site}, cage: {dataformat: schema, dataformat_ext: vault}}
`)
	b := e.browser()
	b.signIn("reader", "reader-pass-1")
	p := b.get("/data/private/_schema/server/")
	want(t, p, http.StatusOK,
		`<a href="/data/private/_schema/rack/">rack</a>.servers (schema)`, // in, from a readable schema
		"city (external) → through site, its field location",              // out, computed
		"cage (schema) → vault</li>",                                      // out, to a schema the reader may not open: no link
		"<small class=\"meta\">The city of its site</small>",              // a field's description
	)
	lacks(t, p, `<a href="/data/private/_schema/vault/">`, "vault</a>.host")
	want(t, b.get("/data/private/_schema/vault/"), http.StatusForbidden, "it needs p_vault_read.")
	lacks(t, b.get("/data/private/_schema/"), `id="schema-vault"`)
	// The editor may not read vault either: the same page for them.
	ed := e.browser()
	ed.signIn("editor", "editor-pass-1")
	lacks(t, ed.get("/data/private/_schema/server/"), "vault</a>.host")
}

// A field's deletion preview names what else reads the field: the external fields that
// follow it or show it, and the dataviews listing it.
func TestSchemaFieldDeletePreviewNamesItsReaders(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t)
	e.load(`
- {classname: _schema, keyname: server, city: {dataformat: external, dataformat_ext: site location}}
- {classname: _schema, keyname: vault, p_read: p_vault_read, host: {dataformat: schema, dataformat_ext: site}, where: {dataformat: external, dataformat_ext: host location}}
`)
	b := e.browser()
	b.signIn("editor", "editor-pass-1")
	p := b.get("/data/private/_schema/server/?do=delete_field&field=site")
	want(t, p, http.StatusOK, "Deleting <code>site</code> clears it on 1,250 server instances (of 1,250).",
		"The external field(s) <code>server.city</code> read it",
		"The dataview(s) <code>server_default</code> list it")
	p = b.get("/data/private/_schema/site/?do=delete_field&field=location")
	want(t, p, http.StatusOK, "The external field(s) <code>server.city</code> read it")
	lacks(t, p, "vault", "dataview(s)") // vault is not the editor's to read; no dataview of site
	p = b.get("/data/private/_schema/server/?do=delete_field&field=notes")
	lacks(t, p, "external field(s)", "dataview(s)")
}

// A field form with several invalid values names every one in one answer, each at its
// input, and writes nothing; values that are each valid but do not fit together are
// refused with the load's message.
func TestSchemaFieldFormNamesEveryInvalidValue(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t)
	b := e.browser()
	b.signIn("editor", "editor-pass-1")
	csrf := b.csrf()
	form := url.Values{"csrf": {csrf}, "keyname": {"rack"}, "dataformat": {"nosuch"}, "cardinal_min": {"abc"},
		"cardinal_max": {"-1"}, "order": {"x"}, "is_enabled": {"true"}, "step": {"preview"}}
	p := b.post("/data/private/_schema/server/?do=field", form)
	want(t, p, http.StatusBadRequest, "4 values of the form are not valid",
		`id="error-dataformat">schema server: field rack: unknown dataformat &#34;nosuch&#34;`,
		`id="error-cardinal_min">schema server: field rack: cardinal_min &#34;abc&#34; is not a non-negative integer`,
		`id="error-cardinal_max">schema server: field rack: cardinal_max &#34;-1&#34; is not a non-negative integer`,
		`id="error-order">schema server: field rack: order &#34;x&#34; is not a non-negative integer`)
	lacks(t, p, `name="previewed"`)
	// The change form of an existing field: one invalid value is the form's message.
	p = b.post("/data/private/_schema/server/?do=field&field=units", url.Values{"csrf": {csrf}, "dataformat": {"int"},
		"cardinal_min": {"0"}, "cardinal_max": {"many"}, "is_enabled": {"true"}, "step": {"apply"}})
	want(t, p, http.StatusBadRequest, `id="form-error">schema server: field units: cardinal_max &#34;many&#34; is not a non-negative integer`,
		`class="row invalid"><label for="cardinal_max">`)
	// A bad name is the one problem named, not once per value.
	form = url.Values{"csrf": {csrf}, "keyname": {"bad name"}, "dataformat": {"string"}, "cardinal_min": {"x"},
		"is_enabled": {"true"}, "step": {"preview"}}
	p = b.post("/data/private/_schema/server/?do=field", form)
	want(t, p, http.StatusBadRequest, `id="error-keyname">schema server: &#34;bad name&#34; is not a valid field name`)
	lacks(t, p, "values of the form", `id="error-cardinal_min"`)
	// Each number is valid, together they are not.
	form = url.Values{"csrf": {csrf}, "keyname": {"rack"}, "dataformat": {"string"}, "cardinal_min": {"3"},
		"cardinal_max": {"2"}, "is_enabled": {"true"}, "step": {"preview"}}
	want(t, b.post("/data/private/_schema/server/?do=field", form), http.StatusBadRequest, "cardinal_min 3 exceeds cardinal_max 2")
	sch, err := e.db.Schema(context.Background(), "server")
	if err != nil || sch.Field("rack") != nil || sch.Field("units").CardinalMax != 1 {
		t.Fatalf("a refused form changed server: %v", err)
	}
}

// The create form names a bad keyname and a bad keyname mode together, each at its input.
func TestSchemaCreateNamesEveryInvalidValue(t *testing.T) {
	t.Parallel()
	e := newSchemaEnv(t)
	b := e.browser()
	b.signIn("editor", "editor-pass-1")
	csrf := b.csrf()
	post := func(keyname, mode string) page {
		return b.post("/data/private/_schema/?do=new", url.Values{"csrf": {csrf}, "keyname": {keyname}, "keyname_mode": {mode}, "step": {"preview"}})
	}
	for _, keyname := range []string{"", "Bad Name"} {
		p := post(keyname, "dataformat nosuch")
		want(t, p, http.StatusBadRequest, "2 values of the form are not valid", `id="error-keyname">`,
			`id="error-keyname_mode">keyname_mode &#34;dataformat nosuch&#34;: unknown dataformat &#34;nosuch&#34;`)
	}
	p := post("router", "dataformat nosuch")
	want(t, p, http.StatusBadRequest, `id="error-keyname_mode">`, "unknown dataformat")
	lacks(t, p, `id="error-keyname"`, "values of the form")
	p = post("Bad Name", "edit")
	want(t, p, http.StatusBadRequest, `id="error-keyname">`, "must match")
	lacks(t, p, `id="error-keyname_mode"`)
	names, err := e.db.SchemaNames(context.Background())
	if err != nil || slices.Contains(names, "router") {
		t.Fatalf("a refused form created a schema: %v %v", names, err)
	}
}
