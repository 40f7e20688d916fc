package console_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// wrapping is how a cell's text is laid out: the words (runs of non-space) drawn on
// more than one line, and the number of lines the words take.
type wrapping struct {
	Split []string
	Lines int
}

// wrapOf lays out the text of the element sel matches, word by word.
func (b *chrome) wrapOf(sel string) wrapping {
	b.t.Helper()
	var w wrapping
	b.run("wrapping of "+sel, chromedp.Evaluate(`(function(){
		var el = document.querySelector(`+jsString(sel)+`), out = {Split: [], Lines: 0}, tops = {};
		if (!el) { return {Split: ["(no element)"], Lines: 0}; }
		var walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT), n;
		while ((n = walk.nextNode())) {
			var re = /\S+/g, m;
			while ((m = re.exec(n.data))) {
				var r = document.createRange();
				r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
				var rects = r.getClientRects();
				if (rects.length !== 1) { var d = []; for (var i = 0; i < rects.length; i++) { d.push(Math.round(rects[i].left)+","+Math.round(rects[i].top)+","+Math.round(rects[i].width)); } out.Split.push(m[0] + " " + d.join(" ") + " " + getComputedStyle(n.parentNode).overflowWrap + "/" + getComputedStyle(n.parentNode).wordBreak); continue; }
				tops[Math.round(rects[0].top)] = true;
			}
		}
		out.Lines = Object.keys(tops).length;
		return out;
	})()`, &w))
	return w
}

// TestBrowserLongValuesWrap: in a list and on a detail page, a long value wraps
// between its words and never inside one, even a word wider than the screen, at full
// width and at 400 px; the page itself never scrolls sideways.
func TestBrowserLongValuesWrap(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	e := newEnv(t, "")
	e.load(browserData)
	sentence := strings.Repeat("the cold aisle containment of this row was rebuilt in spring ", 4)
	token := "rack-" + strings.Repeat("0123456789abcdef", 6) // wider than 400 px
	e.load(`- {classname: rack, keyname: par-r03, displayname: "` + sentence + `", site: paris, units: 42, tags: [` + token + `], notes: "` + sentence + `"}`)
	b := newChrome(t, bin)
	b.signIn(e.srv.URL, "operator", "operator-pass-1")
	for _, width := range []int64{1280, 400} {
		b.run("list", chromedp.EmulateViewport(width, 860), chromedp.Navigate(e.srv.URL+"/data/private/rack/?search=par-r03"),
			chromedp.WaitVisible("#list", chromedp.ByID))
		// The list's second column is the display name, its last the tags.
		name, tag := b.wrapOf("#list tbody tr td:nth-child(2)"), b.wrapOf("#list tbody tr td:last-child")
		if len(name.Split) > 0 || name.Lines < 2 {
			t.Fatalf("at %d px, the list's long display name: %+v, want it on several lines, no word split", width, name)
		}
		if len(tag.Split) > 0 || tag.Lines != 1 {
			t.Fatalf("at %d px, the list's long tag: %+v, want it whole on one line", width, tag)
		}
		b.noSidewaysScroll(width)
		b.run("detail", chromedp.Navigate(e.srv.URL+"/data/private/rack/par-r03/"), chromedp.WaitVisible("#fields", chromedp.ByID))
		for _, sel := range []string{"#v-displayname", "#v-notes"} {
			if w := b.wrapOf(sel); len(w.Split) > 0 || w.Lines < 2 {
				t.Fatalf("at %d px, %s: %+v, want it on several lines, no word split", width, sel, w)
			}
		}
		if w := b.wrapOf("#v-tags"); len(w.Split) > 0 || w.Lines != 1 {
			t.Fatalf("at %d px, the detail's long tag: %+v, want it whole on one line", width, w)
		}
		b.noSidewaysScroll(width)
	}
}

// noSidewaysScroll fails the test when the page is wider than the window less its
// vertical scroll bar (a wide table scrolls in its own box instead).
func (b *chrome) noSidewaysScroll(width int64) {
	b.t.Helper()
	var over bool
	b.run("page width", chromedp.Evaluate(`document.documentElement.scrollWidth > document.documentElement.clientWidth`, &over))
	if over {
		var loc, wide string
		b.run("where", chromedp.Location(&loc), chromedp.Evaluate(`Array.from(document.querySelectorAll("body *")).filter(function(e){return e.getBoundingClientRect().right > document.documentElement.clientWidth}).filter(function(e){return !e.closest(".scroll-x")}).slice(0, 8).map(function(e){return e.tagName + "#" + e.id + "." + e.className + " " + Math.round(e.getBoundingClientRect().right)}).join("; ") + " scrollWidth " + document.documentElement.scrollWidth + " clientWidth " + document.documentElement.clientWidth + " inner " + window.innerWidth`, &wide))
		b.t.Fatalf("at %d px, %s is wider than the window: %s", width, loc, wide)
	}
}
