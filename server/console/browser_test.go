package console_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// The browser test drives Debian's chromium, headless, against the real server on
// 127.0.0.1. Without chromium it skips, unless DATASERVICE_REQUIRE_BROWSER=1 (set by
// CI), where it fails. DATASERVICE_SCREENSHOTS=dir writes the screenshots the README
// shows (docs/screenshots) into dir.

func chromium(t *testing.T) string {
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("DATASERVICE_REQUIRE_BROWSER") == "1" {
		t.Fatal("chromium is not installed and DATASERVICE_REQUIRE_BROWSER=1: the browser test is required (apt-get install -y chromium)")
	}
	t.Skip("chromium not found: browser test skipped (set DATASERVICE_REQUIRE_BROWSER=1 to make this a failure)")
	return ""
}

const browserData = `
- {classname: _user, keyname: operator, displayname: Olivia Operator, password: operator-pass-1}
- {classname: _role, keyname: operators, permissions: [p_data_access, p_data_read, p_data_create, p_data_update, p_data_delete, p_data_export, p_keyname_rename], users: [operator]}
- {classname: _schema, keyname: site, displayname: Sites, _options: {page: infrastructure}, location: {displayname: Location, dataformat: string}}
- {classname: _schema, keyname: rack, displayname: Racks, _options: {page: infrastructure},
   site: {displayname: Site, dataformat: schema, dataformat_ext: site, order: 10},
   units: {displayname: Height (U), dataformat: int, dataformat_ext: gte_1 lte_60, order: 20},
   mgmt: {displayname: Management address, dataformat: ipv4, order: 30},
   installed: {displayname: Installed, dataformat: date, order: 40},
   tags: {displayname: Tags, dataformat: string, cardinal_max: 0, order: 50},
   notes: {displayname: Notes, dataformat: text, order: 60}}
- {classname: _dataview, keyname: rack_default, displayname: Racks, target_class: rack, content: "columns: [keyname, displayname, site, units, mgmt, tags]"}
- {classname: site, keyname: paris, displayname: Paris DC1, location: "12 Rue de la Paix"}
- {classname: site, keyname: lyon, displayname: Lyon DC2, location: "3 Quai Perrache"}
- {classname: rack, keyname: par-r01, displayname: Paris row 1, site: paris, units: 42, mgmt: 10.1.0.11, tags: [prod]}
- {classname: rack, keyname: par-r02, displayname: Paris row 2, site: paris, units: 42, mgmt: 10.1.0.12, tags: [prod, gpu]}
- {classname: rack, keyname: lyo-r01, displayname: Lyon row 1, site: lyon, units: 48, mgmt: 10.2.0.11, tags: [cold, spare]}
`

