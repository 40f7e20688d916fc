package console_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"dataservice/store"
)

// TestBrowserEventRule drives chromium through an event rule's life in the console:
// create it through the form with a signing secret (the secret never comes back, on
// the detail page or the edit form), then redeliver a dead event of it from the events
// tool. It takes the screenshots of the rule's form and of the events tool.
func TestBrowserEventRule(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	e := newEnv(t, "")
	e.load(eventPeople)
	base := e.srv.URL
	b := newChrome(t, bin)
	b.signIn(base, "evreader", "evreader-pass-1")

	const secret = "browser-secret-4242"
	b.run("fill the new rule's form",
		chromedp.Navigate(base+"/data/private/_eventrule/?do=new"),
		chromedp.WaitVisible("#keyname", chromedp.ByID),
		chromedp.SendKeys("#keyname", "site_hook", chromedp.ByID),
		chromedp.SendKeys("#displayname", "Sites to the CMDB", chromedp.ByID),
		chromedp.SendKeys("#f_description", "Tell the CMDB about new and moved sites", chromedp.ByID),
		chromedp.SendKeys("#f_schemas", "site", chromedp.ByID),
		chromedp.Click("#f_actions_create", chromedp.ByID),
		chromedp.Click("#f_actions_update", chromedp.ByID),
		chromedp.SendKeys("#f_condition", "[changed, location]", chromedp.ByID),
		chromedp.SendKeys("#f_webhook_url", "https://cmdb.example.net/hooks/sites", chromedp.ByID),
		chromedp.SendKeys("#f_secret", secret, chromedp.ByID),
		b.shot("eventrule_form"),
		chromedp.Click("#save", chromedp.ByID),
		chromedp.WaitVisible(`//p[@class="flash"][contains(., "Created.")]`, chromedp.BySearch),
	)
	if s := b.textOf("#v-secret"); s != "set (never shown)" {
		t.Fatalf("the detail page's secret: %q", s)
	}
	if s := b.textOf("#v-author"); s != "user:evreader" {
		t.Fatalf("the detail page's author: %q", s)
	}
	in, err := e.db.Instance(context.Background(), "_eventrule", "site_hook")
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := in.Data["secret"].(string)
	if stored == "" || stored == secret {
		t.Fatalf("the secret is stored as %q", stored)
	}
	if got := strings.Join(texts(in.Data["actions"]), ","); got != "create,update" {
		t.Fatalf("actions %q", got)
	}
	var html, typed string
	b.run("the edit form",
		chromedp.Click("#edit", chromedp.ByID),
		chromedp.WaitVisible("#f_secret", chromedp.ByID),
		chromedp.Value("#f_secret", &typed, chromedp.ByID),
		chromedp.OuterHTML("html", &html, chromedp.ByQuery),
	)
	if typed != "" || strings.Contains(html, secret) || strings.Contains(html, stored) {
		t.Fatalf("the edit form shows the secret (input %q)", typed)
	}
	if s := b.textOf("#help-secret"); !strings.Contains(s, "A value is stored.") {
		t.Fatalf("the secret's note: %q", s)
	}

	// A dead event of the rule, and two pending ones, for the events tool.
	ev := deadEvent(t, e, "nantes")
	e.load("- {classname: site, keyname: brest, location: Port 2}\n- {classname: site, keyname: lille, location: Gare 3}")
	row := "#event-" + ev.ID
	b.run("the events tool",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible("#dead-events", chromedp.ByID),
		chromedp.Click(`#dead-events a`, chromedp.ByQuery),
		chromedp.WaitVisible(row, chromedp.ByID),
		chromedp.Navigate(base+"/data/private/event_queue/"),
		chromedp.WaitVisible(row, chromedp.ByID),
		b.shot("events"),
	)
	if s := b.textOf(row); !strings.Contains(s, "receiver answered 502 Bad Gateway") || !strings.Contains(s, "nantes") || !strings.Contains(s, "502") {
		t.Fatalf("the dead event's row: %q", s)
	}
	b.run("redeliver",
		chromedp.Click("#redeliver-"+ev.ID, chromedp.ByID),
		chromedp.WaitVisible(`//p[@class="flash"][contains(., "Redelivery queued")]`, chromedp.BySearch),
	)
	if st, n := eventStatus(t, e, ev.ID); st != store.EventPending || n != 0 {
		t.Fatalf("after redelivery: %s with %d attempts, want pending with 0", st, n)
	}
	if s := b.textOf("#count-dead"); s != "0" {
		t.Fatalf("dead events after redelivery: %q", s)
	}
}
