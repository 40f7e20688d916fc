package console_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

const revisionBrowserData = `
- {classname: _user, keyname: operator, displayname: Olivia Operator, password: operator-pass-1}
- {classname: _user, keyname: auditor, displayname: Arthur Auditor, password: auditor-pass-1}
- {classname: _role, keyname: operators, permissions: [p_data_access, p_data_read, p_data_create, p_data_update, p_data_delete], users: [operator]}
- {classname: _role, keyname: auditors, permissions: [p_data_access, p_data_read, p_conf_view], users: [auditor]}
- {classname: _schema, keyname: rack, displayname: Racks,
   units: {displayname: Height (U), dataformat: int, dataformat_ext: gte_1 lte_60, order: 10},
   notes: {displayname: Notes, dataformat: text, order: 20}}
- {classname: rack, keyname: par-r01, displayname: Paris row 1, units: 42, notes: "cold aisle"}
- {classname: rack, keyname: par-r02, displayname: Paris row 2, units: 42}
`

func TestBrowserRevisionsAndConfiguration(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	ctx := context.Background()
	e := newEnv(t, "")
	e.load(revisionBrowserData)
	base := e.srv.URL
	b := newChrome(t, bin)
	run, clear, textOf := b.run, b.clear, b.textOf

	// Edit a rack.
	b.signIn(base, "operator", "operator-pass-1")
	run("edit",
		chromedp.Navigate(base+"/data/private/rack/par-r01/"),
		chromedp.WaitVisible("#edit", chromedp.ByID),
		chromedp.Click("#edit", chromedp.ByID),
		chromedp.WaitVisible("#f_units", chromedp.ByID),
		clear("f_units"),
		chromedp.SendKeys("#f_units", "47", chromedp.ByID),
		clear("f_notes"),
		chromedp.SendKeys("#f_notes", "hot aisle", chromedp.ByID),
		chromedp.Click("#save", chromedp.ByID),
		chromedp.WaitVisible(`//p[@class="flash"][contains(., "Saved.")]`, chromedp.BySearch),
	)
	edit := e.lastRevision("rack", "par-r01")

	// Find it on the revisions page with the filters, and open its diff.
	run("filter revisions",
		chromedp.Click(`nav.sidebar a[href="/data/private/revision/"]`, chromedp.ByQuery),
		chromedp.WaitVisible("#revision-filter", chromedp.ByID),
		chromedp.SendKeys("#filter-class", "rack", chromedp.ByID),
		chromedp.SendKeys("#filter-keyname", "par-r01", chromedp.ByID),
		chromedp.SetValue("#filter-action", "update", chromedp.ByID),
		chromedp.Click("#filter-go", chromedp.ByID),
		// The filtered page: its inputs hold the filter as their value attribute.
		chromedp.WaitVisible(`input#filter-keyname[value="par-r01"]`, chromedp.ByQuery),
		chromedp.WaitVisible("#revision-list", chromedp.ByID),
	)
	if s := textOf("#revision-list tbody"); !strings.Contains(s, "par-r01") || !strings.Contains(s, "user:operator") || strings.Contains(s, "par-r02") || strings.Contains(s, "create") {
		t.Fatalf("filtered revisions: %q", s)
	}
	run("open the diff",
		chromedp.Click("#revision-list tbody tr:first-child a.diff-link", chromedp.ByQuery),
		chromedp.WaitVisible("#diff", chromedp.ByID),
	)
	if s := textOf("#diff-units"); !strings.Contains(s, "42") || !strings.Contains(s, "47") {
		t.Fatalf("units in the diff: %q", s)
	}
	if s := textOf("#diff-notes"); !strings.Contains(s, "cold aisle") || !strings.Contains(s, "hot aisle") {
		t.Fatalf("notes in the diff: %q", s)
	}
	run("diff screenshot", b.shot("revision_diff"))

	// Restore the version before the edit: the values come back, as a new revision.
	run("restore",
		chromedp.Click("#restore-before", chromedp.ByID),
		chromedp.WaitVisible(`//p[@class="flash"][contains(., "Restored")]`, chromedp.BySearch),
	)
	if s := textOf("#v-units"); s != "42" {
		t.Fatalf("units after the restore: %q", s)
	}
	if s := textOf("#v-notes"); s != "cold aisle" {
		t.Fatalf("notes after the restore: %q", s)
	}
	restored := e.lastRevision("rack", "par-r01")
	if restored <= edit {
		t.Fatalf("no new revision: %d after %d", restored, edit)
	}
	if s := textOf("#revisions"); strings.Count(s, "user:operator") != 2 {
		t.Fatalf("the detail's revisions should show the edit and the restore: %q", s)
	}
	in, err := e.db.Instance(ctx, "rack", "par-r01")
	if err != nil || in.Data["units"] != int64(42) || in.Data["notes"] != "cold aisle" {
		t.Fatalf("stored after the restore: %+v %v", in, err)
	}
	run("sign out", chromedp.Click("#signout", chromedp.ByID), chromedp.WaitVisible("#signin", chromedp.ByID))

	// An administrator changes a configuration entry; an invalid one first.
	b.signIn(base, "admin", adminPassword)
	run("invalid configuration",
		chromedp.Navigate(base+"/data/private/configuration/"),
		chromedp.WaitVisible("#conf-form", chromedp.ByID),
		clear("v-DATA_DEFAULT_SIZE"),
		chromedp.SendKeys("#v-DATA_DEFAULT_SIZE", "many", chromedp.ByID),
		chromedp.Click("#conf-save", chromedp.ByID),
		chromedp.WaitVisible("#error-DATA_DEFAULT_SIZE", chromedp.ByID),
	)
	if s := textOf("#error-DATA_DEFAULT_SIZE"); !strings.Contains(s, "not an integer") {
		t.Fatalf("configuration error: %q", s)
	}
	run("change configuration",
		clear("v-DATA_DEFAULT_SIZE"),
		chromedp.SendKeys("#v-DATA_DEFAULT_SIZE", "150", chromedp.ByID),
		chromedp.Click("#conf-save", chromedp.ByID),
		chromedp.WaitVisible(`//p[@class="flash"][contains(., "Saved.")]`, chromedp.BySearch),
	)
	if v := e.db.ConfigValue(ctx, "DATA_DEFAULT_SIZE"); v != "150" {
		t.Fatalf("DATA_DEFAULT_SIZE after saving: %q", v)
	}
	run("sign out", chromedp.Click("#signout", chromedp.ByID), chromedp.WaitVisible("#signin", chromedp.ByID))

	// A p_conf_view user sees it, cannot change it: no inputs, and a post is refused.
	b.signIn(base, "auditor", "auditor-pass-1")
	var inputs int
	run("read-only configuration",
		chromedp.Navigate(base+"/data/private/configuration/"),
		chromedp.WaitVisible("#conf-readonly", chromedp.ByID),
		chromedp.Evaluate(`document.querySelectorAll("#configuration input, #conf-save").length`, &inputs),
	)
	if s := textOf("#v-DATA_DEFAULT_SIZE"); s != "150" || inputs != 0 {
		t.Fatalf("read-only page: value %q, %d inputs", s, inputs)
	}
	var status int
	run("post as the auditor",
		chromedp.Evaluate(`fetch("/data/private/configuration/", {method: "POST", body: new URLSearchParams({
			csrf: document.querySelector("input[name=csrf]").value, v_DATA_DEFAULT_SIZE: "300"})}).then(r => r.status)`, &status,
			func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }),
	)
	if v := e.db.ConfigValue(ctx, "DATA_DEFAULT_SIZE"); status != 403 || v != "150" {
		t.Fatalf("auditor's post: status %d, DATA_DEFAULT_SIZE %q", status, v)
	}
}