func TestBrowser(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	e := newEnv(t, "")
	e.load(browserData)
	base := e.srv.URL // http://127.0.0.1:port

	b := newChrome(t, bin)
	shot, run, clear, textOf := b.shot, b.run, b.clear, b.textOf

	b.signIn(base, "operator", "operator-pass-1")
	if s := textOf("#tile-data"); !strings.Contains(s, "schemas") {
		t.Fatalf("data tile: %q", s)
	}
	run("dashboard screenshot", shot("dashboard"))

	// Search a schema.
	run("search",
		chromedp.Click("#tile-data", chromedp.ByID),
		chromedp.WaitVisible(`a[href="/data/private/rack/"]`, chromedp.ByQuery),
		chromedp.Click(`a[href="/data/private/rack/"]`, chromedp.ByQuery),
		chromedp.WaitVisible("#search", chromedp.ByID),
		chromedp.SendKeys("#search", "paris", chromedp.ByID),
		chromedp.Click("#search-go", chromedp.ByID),
		chromedp.WaitVisible(`//p[@id="total"][contains(., "2 found")]`, chromedp.BySearch),
	)
	if s := textOf("#list"); !strings.Contains(s, "par-r02") || strings.Contains(s, "lyo-r01") {
		t.Fatalf("search result: %q", s)
	}
	run("list screenshot", shot("list"))

	// Create with an invalid value, then fix it.
	run("create invalid",
		chromedp.Click("#new", chromedp.ByID),
		chromedp.WaitVisible("#keyname", chromedp.ByID),
		chromedp.SendKeys("#keyname", "par-r03", chromedp.ByID),
		chromedp.SendKeys("#displayname", "Paris row 3", chromedp.ByID),
		chromedp.SendKeys("#f_site", "paris", chromedp.ByID),
		chromedp.SendKeys("#f_units", "99", chromedp.ByID),
		chromedp.SendKeys("#f_mgmt", "10.1.0.13", chromedp.ByID),
		chromedp.SendKeys("#f_tags", "prod", chromedp.ByID),
		chromedp.Click("#save", chromedp.ByID),
		chromedp.WaitVisible("#error-units", chromedp.ByID),
	)
	if s := textOf("#error-units"); !strings.Contains(s, "out of bounds") {
		t.Fatalf("units error: %q", s)
	}
	var kept string
	run("input kept", chromedp.Value("#displayname", &kept, chromedp.ByID))
	if kept != "Paris row 3" {
		t.Fatalf("the form lost the input: %q", kept)
	}
	run("form screenshot", shot("form"))
	run("fix and create",
		clear("f_units"),
		chromedp.SendKeys("#f_units", "42", chromedp.ByID),
		chromedp.Click("#save", chromedp.ByID),
		chromedp.WaitVisible(`//p[@class="flash"][contains(., "Created.")]`, chromedp.BySearch),
	)
	if in, err := e.db.Instance(context.Background(), "rack", "par-r03"); err != nil || in.Data["units"] != int64(42) || !in.IsEnabled {
		t.Fatalf("created rack: %+v %v", in, err)
	}

	// Edit.
	run("edit",
		chromedp.Click("#edit", chromedp.ByID),
		chromedp.WaitVisible("#f_units", chromedp.ByID),
		clear("f_units"),
		chromedp.SendKeys("#f_units", "47", chromedp.ByID),
		chromedp.Click("#save", chromedp.ByID),
		chromedp.WaitVisible(`//p[@class="flash"][contains(., "Saved.")]`, chromedp.BySearch),
	)
	if s := textOf("#v-units"); s != "47" {
		t.Fatalf("units after edit: %q", s)
	}

	// Rename a site; the racks' references follow.
	run("rename",
		chromedp.Navigate(base+"/data/private/site/paris/"),
		chromedp.WaitVisible("#referenced-by", chromedp.ByID),
		chromedp.Click("#rename", chromedp.ByID),
		chromedp.WaitVisible("#new_keyname", chromedp.ByID),
		clear("new_keyname"),
		chromedp.SendKeys("#new_keyname", "paris-dc1", chromedp.ByID),
		chromedp.Click("#confirm-rename", chromedp.ByID),
		chromedp.WaitVisible("#rename-report", chromedp.ByID),
	)
	if s := textOf("#rename-report"); !strings.Contains(s, "3 instance(s) referring to it followed") {
		t.Fatalf("rename report: %q", s)
	}
	run("renamed detail",
		chromedp.Click("#to-renamed", chromedp.ByID),
		chromedp.WaitVisible("#referenced-by", chromedp.ByID),
	)
	if s := textOf("#referenced-by"); !strings.Contains(s, "par-r03") {
		t.Fatalf("referenced by after rename: %q", s)
	}
	run("detail screenshot",
		chromedp.Navigate(base+"/data/private/rack/par-r03/"),
		chromedp.WaitVisible("#revisions", chromedp.ByID),
		shot("detail"),
	)
	if s := textOf("#v-site"); s != "paris-dc1" {
		t.Fatalf("rack's site after rename: %q", s)
	}

	// Delete.
	run("delete",
		chromedp.Click("#delete", chromedp.ByID),
		chromedp.WaitVisible("#confirm-delete", chromedp.ByID),
		chromedp.Click("#confirm-delete", chromedp.ByID),
		chromedp.WaitVisible(`//p[@class="flash"][contains(., "Deleted.")]`, chromedp.BySearch),
	)
	if _, err := e.db.Instance(context.Background(), "rack", "par-r03"); err == nil {
		t.Fatal("par-r03 still exists")
	}

	// Export CSV of the current view: the link's target, fetched with the browser's session.
	var csv string
	run("export csv",
		chromedp.Navigate(base+"/data/private/rack/?search=lyon"),
		chromedp.WaitVisible("#export-csv", chromedp.ByID),
		chromedp.Evaluate(`fetch(document.getElementById("export-csv").href).then(r => r.text())`, &csv,
			func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }),
	)
	// Split on CSV_DELIMITER (default ";"), the delimiter the import tool reads by default.
	if !strings.HasPrefix(csv, "keyname;displayname;site;units;mgmt;tags\n") || !strings.Contains(csv, "lyo-r01;Lyon row 1;lyon;48;10.2.0.11;cold, spare") || strings.Contains(csv, "par-r01") {
		t.Fatalf("CSV export:\n%s", csv)
	}

	// Sign out.
	run("sign out",
		chromedp.Click("#signout", chromedp.ByID),
		chromedp.WaitVisible("#signin", chromedp.ByID),
		chromedp.Navigate(base+"/data/private/rack/"),
		chromedp.WaitVisible("#signin", chromedp.ByID),
	)
	if n := e.queryInt("SELECT count(*) FROM sessions"); n != 0 {
		t.Fatalf("%d sessions after signing out", n)
	}
}
