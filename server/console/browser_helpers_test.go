package console_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chrome is a headless chromium driven by chromedp for one test, with the helpers
// every browser test uses: b := newChrome(t, chromium(t)).
type chrome struct {
	t   *testing.T
	ctx context.Context
	// shots is where shot writes: DATASERVICE_SCREENSHOTS when set (docs/screenshots
	// is made so), else a temporary directory.
	shots string
}

// newChrome starts chromium (at bin) with an empty profile, 1280×860; it quits when
// the test ends, and every step of the test must be done within three minutes.
func newChrome(t *testing.T, bin string) *chrome {
	t.Helper()
	// Chromium may still be writing its profile for a moment after it is told to quit,
	// which makes t.TempDir's cleanup fail; this directory is removed with a few retries.
	profile, err := os.MkdirTemp("", "dataservice-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := 0; i < 20; i++ {
			if err = os.RemoveAll(profile); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("chromium profile %s left behind: %v", profile, err)
	})
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 860),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancelT)
	shots := os.Getenv("DATASERVICE_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	return &chrome{t: t, ctx: ctx, shots: shots}
}

// shot writes a full-page screenshot to <shots>/<name>.png.
func (b *chrome) shot(name string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		var buf []byte
		if err := chromedp.FullScreenshot(&buf, 100).Do(ctx); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(b.shots, name+".png"), buf, 0o644)
	})
}

// viewShot writes a screenshot of the window only to <shots>/<name>.png: a full-page
// one lays a narrow page out again at its content's width, which misplaces its edges.
func (b *chrome) viewShot(name string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		var buf []byte
		if err := chromedp.CaptureScreenshot(&buf).Do(ctx); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(b.shots, name+".png"), buf, 0o644)
	})
}

// run runs actions, failing the test with the page's address and text when one fails.
func (b *chrome) run(step string, actions ...chromedp.Action) {
	b.t.Helper()
	if err := chromedp.Run(b.ctx, actions...); err != nil {
		var loc, body string
		_ = chromedp.Run(b.ctx, chromedp.Location(&loc), chromedp.Text("body", &body, chromedp.ByQuery))
		b.t.Fatalf("%s: %v\nat %s:\n%s", step, err, loc, body)
	}
}

// clear empties an input the way a user selecting its text and deleting it would.
func (b *chrome) clear(id string) chromedp.Action {
	return chromedp.Evaluate(`document.getElementById("`+id+`").value = ""`, nil)
}

// textOf is the text of the first element sel matches.
func (b *chrome) textOf(sel string) string {
	b.t.Helper()
	var s string
	b.run("read "+sel, chromedp.Text(sel, &s, chromedp.ByQuery))
	return s
}

// signIn signs in as login with password and waits for the dashboard.
func (b *chrome) signIn(base, login, password string) {
	b.t.Helper()
	b.run("sign in as "+login,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible("#login", chromedp.ByID),
		chromedp.SendKeys("#login", login, chromedp.ByID),
		chromedp.SendKeys("#password", password, chromedp.ByID),
		chromedp.Click("#signin", chromedp.ByID),
		chromedp.WaitVisible("#dashboard", chromedp.ByID),
	)
}
