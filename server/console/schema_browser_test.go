package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// TestSchemaBrowser drives the schema pages as a person would: the list with its
// counts, a schema's page, creating a schema, adding a field (preview, then apply),
// deleting one (the preview names how many instances it clears) and changing one (the
// preview names how many instances lack a value the new minimum asks for). A reader
// without the schema permission sees no form, and a post of theirs is refused. It takes
// the screenshots of the schema pages.
func TestSchemaBrowser(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	e := newSchemaEnv(t)
	base := e.srv.URL
	b := newChrome(t, bin)
	run, textOf := b.run, b.textOf

	b.signIn(base, "editor", "editor-pass-1")
	run("list",
		chromedp.Navigate(base+"/data/private/_schema/"),
		chromedp.WaitVisible("#schema-server", chromedp.ByID),
	)
	if s := textOf("#schema-server .count"); s != "1,250" {
		t.Fatalf("server's count: %q", s)
	}

	run("create a schema",
		chromedp.Click("#new-schema", chromedp.ByID),
		chromedp.WaitVisible("#keyname", chromedp.ByID),
		chromedp.SendKeys("#keyname", "switch", chromedp.ByID),
		chromedp.SendKeys("#displayname", "Switches", chromedp.ByID),
		chromedp.Click("#preview", chromedp.ByID),
		chromedp.WaitVisible("#schema-preview", chromedp.ByID),
	)
	if _, err := e.db.Schema(context.Background(), "switch"); err == nil {
		t.Fatal("the preview created the schema")
	}
	run("apply the creation",
		chromedp.Click("#apply", chromedp.ByID),
		chromedp.WaitVisible(`//p[@class="flash"][contains(., "Created.")]`, chromedp.BySearch),
	)
	if _, err := e.db.Schema(context.Background(), "switch"); err != nil {
		t.Fatalf("switch not created: %v", err)
	}

	run("add a field with a preview",
		chromedp.Navigate(base+"/data/private/_schema/server/"),
		chromedp.WaitVisible("#add-field", chromedp.ByID),
		chromedp.Click("#add-field", chromedp.ByID),
		chromedp.WaitVisible("#keyname", chromedp.ByID),
		chromedp.SendKeys("#keyname", "rack", chromedp.ByID),
		chromedp.SendKeys("#displayname", "Rack", chromedp.ByID),
		chromedp.SetValue("#dataformat", "schema", chromedp.ByID),
		chromedp.SendKeys("#dataformat_ext", "site", chromedp.ByID),
		chromedp.Click("#preview", chromedp.ByID),
		chromedp.WaitVisible("#schema-preview", chromedp.ByID),
	)
	if s := textOf("#schema-preview"); !strings.Contains(s, "The 1,250 server instances existing now get no value for rack.") {
		t.Fatalf("add preview: %q", s)
	}
	if sch, _ := e.db.Schema(context.Background(), "server"); sch.Field("rack") != nil {
		t.Fatal("the preview added the field")
	}
	run("apply the field",
		chromedp.Click("#apply", chromedp.ByID),
		chromedp.WaitVisible(`//p[@class="flash"][contains(., "Saved.")]`, chromedp.BySearch),
		chromedp.WaitVisible("#field-rack", chromedp.ByID),
	)
	if s := textOf("#refs-out"); !strings.Contains(s, "rack (schema) → site") {
		t.Fatalf("references out: %q", s)
	}
	run("schema screenshot", b.shot("schema"))

	run("delete a field: its preview",
		chromedp.Click("#delete-notes", chromedp.ByID),
		chromedp.WaitVisible("#schema-preview", chromedp.ByID),
	)
	if s := textOf("#schema-preview"); !strings.Contains(s, "Deleting notes clears it on 1,200 server instances (of 1,250).") {
		t.Fatalf("delete preview: %q", s)
	}
	run("delete preview screenshot", b.shot("schema_delete_field"))
	run("confirm the deletion",
		chromedp.Click("#apply", chromedp.ByID),
		chromedp.WaitVisible(`//p[@class="flash"][contains(., "Deleted.")]`, chromedp.BySearch),
	)
	if n := e.queryInt("SELECT count(*) FROM instances WHERE classname = 'server' AND data ->> 'notes' IS NOT NULL"); n != 0 {
		t.Fatalf("%d servers still hold notes", n)
	}
	var fields string
	run("fields after the deletion", chromedp.Text("#fields", &fields, chromedp.ByID))
	if strings.Contains(fields, "notes") {
		t.Fatalf("notes still listed: %q", fields)
	}

	run("change a field: its preview",
		chromedp.Click("#change-units", chromedp.ByID),
		chromedp.WaitVisible("#cardinal_min", chromedp.ByID),
		b.clear("cardinal_min"),
		chromedp.SendKeys("#cardinal_min", "1", chromedp.ByID),
		chromedp.Click("#preview", chromedp.ByID),
		chromedp.WaitVisible("#schema-preview", chromedp.ByID),
	)
	if s := textOf("#schema-preview"); !strings.Contains(s, "1,250 server instances have no value for units: updating one fails until the update gives it one.") {
		t.Fatalf("change preview: %q", s)
	}
	if sch, _ := e.db.Schema(context.Background(), "server"); sch.Field("units").CardinalMin != 0 {
		t.Fatal("the preview changed the field")
	}
	run("apply the change",
		chromedp.Click("#apply", chromedp.ByID),
		chromedp.WaitVisible(`//p[@class="flash"][contains(., "Saved.")]`, chromedp.BySearch),
	)
	if s := textOf("#field-units"); !strings.Contains(s, "1–1") {
		t.Fatalf("units after the change: %q", s)
	}

	// A reader sees the pages without a form; their post is refused.
	run("sign out", chromedp.Click("#signout", chromedp.ByID), chromedp.WaitVisible("#signin", chromedp.ByID))
	b.signIn(base, "reader", "reader-pass-1")
	var forms int
	run("reader's schema page",
		chromedp.Navigate(base+"/data/private/_schema/server/"),
		chromedp.WaitVisible("#fields", chromedp.ByID),
		chromedp.Evaluate(`document.querySelectorAll("form:not(.signout), #add-field, [id^=delete-], [id^=change-]").length`, &forms),
	)
	if forms != 0 {
		t.Fatalf("the reader sees %d forms or form links", forms)
	}
	var status int
	run("reader's post", chromedp.Evaluate(`(async () => {
		const csrf = document.querySelector('input[name=csrf]').value;
		const r = await fetch("/data/private/_schema/server/?do=delete_field&field=hostname",
			{method: "POST", body: new URLSearchParams({csrf: csrf, previewed: "x"})});
		return r.status;
	})()`, &status, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if status != http.StatusForbidden {
		t.Fatalf("reader's post: %d", status)
	}
}
