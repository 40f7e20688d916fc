package console_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// visible is whether the element sel matches is laid out (not display: none).
func (b *chrome) visible(sel string) bool {
	b.t.Helper()
	var ok bool
	b.run("visibility of "+sel, chromedp.Evaluate(`(function(){var e=document.querySelector(`+jsString(sel)+`);return !!e && e.getClientRects().length > 0})()`, &ok))
	return ok
}

// focused is the id of the element that has the focus ("" for none or no id).
func (b *chrome) focused() string {
	b.t.Helper()
	var id string
	b.run("focused element", chromedp.Evaluate(`document.activeElement ? document.activeElement.id : ""`, &id))
	return id
}

func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// key presses and releases the key that types k, as a keyboard does: one keyDown
// carrying the text (so a handler that prevents the keydown's default keeps the
// character from being typed, as in a browser), then keyUp.
func key(k string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		if err := input.DispatchKeyEvent(input.KeyDown).WithKey(k).WithText(k).Do(ctx); err != nil {
			return err
		}
		return input.DispatchKeyEvent(input.KeyUp).WithKey(k).Do(ctx)
	})
}

// TestBrowserNarrowLayout: at 400 px the sidebar hides behind the menu button, which
// opens and closes it; at full width the button is hidden and the sidebar shown.
func TestBrowserNarrowLayout(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	e := newEnv(t, "")
	e.load(browserData)
	b := newChrome(t, bin)
	b.signIn(e.srv.URL, "operator", "operator-pass-1")
	if !b.visible("#sidebar") || b.visible("#menu") {
		t.Fatal("at 1280 px the sidebar should be shown and the menu button hidden")
	}
	b.run("narrow", chromedp.EmulateViewport(400, 800), chromedp.Navigate(e.srv.URL+"/data/private/rack/"),
		chromedp.WaitVisible("#menu", chromedp.ByID))
	if b.visible("#sidebar") {
		t.Fatal("at 400 px the sidebar is shown before the menu button is pressed")
	}
	b.noSidewaysScroll(400)
	b.run("open the menu", chromedp.Click("#menu", chromedp.ByID), chromedp.WaitVisible("#sidebar", chromedp.ByID), b.viewShot("narrow_menu"))
	var expanded string
	b.run("aria", chromedp.AttributeValue("#menu", "aria-expanded", &expanded, nil, chromedp.ByID))
	if expanded != "true" {
		t.Fatalf("aria-expanded of the open menu: %q", expanded)
	}
	b.run("follow a link", chromedp.Click(`#sidebar a[href="/"]`, chromedp.ByQuery),
		chromedp.WaitVisible("#dashboard", chromedp.ByID))
	if b.visible("#sidebar") {
		t.Fatal("the sidebar is still open on the next page")
	}
	b.run("open and close", chromedp.Click("#menu", chromedp.ByID), chromedp.WaitVisible("#sidebar", chromedp.ByID),
		chromedp.Click("#menu", chromedp.ByID), chromedp.WaitNotVisible("#sidebar", chromedp.ByID))
}

// TestBrowserKeyboard: "/" focuses the search box, "g d" opens the dashboard, "?"
// shows the shortcuts; none of them acts while the user types in a field.
func TestBrowserKeyboard(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	e := newEnv(t, "")
	e.load(browserData)
	b := newChrome(t, bin)
	b.signIn(e.srv.URL, "operator", "operator-pass-1")
	base := e.srv.URL
	b.run("list", chromedp.Navigate(base+"/data/private/rack/"), chromedp.WaitVisible("#list", chromedp.ByID))
	if got := b.focused(); got == "search" {
		t.Fatal("the search box has the focus before / is typed")
	}
	b.run("slash", key("/"))
	if got := b.focused(); got != "search" {
		t.Fatalf("after /, the focus is on %q, want search", got)
	}
	var typed string
	b.run("type in the search box", key("g"), key("d"), key("?"), chromedp.Value("#search", &typed, chromedp.ByID))
	if typed != "gd?" {
		t.Fatalf("the search box holds %q, want the keys typed (gd?)", typed)
	}
	var loc string
	b.run("still here", chromedp.Location(&loc))
	if !strings.Contains(loc, "/data/private/rack/") || b.visible("#shortcuts") {
		t.Fatalf("typing in the search box triggered a shortcut: at %s, overlay %v", loc, b.visible("#shortcuts"))
	}
	b.run("help", b.clear("search"), chromedp.Evaluate(`document.activeElement.blur()`, nil), key("?"), chromedp.WaitVisible("#shortcuts", chromedp.ByID), b.shot("shortcuts"))
	if s := b.textOf("#shortcuts"); !strings.Contains(s, "Focus the search box") || !strings.Contains(s, "Go to the dashboard") {
		t.Fatalf("the shortcuts overlay: %q", s)
	}
	b.run("close help", chromedp.KeyEvent(kb.Escape), chromedp.WaitNotVisible("#shortcuts", chromedp.ByID))
	b.run("g d", chromedp.Evaluate(`document.activeElement.blur()`, nil), key("g"), key("d"), chromedp.WaitVisible("#dashboard", chromedp.ByID))
	b.run("a modifier is no shortcut", chromedp.Navigate(base+"/data/private/rack/"), chromedp.WaitVisible("#list", chromedp.ByID),
		chromedp.KeyEvent("/", chromedp.KeyModifiers(input.ModifierCtrl)))
	if got := b.focused(); got == "search" {
		t.Fatal("Ctrl+/ focused the search box")
	}
}
