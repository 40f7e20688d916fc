package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// An update's revision row records the old values of what changed and the whole new
// object; the diff page shows every field (the unchanged ones from the whole after),
// and both restore buttons put back the whole version from that row alone: with rows
// of the whole form mixed in (as an older release wrote them), after a rename (the
// history goes on under the new keyname), after the retention clean-up deleted older
// rows, and after writes without revision rows. The history on the instance's page
// lists the changed fields only, as before.
func TestRevisionRestoreFromDeltaRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, "")
	e.load(revisionData)
	w := e.browser()
	w.signIn("writer", "writer-pass-1")
	tok := w.csrf()
	e.loadAs("user:writer", `[{classname: rack, keyname: r2, units: 47, tags: [cold, spare]}]`)
	units := e.lastRevision("rack", "r2")
	e.loadAs("user:writer", `[{classname: rack, keyname: r2, displayname: Two, units: 47, tags: [warm]}]`)
	tags := e.lastRevision("rack", "r2")
	var delta int
	var before string
	if err := e.db.Reader().QueryRowContext(ctx, "SELECT delta, before FROM revisions WHERE id = ?", tags).Scan(&delta, &before); err != nil || delta != 1 || before != `{"data":{"tags":["cold","spare"]},"displayname":""}` {
		t.Fatalf("the update's row: delta %d, before %s, %v", delta, before, err)
	}
	// The diff shows the unchanged units (47) beside the changed tags.
	want(t, w.get(revURL(tags)), 200, `id="diff-units"`, "47", "<del>cold, spare</del>", "<ins>warm</ins>", "<ins>Two</ins>", `id="restore-before"`, `id="restore-after"`)
	// The instance's page lists the changes of each revision, and only those.
	p := w.get("/data/private/rack/r2/")
	want(t, p, 200, "warm")
	lacks(t, p, "absent")

	// The units revision as an older release wrote it: the whole object.
	e.exec(`UPDATE revisions SET delta = 0, before = ?, after = ? WHERE id = ?`,
		`{"data":{"tags":["cold","spare"],"units":48},"displayname":"","is_enabled":true,"keyname":"r2"}`,
		`{"data":{"tags":["cold","spare"],"units":47},"displayname":"","is_enabled":true,"keyname":"r2"}`, units)
	// Renamed since: the rename's row and the newer ones live under the new keyname.
	if _, err := testkit.Rename(t, e.db, "user:writer", "rack", "r2", "r2b"); err != nil {
		t.Fatal(err)
	}
	e.loadAs("user:writer", `[{classname: rack, keyname: r2b, displayname: Two, units: 46, tags: [warm]}]`)
	later := e.lastRevision("rack", "r2b")
	// The clean-up deletes what is older than the kept rows, never a newer one.
	e.exec(`UPDATE revisions SET created_at = '2000-01-01T00:00:00Z' WHERE id <= ?`, units)
	if n, _, err := e.db.PurgeRevisionsBatch(ctx, e.db.Now().AddDate(0, 0, -1), 0, 1000); err != nil || n == 0 {
		t.Fatalf("purge: %d %v", n, err)
	}
	// Under the old keyname the object is gone: refused, as before.
	want(t, w.post(revURL(tags), url.Values{"csrf": {tok}, "version": {"before"}}), http.StatusConflict, "rack r2 no longer exists")

	// "Restore the version before this change" of the newest update: units back to
	// 47, the rest as it is.
	p = w.post(revURL(later), url.Values{"csrf": {tok}, "version": {"before"}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("restore before: %d\n%s", p.status, p.body)
	}
	in, err := e.db.Instance(ctx, "rack", "r2b")
	if err != nil || in.Data["units"] != int64(47) || in.Displayname != "Two" || len(in.Data["tags"].([]any)) != 1 {
		t.Fatalf("restored before: %+v %v", in, err)
	}
	// "Restore this version" of the same update, now two changes back and after a
	// write without revision rows.
	e.loadAs("user:writer", `[{classname: rack, keyname: r2b, displayname: Three, units: 40}]`)
	testkit.MustLoad(t, e.db, `[{classname: rack, keyname: r2b, displayname: Four, units: 41, tags: [x, y]}]`, store.LoadOptions{System: true, NoRevisions: true})
	p = w.post(revURL(later), url.Values{"csrf": {tok}, "version": {"after"}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("restore after: %d\n%s", p.status, p.body)
	}
	in, err = e.db.Instance(ctx, "rack", "r2b")
	if err != nil || in.Data["units"] != int64(46) || in.Displayname != "Two" || fmt.Sprint(in.Data["tags"]) != "[warm]" {
		t.Fatalf("restored after: %+v %v", in, err)
	}
	// After all of it, the tags update (its object renamed away, the rows before it
	// purged) still shows its whole versions, from its own row.
	want(t, w.get(revURL(tags)), 200, "<del>cold, spare</del>", "<ins>warm</ins>", "47")
	// The rename's own row is whole: its before is the object under the old keyname.
	rename := e.queryInt("SELECT min(id) FROM revisions WHERE classname = 'rack' AND keyname = 'r2b'")
	want(t, w.get(revURL(rename)), 200, "<del>r2</del>", "<ins>r2b</ins>")
}
