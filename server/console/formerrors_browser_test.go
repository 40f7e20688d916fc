package console_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserFormMarksEveryField: a create form with four bad inputs (the keyname,
// a reference to nothing, a number out of bounds, an address that is none) marks all
// four at once, keeps the input, and saves once they are fixed: one round trip shows
// every problem.
func TestBrowserFormMarksEveryField(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	e := newEnv(t, "")
	e.load(browserData)
	base := e.srv.URL

	b := newChrome(t, bin)
	b.signIn(base, "operator", "operator-pass-1")
	b.run("create with four bad inputs",
		chromedp.Navigate(base+"/data/private/rack/?do=new"),
		chromedp.WaitVisible("#keyname", chromedp.ByID),
		chromedp.SendKeys("#keyname", "par r09", chromedp.ByID),
		chromedp.SendKeys("#displayname", "Paris row 9", chromedp.ByID),
		chromedp.SendKeys("#f_site", "nowhere", chromedp.ByID),
		chromedp.SendKeys("#f_units", "99", chromedp.ByID),
		chromedp.SendKeys("#f_mgmt", "10.1.0.300", chromedp.ByID),
		chromedp.SendKeys("#f_tags", "prod", chromedp.ByID),
		chromedp.Click("#save", chromedp.ByID),
		chromedp.WaitVisible("#error-units", chromedp.ByID),
	)
	for sel, want := range map[string]string{
		"#error-keyname": "whitespace",
		"#error-site":    `no site instance "nowhere"`,
		"#error-units":   "out of bounds",
		"#error-mgmt":    "not an IPv4 address",
	} {
		if s := b.textOf(sel); !strings.Contains(s, want) {
			t.Fatalf("%s = %q, want it to say %q", sel, s, want)
		}
	}
	var marked int
	b.run("count the marked rows", chromedp.Evaluate(`document.querySelectorAll("#instance-form .row.invalid").length`, &marked))
	if marked != 3 { // site, units, mgmt (the keyname's row shows its error under the input)
		t.Fatalf("%d field rows marked invalid, want 3", marked)
	}
	var kept string
	b.run("input kept", chromedp.Value("#f_mgmt", &kept, chromedp.ByID))
	if kept != "10.1.0.300" {
		t.Fatalf("the form lost the input: %q", kept)
	}
	if _, err := e.db.Instance(context.Background(), "rack", "par r09"); err == nil {
		t.Fatal("a refused form created the instance")
	}

	b.run("fix all and save",
		b.clear("keyname"), chromedp.SendKeys("#keyname", "par-r09", chromedp.ByID),
		b.clear("f_site"), chromedp.SendKeys("#f_site", "paris", chromedp.ByID),
		b.clear("f_units"), chromedp.SendKeys("#f_units", "42", chromedp.ByID),
		b.clear("f_mgmt"), chromedp.SendKeys("#f_mgmt", "10.1.0.19", chromedp.ByID),
		chromedp.Click("#save", chromedp.ByID),
		chromedp.WaitVisible(`//p[@class="flash"][contains(., "Created.")]`, chromedp.BySearch),
	)
	in, err := e.db.Instance(context.Background(), "rack", "par-r09")
	if err != nil || in.Data["units"] != int64(42) || in.Data["mgmt"] != "10.1.0.19" {
		t.Fatalf("created rack: %+v %v", in, err)
	}

	// A keyname that is taken is named with the values' problems, not before them.
	b.run("create a second par-r09 with a bad number",
		chromedp.Navigate(base+"/data/private/rack/?do=new"),
		chromedp.WaitVisible("#keyname", chromedp.ByID),
		chromedp.SendKeys("#keyname", "par-r09", chromedp.ByID),
		chromedp.SendKeys("#f_units", "0", chromedp.ByID),
		chromedp.SendKeys("#f_mgmt", "10.1.0.999", chromedp.ByID),
		chromedp.Click("#save", chromedp.ByID),
		chromedp.WaitVisible("#error-keyname", chromedp.ByID),
	)
	for sel, want := range map[string]string{
		"#error-keyname": "exists already",
		"#error-units":   "out of bounds",
		"#error-mgmt":    "not an IPv4 address",
	} {
		if s := b.textOf(sel); !strings.Contains(s, want) {
			t.Fatalf("taken keyname: %s = %q, want it to say %q", sel, s, want)
		}
	}
	if in, err := e.db.Instance(context.Background(), "rack", "par-r09"); err != nil || in.Data["units"] != int64(42) {
		t.Fatalf("the refused second create changed par-r09: %+v %v", in, err)
	}

	// The edit form marks every bad field too.
	b.run("edit par-r09 with three bad values",
		chromedp.Navigate(base+"/data/private/rack/par-r09/?do=edit"),
		chromedp.WaitVisible("#f_units", chromedp.ByID),
		b.clear("f_units"), chromedp.SendKeys("#f_units", "61", chromedp.ByID),
		b.clear("f_mgmt"), chromedp.SendKeys("#f_mgmt", "mgmt", chromedp.ByID),
		b.clear("f_site"), chromedp.SendKeys("#f_site", "atlantis", chromedp.ByID),
		chromedp.Click("#save", chromedp.ByID),
		chromedp.WaitVisible("#error-mgmt", chromedp.ByID),
	)
	for sel, want := range map[string]string{
		"#error-site":  `no site instance "atlantis"`,
		"#error-units": "out of bounds",
		"#error-mgmt":  "not an IPv4 address",
	} {
		if s := b.textOf(sel); !strings.Contains(s, want) {
			t.Fatalf("edit: %s = %q, want it to say %q", sel, s, want)
		}
	}
	if in, err := e.db.Instance(context.Background(), "rack", "par-r09"); err != nil || in.Data["units"] != int64(42) || in.Data["mgmt"] != "10.1.0.19" {
		t.Fatalf("the refused edit changed par-r09: %+v %v", in, err)
	}
}
