package console_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserImportKeptFile: a YAML file with an error is chosen once: Check shows the
// error's line marked and the file's text in the box; the line is fixed there, checked
// again, and imported without choosing the file again.
func TestBrowserImportKeptFile(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	broken := strings.Replace(importFile, "units: 480, tags: [cold]}", "units: 48, tags: [cold]", 1)
	e, b, path := importAsOperator(t, bin, broken)
	instances := e.queryInt("SELECT count(*) FROM instances")

	b.run("check the file",
		chromedp.Navigate(e.srv.URL+"/data/private/import/"),
		chromedp.WaitVisible("#import-form", chromedp.ByID),
		chromedp.SetUploadFiles("#file", []string{path}, chromedp.ByID),
		chromedp.Click("#check", chromedp.ByID),
		chromedp.WaitVisible("#import-error", chromedp.ByID),
		chromedp.WaitVisible("#doc-lines li.bad", chromedp.ByQuery),
		b.shot("import_kept"),
	)
	if s := b.textOf("#doc-lines li.bad"); !strings.Contains(s, "mrs-r02") || !strings.HasPrefix(s, "4") {
		t.Fatalf("the marked line: %q, want line 4 (mrs-r02)", s)
	}
	if s := b.textOf("#kept-note"); !strings.Contains(s, "marseille.yml") {
		t.Fatalf("the kept file's note: %q", s)
	}
	var text string
	b.run("the box", chromedp.Value("#text", &text, chromedp.ByID))
	if text != broken {
		t.Fatalf("the text box holds %q, want the file's text", text)
	}

	// Fixed in place (the flow mapping closed), checked again: no file chosen.
	b.run("fix and check",
		chromedp.SetValue("#text", strings.Replace(text, "tags: [cold]\n", "tags: [cold]}\n", 1), chromedp.ByID),
		chromedp.Click("#check", chromedp.ByID),
		chromedp.WaitVisible(`//h2[@id="report-title"][contains(., "Check: nothing was written")]`, chromedp.BySearch),
	)
	if s := b.textOf(`td[data-count="created"]`); s != "4" {
		t.Fatalf("created after the fix: %q, want 4", s)
	}
	if got := e.queryInt("SELECT count(*) FROM instances"); got != instances {
		t.Fatalf("Check wrote: %d instances, was %d", got, instances)
	}
	b.run("import",
		chromedp.Click("#import", chromedp.ByID),
		chromedp.WaitVisible(`//h2[@id="report-title"][contains(., "Import: done")]`, chromedp.BySearch),
	)
	if in, err := e.db.Instance(context.Background(), "rack", "mrs-r02"); err != nil || in.Data["units"] != int64(48) {
		t.Fatalf("the fixed rack after Import: %+v %v", in, err)
	}
	var kept int
	b.run("forgotten", chromedp.Evaluate(`document.querySelectorAll('input[name="kept"]').length`, &kept))
	if kept != 0 {
		t.Fatal("the form still names the kept file after Import")
	}
}
