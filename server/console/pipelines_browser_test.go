package console_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"dataservice/tasks"
)

// batchGate holds a pipeline task after its first committed batch while armed, so a
// browser test sees the task mid-run whatever the machine's speed.
type batchGate struct {
	mu      sync.Mutex
	armed   bool
	reached chan string
	release chan struct{}
}

func newBatchGate() *batchGate {
	return &batchGate{reached: make(chan string, 1), release: make(chan struct{})}
}

// arm holds the next task that ends its first batch.
func (g *batchGate) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.release = true, make(chan struct{})
}

// afterBatch is the runner's AfterBatch hook.
func (g *batchGate) afterBatch(handle string, n int) error {
	g.mu.Lock()
	hold := n == 1 && g.armed
	g.armed = false
	release := g.release
	g.mu.Unlock()
	if !hold {
		return nil
	}
	g.reached <- handle
	select {
	case <-release:
	case <-time.After(2 * time.Minute): // a failed test never released it
	}
	return nil
}

// wait waits until the armed task is held after its first batch.
func (g *batchGate) wait(t *testing.T) string {
	t.Helper()
	select {
	case h := <-g.reached:
		return h
	case <-time.After(time.Minute):
		t.Fatal("the task did not reach the end of its first batch within a minute")
	}
	return ""
}

// open lets the held task go on.
func (g *batchGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.release:
	default:
		close(g.release)
	}
}

// hosts is n hosts, the even ones already noted "checked".
func hosts(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		note := "new"
		if i%2 == 0 {
			note = "checked"
		}
		fmt.Fprintf(&b, "- {classname: host, keyname: host-%05d, note: %s}\n", i, note)
	}
	return b.String()
}

