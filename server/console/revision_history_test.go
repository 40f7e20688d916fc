package console_test

// Restoring a version from the console gives the object as it was, whatever was
// written since without revision rows.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// A field removed from the schema (its values go with it, without instance
// revisions) and added again: "Restore the version before this change" of an update
// that did not touch the field puts the field's value back as the version held it.
func TestRevisionRestoreAfterFieldDroppedAndAddedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, "")
	e.load(revisionData)
	w := e.browser()
	w.signIn("writer", "writer-pass-1")
	tok := w.csrf()
	e.loadAs("user:writer", `[{classname: rack, keyname: r2, units: 47, tags: [cold, spare]}]`)
	rev := e.lastRevision("rack", "r2")
	// An administrator drops the field tags by mistake, and adds it again.
	e.loadAs("user:admin", `[{classname: _schema, keyname: rack, tags: {_action: delete}}]`)
	e.loadAs("user:admin", `[{classname: _schema, keyname: rack, tags: {dataformat: string, cardinal_max: 0}}]`)
	// The diff of the update shows the version before it, with its tags.
	if d := w.get(revURL(rev)); d.status != 200 || !strings.Contains(d.body, "cold, spare") {
		t.Errorf("the diff of revision %d does not show the tags the version before it held (%d)", rev, d.status)
	}
	p := w.post(revURL(rev), url.Values{"csrf": {tok}, "version": {"before"}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("restore before: %d\n%s", p.status, p.body)
	}
	in, err := e.db.Instance(ctx, "rack", "r2")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(in.Data["units"]) != "48" || fmt.Sprint(in.Data["tags"]) != "[cold spare]" {
		t.Errorf("restored the version before revision %d: %v, want units 48 and tags [cold spare]", rev, in.Data)
	}
}

// A write without revision rows (a start-up reload of built-ins, or any NoRevisions
// load) after an update: "Restore this version" of the update gives the object as the
// update left it, and "Restore the version before this change" the object before it.
func TestRevisionRestoreAfterAWriteWithoutRevision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, "")
	e.load(revisionData)
	w := e.browser()
	w.signIn("writer", "writer-pass-1")
	tok := w.csrf()
	e.loadAs("user:writer", `[{classname: rack, keyname: r2, units: 47, tags: [cold, spare]}]`)
	rev := e.lastRevision("rack", "r2")
	testkit.MustLoad(t, e.db, `[{classname: rack, keyname: r2, units: 47, tags: [hot]}]`, store.LoadOptions{System: true, NoRevisions: true})
	e.loadAs("user:writer", `[{classname: rack, keyname: r2, units: 40, tags: [hot]}]`)
	p := w.post(revURL(rev), url.Values{"csrf": {tok}, "version": {"after"}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("restore after: %d\n%s", p.status, p.body)
	}
	in, err := e.db.Instance(ctx, "rack", "r2")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(in.Data["units"]) != "47" || fmt.Sprint(in.Data["tags"]) != "[cold spare]" {
		t.Errorf("restored revision %d: %v, want units 47 and tags [cold spare] (the version it wrote)", rev, in.Data)
	}
	testkit.MustLoad(t, e.db, `[{classname: rack, keyname: r2, units: 1, tags: [x]}]`, store.LoadOptions{System: true, NoRevisions: true})
	p = w.post(revURL(rev), url.Values{"csrf": {tok}, "version": {"before"}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("restore before: %d\n%s", p.status, p.body)
	}
	if in, err = e.db.Instance(ctx, "rack", "r2"); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(in.Data["units"]) != "48" || fmt.Sprint(in.Data["tags"]) != "[cold spare]" {
		t.Errorf("restored the version before revision %d: %v, want units 48 and tags [cold spare]", rev, in.Data)
	}
}
