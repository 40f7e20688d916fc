package console_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserReferencedBy: a site's page groups the racks that refer to it under their
// schema with the count; the "by Site" link opens the rack list filtered to them, and
// "show all" leaves the filter. A rack's management address links to its IPAM record.
func TestBrowserReferencedBy(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	e := newEnv(t, "")
	e.load(browserData)
	e.load(`- {classname: _role, keyname: operators, permissions: [p_data_access, p_data_read], _action: update}`)
	b := newChrome(t, bin)
	b.signIn(e.srv.URL, "operator", "operator-pass-1")
	b.run("site", chromedp.Navigate(e.srv.URL+"/data/private/site/paris/"), chromedp.WaitVisible(`#referenced-by .refgroup[data-schema="rack"]`, chromedp.ByQuery),
		chromedp.ScrollIntoView("#referenced-by", chromedp.ByID), b.shot("referenced_by"))
	if s := b.textOf(`.refgroup[data-schema="rack"] h3`); !strings.Contains(s, "Racks") || !strings.HasSuffix(strings.TrimSpace(s), "2") {
		t.Fatalf("the racks' group heading: %q, want Racks with the count 2", s)
	}
	b.run("filtered list", chromedp.Click(`.refgroup[data-schema="rack"] a[data-field="site"]`, chromedp.ByQuery), chromedp.WaitVisible("#filter", chromedp.ByID))
	if s := b.textOf("#list tbody"); !strings.Contains(s, "par-r01") || !strings.Contains(s, "par-r02") || strings.Contains(s, "lyo-r01") {
		t.Fatalf("the racks of paris: %q", s)
	}
	b.run("show all", chromedp.Click("#clear-filter", chromedp.ByID), chromedp.WaitNotPresent("#filter", chromedp.ByID))
	if s := b.textOf("#list tbody"); !strings.Contains(s, "lyo-r01") {
		t.Fatalf("every rack after show all: %q", s)
	}
	// The racks' management addresses were collected into IPAM by the load.
	b.run("rack", chromedp.Navigate(e.srv.URL+"/data/private/rack/par-r01/"), chromedp.WaitVisible("#v-mgmt a", chromedp.ByQuery),
		chromedp.Click("#v-mgmt a", chromedp.ByQuery), chromedp.WaitVisible("#fields", chromedp.ByID))
	var loc string
	b.run("where", chromedp.Location(&loc))
	if !strings.HasSuffix(loc, "/data/private/ipam_ip/0a01000b/") {
		t.Fatalf("the management address led to %s", loc)
	}
}