// TestBrowserPipelineRun drives the pipeline and task pages in chromium: run a pipeline
// over a few thousand instances, watch the page update live (held after the first
// batch for a screenshot mid-run) until the bar reaches 100%, and check the counters
// against the task's result read from the runner; then cancel a running task.
func TestBrowserPipelineRun(t *testing.T) {
	t.Parallel()
	bin := chromium(t)
	gate := newBatchGate()
	e := newRunEnv(t, 500, gate.afterBatch)
	t.Cleanup(gate.open) // runs before the runner stops
	e.load(pipelinePeople)
	const n = 3000
	e.load(hosts(n))
	total := int64(n + 3) // and h1..h3 of pipelinePeople
	e.loop.Start()
	ctx := context.Background()
	base := e.srv.URL

	b := newChrome(t, bin)
	run, textOf := b.run, b.textOf
	b.signIn(base, "ops", "ops-pass-1")

	// Run "tag" over host from the pipeline's page.
	gate.arm()
	run("open the pipeline",
		chromedp.Navigate(base+"/data/private/pipeline/"),
		chromedp.WaitVisible("#pipeline-list", chromedp.ByID),
		chromedp.Click(`a[href="/data/private/pipeline/tag/"]`, chromedp.ByQuery),
		chromedp.WaitVisible("#run-button", chromedp.ByID),
		chromedp.Click(`#schemas option[value="host"]`, chromedp.ByQuery),
		chromedp.Click("#run-button", chromedp.ByID),
		chromedp.WaitVisible("#bar", chromedp.ByID),
	)
	handle := gate.wait(t)
	var loc string
	run("task page", chromedp.Location(&loc))
	if !strings.HasSuffix(loc, "/data/private/task/"+handle+"/") {
		t.Fatalf("the run led to %s, want the page of task %s", loc, handle)
	}
	// Held after its first batch (at most 500 instances: a slow batch commits early), the
	// page shows it live (polling), with a rate once a second has passed since the start,
	// and the change sample so far.
	mid, err := e.runner.Get(ctx, handle)
	if err != nil {
		t.Fatal(err)
	}
	if mid.Progress.Done < 1 || mid.Progress.Done > 500 {
		t.Fatalf("held after its first batch with %d done", mid.Progress.Done)
	}
	run("mid-run progress",
		chromedp.WaitVisible(`//span[@id="done"][.="`+grouped(mid.Progress.Done)+`"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//span[@id="total"][.="3,003"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//span[@id="status"][.="running"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//span[@id="rate"][contains(., "/s")]`, chromedp.BySearch),
		chromedp.WaitVisible("#change-list", chromedp.ByID), // the change sample so far
		chromedp.Evaluate(`window.stillThisPage = true`, nil),
	)
	if s, want := textOf("#percent"), strconv.FormatFloat(mid.Progress.Percent, 'f', -1, 64)+"%"; s != want || mid.Progress.Percent >= 100 {
		t.Fatalf("percent mid-run: %q, want %s", s, want)
	}
	if s := textOf("#eta"); !strings.HasSuffix(s, "s") {
		t.Fatalf("ETA mid-run: %q", s)
	}
	run("mid-run screenshot", b.shot("task"))
	gate.open()

	// The bar reaches 100% on the same page (no reload), and the counters are the result's.
	var bar float64
	var same bool
	run("finished",
		chromedp.WaitVisible(`//span[@id="status"][.="succeeded"]`, chromedp.BySearch),
		chromedp.WaitVisible(`//strong[@id="percent"][.="100%"]`, chromedp.BySearch),
		// The page re-rendered the task's part once it finished (read after that swap).
		chromedp.WaitVisible(`#task[data-finished="true"] #change-list`, chromedp.ByQuery),
		chromedp.Evaluate(`document.getElementById("bar").value`, &bar),
		chromedp.Evaluate(`window.stillThisPage === true`, &same),
	)
	if bar != 100 || !same {
		t.Fatalf("finished: bar %v, same page %v", bar, same)
	}
	task, err := e.runner.Get(ctx, handle)
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != tasks.StatusSucceeded || task.Progress.Done != total {
		t.Fatalf("task: %s, %d of %d done", task.Status, task.Progress.Done, total)
	}
	res := task.Result
	for name, v := range map[string]int64{"scanned": res.Scanned, "updated": res.Updated, "unchanged": res.Unchanged,
		"deleted": res.Deleted, "errors": res.Errors, "discarded": res.Discarded} {
		if s := textOf("#c-" + name); s != grouped(v) {
			t.Fatalf("counter %s on the page: %q, the task's result: %d", name, s, v)
		}
	}
	if res.Scanned != total || res.Updated != n/2+2 || res.Unchanged != n/2+1 {
		t.Fatalf("result %+v: want %d scanned, %d updated", res, total, n/2+2)
	}
	if s := textOf("#done"); s != "3,003" {
		t.Fatalf("done on the page: %q", s)
	}

	// Cancel a running task: held after its first batch, the cancel is accepted while it
	// runs, and it stops after its current batch.
	gate.arm()
	run("run again",
		chromedp.Navigate(base+"/data/private/pipeline/tag/"),
		chromedp.WaitVisible("#run-button", chromedp.ByID),
		chromedp.Click(`#schemas option[value="host"]`, chromedp.ByQuery),
		chromedp.Click("#dryrun", chromedp.ByID),
		chromedp.Click("#run-button", chromedp.ByID),
		chromedp.WaitVisible("#bar", chromedp.ByID),
	)
	handle = gate.wait(t)
	run("cancel",
		chromedp.WaitVisible(`//span[@id="status"][.="running"]`, chromedp.BySearch),
		chromedp.Click("#cancel", chromedp.ByID),
		chromedp.WaitVisible("#cancel-note", chromedp.ByID),
	)
	var status string
	var requested int
	if err := e.db.Reader().QueryRowContext(context.Background(), "SELECT status, cancel_requested FROM tasks WHERE handle = ?", handle).Scan(&status, &requested); err != nil {
		t.Fatal(err)
	}
	if status != tasks.StatusRunning || requested != 1 {
		t.Fatalf("after the cancel click: status %s, cancel requested %d; want running with the cancel requested", status, requested)
	}
	gate.open()
	run("cancelled", chromedp.WaitVisible(`#task[data-finished="true"] #status.status-cancelled`, chromedp.ByQuery))
	if task, err = e.runner.Get(ctx, handle); err != nil {
		t.Fatal(err)
	}
	if task.Status != tasks.StatusCancelled || !task.DryRun || task.Progress.Done >= total {
		t.Fatalf("cancelled task: %s (dry run %v), %d of %d done", task.Status, task.DryRun, task.Progress.Done, total)
	}
	if s := textOf("#done"); s != grouped(task.Progress.Done) {
		t.Fatalf("done on the page of the cancelled task: %q, the task's: %d", s, task.Progress.Done)
	}
	var offered bool
	run("cancel button", chromedp.Evaluate(`document.getElementById("cancel") !== null`, &offered))
	if offered {
		t.Fatal("a cancelled task still offers cancel")
	}
}

// grouped is n as the console writes counts: a comma between groups of three digits.
func grouped(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
