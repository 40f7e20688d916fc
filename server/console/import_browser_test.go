package console_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// importFile has one bad entry (units out of bounds) among good ones.
const importFile = `# the Marseille site and its racks
- {classname: site, keyname: marseille, displayname: Marseille DC3, location: 1 Quai du Port}
- {classname: rack, keyname: mrs-r01, displayname: Marseille row 1, site: marseille, units: 48, tags: [cold]}
- {classname: rack, keyname: mrs-r02, displayname: Marseille row 2, site: marseille, units: 480, tags: [cold]}
- {classname: rack, keyname: mrs-r03, displayname: Marseille row 3, site: marseille, units: 42}
`

// importAsOperator is the browser data with the operators allowed to import, file
// (saved as marseille.yml, whose path it returns) and a browser signed in as operator.
func importAsOperator(t *testing.T, bin, file string) (*env, *chrome, string) {
	t.Helper()
	e := newEnv(t, "")
	e.load(browserData)
	e.load(`- {classname: _role, keyname: operators, permissions: [p_data_access, p_data_read, p_data_create, p_data_update, p_data_import], _action: update}`)
	path := filepath.Join(t.TempDir(), "marseille.yml")
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	b := newChrome(t, bin)
	b.signIn(e.srv.URL, "operator", "operator-pass-1")
	return e, b, path
}

// TestBrowserImport: Check then Import a YAML file with one bad entry, as a person
// would: the sidebar link, the file chooser, the report.
func TestBrowserImport(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	e, b, path := importAsOperator(t, bin, importFile)
	instances := e.queryInt("SELECT count(*) FROM instances")

	b.run("check",
		chromedp.Click(`nav.sidebar a[href="/data/private/import/"]`, chromedp.ByQuery),
		chromedp.WaitVisible("#import-form", chromedp.ByID),
		chromedp.SetUploadFiles("#file", []string{path}, chromedp.ByID),
		chromedp.Click("#check", chromedp.ByID),
		chromedp.WaitVisible("#report", chromedp.ByID),
	)
	if s := b.textOf("#report-title"); !strings.Contains(s, "Check: nothing was written (dry run)") {
		t.Fatalf("report title after Check: %q", s)
	}
	counts := func() map[string]string {
		out := map[string]string{}
		for _, k := range []string{"entries", "created", "errors"} {
			out[k] = b.textOf(`td[data-count="` + k + `"]`)
		}
		return out
	}
	if got := counts(); got["entries"] != "4" || got["created"] != "3" || got["errors"] != "1" {
		t.Fatalf("Check counts: %v", got)
	}
	row := b.textOf("#report-errors tbody tr")
	for _, s := range []string{"3", "rack", "mrs-r02", "units"} {
		if !strings.Contains(row, s) {
			t.Fatalf("the failed entry's row %q lacks %q", row, s)
		}
	}
	if got := e.queryInt("SELECT count(*) FROM instances"); got != instances {
		t.Fatalf("Check wrote: %d instances, was %d", got, instances)
	}

	b.run("import",
		chromedp.SetUploadFiles("#file", []string{path}, chromedp.ByID),
		chromedp.Click("#import", chromedp.ByID),
		chromedp.WaitVisible(`//h2[@id="report-title"][contains(., "Import: done")]`, chromedp.BySearch),
		b.shot("import"),
	)
	if got := counts(); got["entries"] != "4" || got["created"] != "3" || got["errors"] != "1" {
		t.Fatalf("Import counts: %v", got)
	}
	if row := b.textOf("#report-errors tbody tr"); !strings.Contains(row, "mrs-r02") {
		t.Fatalf("Import's failed entry: %q", row)
	}
	ctx := context.Background()
	for _, k := range []string{"mrs-r01", "mrs-r03"} {
		in, err := e.db.Instance(ctx, "rack", k)
		if err != nil || in.Data["site"] != "marseille" {
			t.Fatalf("rack %s after Import: %+v %v", k, in, err)
		}
	}
	if _, err := e.db.Instance(ctx, "rack", "mrs-r02"); err == nil {
		t.Fatal("the bad entry mrs-r02 was imported")
	}
	if got := e.queryInt("SELECT count(*) FROM revisions WHERE author = 'user:operator'"); got != 3 {
		t.Fatalf("revisions by the operator: %d, want 3", got)
	}
}

// TestBrowserCodeEditor: open an instance in the code editor, change a field, dry-run
// (the field's diff), save, and see the new revision.
func TestBrowserCodeEditor(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	e := newEnv(t, "")
	e.load(browserData)
	e.load(`- {classname: _role, keyname: operators, permissions: [p_data_access, p_data_read, p_data_create, p_data_update, p_code_editor], _action: update}`)
	b := newChrome(t, bin)
	b.signIn(e.srv.URL, "operator", "operator-pass-1")

	var doc string
	b.run("open",
		chromedp.Click("#tile-code_editor", chromedp.ByID),
		chromedp.WaitVisible("#open-form", chromedp.ByID),
		chromedp.SetValue("#schema", "rack", chromedp.ByID),
		chromedp.SendKeys("#keys", "par-r02", chromedp.ByID),
		chromedp.Click("#open", chromedp.ByID),
		chromedp.WaitVisible("#doc", chromedp.ByID),
		chromedp.Value("#doc", &doc, chromedp.ByID),
	)
	if !strings.Contains(doc, "keyname: par-r02") || !strings.Contains(doc, "units: 42") || strings.Contains(doc, "par-r01") {
		t.Fatalf("the opened document:\n%s", doc)
	}
	edited := strings.Replace(doc, "units: 42", "units: 44", 1)
	b.run("dry run",
		chromedp.SetValue("#doc", edited, chromedp.ByID),
		chromedp.Click("#dryrun", chromedp.ByID),
		chromedp.WaitVisible("#report-changes", chromedp.ByID),
		b.shot("code_editor"),
	)
	if s := b.textOf(`#report-changes div[data-field="units"]`); !strings.Contains(s, "42") || !strings.Contains(s, "→ 44") {
		t.Fatalf("dry run diff of units: %q", s)
	}
	if in, _ := e.db.Instance(context.Background(), "rack", "par-r02"); in.Data["units"] != int64(42) {
		t.Fatalf("the dry run wrote: %v", in.Data["units"])
	}
	b.run("save",
		chromedp.Click("#save", chromedp.ByID),
		chromedp.WaitVisible(`//h2[@id="report-title"][contains(., "Save: done")]`, chromedp.BySearch),
	)
	if in, _ := e.db.Instance(context.Background(), "rack", "par-r02"); in.Data["units"] != int64(44) {
		t.Fatalf("units after Save: %v", in.Data["units"])
	}
	b.run("revisions",
		chromedp.Click("#revisions-link", chromedp.ByID),
		chromedp.WaitVisible("#revision-list", chromedp.ByID),
	)
	row := b.textOf("#revision-list tbody tr")
	for _, s := range []string{"rack par-r02", "update", "user:operator", "units", "42", "44"} {
		if !strings.Contains(row, s) {
			t.Fatalf("the newest revision %q lacks %q", row, s)
		}
	}
}
