package console_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserPipelineRunForm: the dry-run checkbox sits beside its label, clicking the
// label's text ticks it, and a run with it ticked is a dry run; the "Instance" button
// says what it opens.
func TestBrowserPipelineRunForm(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	e := newRunEnv(t, 100, nil)
	e.load(pipelinePeople)
	b := newChrome(t, bin)
	b.signIn(e.srv.URL, "padmin", "padmin-pass-1")
	b.run("run form", chromedp.Navigate(e.srv.URL+"/data/private/pipeline/tag/"), chromedp.WaitVisible("#run-form", chromedp.ByID),
		b.shot("pipeline_run_form"))
	var box struct{ BoxW, BoxTop, TextTop, TextBottom float64 }
	b.run("geometry", chromedp.Evaluate(`(function(){
		var cb = document.getElementById("dryrun").getBoundingClientRect();
		var r = document.createRange(); r.selectNodeContents(document.getElementById("dryrun-text"));
		var tx = r.getBoundingClientRect();
		return {BoxW: cb.width, BoxTop: cb.top, TextTop: tx.top, TextBottom: tx.bottom};
	})()`, &box))
	if box.BoxW > 40 || box.BoxTop < box.TextTop-8 || box.BoxTop > box.TextBottom {
		t.Fatalf("the dry-run checkbox is not beside its label: %+v", box)
	}
	// padmin may only dry-run (no write permission on any schema): the box starts ticked.
	var ticked bool
	b.run("ticked", chromedp.Evaluate(`document.getElementById("dryrun").checked`, &ticked))
	if !ticked || !strings.Contains(b.textOf("#dryrun-text"), "the only run your permissions allow") {
		t.Fatalf("for a user who may only dry-run, the box is ticked %v, its label %q", ticked, b.textOf("#dryrun-text"))
	}
	b.run("click the label", chromedp.Click("#dryrun-text", chromedp.ByID), chromedp.Evaluate(`document.getElementById("dryrun").checked`, &ticked))
	if ticked {
		t.Fatal("clicking the label's text did not untick the checkbox")
	}
	if s := b.textOf("#instance-help"); !strings.Contains(s, "_pipeline") {
		t.Fatalf("the Instance button's explanation: %q", s)
	}
}
