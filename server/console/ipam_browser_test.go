package console_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestIPAMBrowser opens the subnets from the dashboard tile, opens a subnet, and finds
// an address: its subnet and its holder. It takes the subnet page's screenshot.
func TestIPAMBrowser(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	e := ipamEnv(t)
	// A few more hosts in the servers' subnet, so the page looks like one in use.
	var more strings.Builder
	for i, h := range []int{20, 21, 22, 23, 40, 41, 60} {
		fmt.Fprintf(&more, "- {classname: ipam_ip, displayname: 10.1.2.%d, hostname: srv%02d.paris, description: rack 2 unit %d}\n", h, i+1, 10+i)
	}
	e.load(more.String())
	base := e.srv.URL

	b := newChrome(t, bin)
	b.signIn(base, "netops", "netops-pass-1")
	b.run("subnets",
		chromedp.Click("#tile-ipam", chromedp.ByID),
		chromedp.WaitVisible("table.ipam-subnets", chromedp.ByQuery),
	)
	if s := b.textOf("table.ipam-subnets"); !strings.Contains(s, "10.1.2.0/24") || !strings.Contains(s, "10 / 254 · 3.9%") {
		t.Fatalf("subnets table: %q", s)
	}
	b.run("open a subnet",
		chromedp.Click(`a[href="/data/private/ipam/10.1.2.0/24/"]`, chromedp.ByQuery),
		chromedp.WaitVisible("#addresses", chromedp.ByID),
	)
	if s := b.textOf("#addresses"); !strings.Contains(s, "10.1.2.3 – 10.1.2.9") || !strings.Contains(s, "srv07.paris") {
		t.Fatalf("addresses: %q", s)
	}
	if s := b.textOf("#subnet-usage"); !strings.Contains(s, "10 / 254") {
		t.Fatalf("usage: %q", s)
	}
	b.run("subnet screenshot", b.shot("ipam_subnet"))

	b.run("find an IP",
		chromedp.SendKeys("#ip", "10.1.2.1", chromedp.ByID),
		chromedp.Click("#find-go", chromedp.ByID),
		chromedp.WaitVisible("#find-result", chromedp.ByID),
	)
	if s := b.textOf("#containing"); !strings.Contains(s, "10.1.2.0/24") || !strings.Contains(s, "10.0.0.0/8") || strings.Contains(s, "192.168") {
		t.Fatalf("containing subnets: %q", s)
	}
	if s := b.textOf("#holders"); !strings.Contains(s, "s1") || !strings.Contains(s, "mgmt") || strings.Contains(s, "secret_box") {
		t.Fatalf("holders: %q", s)
	}
	b.run("open the holder",
		chromedp.Click(`#holders a[href="/data/private/box/s1/"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`//h1[contains(., "s1")]`, chromedp.BySearch),
	)

	// Bad input is named on the page.
	b.run("find a bad address",
		chromedp.Navigate(base+"/data/private/ipam/find/"),
		chromedp.WaitVisible("#ip", chromedp.ByID),
		chromedp.SendKeys("#ip", "10.1.2.300", chromedp.ByID),
		chromedp.Click("#find-go", chromedp.ByID),
		chromedp.WaitVisible("#find-error", chromedp.ByID),
	)
	if s := b.textOf("#find-error"); !strings.Contains(s, `"10.1.2.300" is not an IPv4 address`) {
		t.Fatalf("error: %q", s)
	}
}
