package store_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
)

// An instance keeps its place in its rule's queue across a rename: the events
// recorded after it (under the new keyname) wait for the ones recorded before it
// (under the old), as they wait for each other without a rename.
func TestEventOrderFollowsTheInstanceAcrossRename(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _, _ := openEventsDB(t)
	eventRule(t, db, `- {classname: _eventrule, keyname: r1, schemas: [note], webhook_url: "http://127.0.0.1:9/in", secret: test-signing-secret}`)
	mustLoad(t, db, `- {classname: note, keyname: a, text: "1"}`, store.LoadOptions{})
	mustLoad(t, db, `- {classname: note, keyname: a, text: "2"}`, store.LoadOptions{})
	in := testkit.Instance(t, db, "note", "a")
	next := *in
	next.Keyname = "b"
	applyNote(t, db, model.ActionUpdate, "a", &next)
	mustLoad(t, db, `- {classname: note, keyname: b, text: "3"}`, store.LoadOptions{})
	// A new instance that takes the old keyname is another instance: its own queue.
	mustLoad(t, db, `- {classname: note, keyname: a, text: "new"}`, store.LoadOptions{})
	want := []string{"r1:a:create", "r1:a:update", "r1:b:rename", "r1:b:update"}
	for i, w := range want {
		got, es := claimKeys(t, db, "w", 10, 10)
		if i == 0 {
			// The first claim also takes the new instance a's create: another queue.
			w += " r1:a:create"
		}
		if got != w {
			t.Fatalf("claim %d: %q, want %q (one instance's events in commit order across its rename)", i, got, w)
		}
		for _, e := range es {
			if err := db.AckEvent(ctx, e.ID, "w", ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got, _ := claimKeys(t, db, "w", 10, 10); got != "" {
		t.Fatalf("left %q", got)
	}
}

// The webhook and the pipeline of one rule are two queues: a receiver that is down
// or slow (its event retried later, or its slots leased) holds back neither the
// rule's pipeline runs nor their order.
func TestEventKindsOfOneRuleQueueApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clk, _ := openEventsDB(t)
	eventRule(t, db, `- {classname: _eventrule, keyname: both, schemas: [note], webhook_url: "http://127.0.0.1:9/in", secret: test-signing-secret, pipeline: p}`)
	mustLoad(t, db, `- {classname: note, keyname: a, text: "1"}`, store.LoadOptions{})
	mustLoad(t, db, `- {classname: note, keyname: a, text: "2"}`, store.LoadOptions{})
	kinds := func(es []*store.Event) string {
		var s []string
		for _, e := range es {
			s = append(s, e.Kind+":"+e.Action)
		}
		return strings.Join(s, " ")
	}
	// perRule 1: the webhook's head holds the webhook's one slot, not the pipeline's.
	_, es := claimKeys(t, db, "w", 10, 1)
	if got := kinds(es); got != "webhook:create pipeline:create" {
		t.Fatalf("first claim %q, want each kind's head", got)
	}
	hook, pipe := es[0], es[1]
	// The receiver is down: its event waits for a retry in a minute.
	if err := db.FailEvent(ctx, hook.ID, "w", 503, "503", clk.now().Add(time.Minute), false); err != nil {
		t.Fatal(err)
	}
	if err := db.AckEvent(ctx, pipe.ID, "w", "t1"); err != nil {
		t.Fatal(err)
	}
	if _, es = claimKeys(t, db, "w", 10, 1); kinds(es) != "pipeline:update" {
		t.Fatalf("while the webhook waits: %q, want the pipeline's next event", kinds(es))
	}
	if err := db.AckEvent(ctx, es[0].ID, "w", "t2"); err != nil {
		t.Fatal(err)
	}
	clk.add(time.Minute)
	if _, es = claimKeys(t, db, "w", 10, 1); kinds(es) != "webhook:create" {
		t.Fatalf("after the retry time: %q, want the webhook's first event again", kinds(es))
	}
}

// A claim looks at a bounded number of rules, and rules already at their bound (a
// slow receiver holding its slots) are not among them: however many such rules
// have events waiting, another rule's events are claimed.
func TestClaimEventsReachesRulesBeyondBusyOnes(t *testing.T) {
	t.Parallel()
	db, _, _ := openEventsDB(t)
	store.SetMaxDueQueues(db, 2)
	var rules strings.Builder
	for _, r := range []string{"slow1", "slow2"} {
		rules.WriteString("- {classname: _eventrule, keyname: " + r + `, schemas: [note], webhook_url: "http://127.0.0.1:9/in", secret: test-signing-secret}` + "\n")
	}
	rules.WriteString(`- {classname: _eventrule, keyname: fast, schemas: [other], webhook_url: "http://127.0.0.1:9/in", secret: test-signing-secret}` + "\n")
	eventRule(t, db, rules.String())
	var notes strings.Builder
	for i := range 6 {
		notes.WriteString("- {classname: note, keyname: n" + strconv.Itoa(i) + ", text: x}\n")
	}
	mustLoad(t, db, notes.String(), store.LoadOptions{})
	mustLoad(t, db, `- {classname: other, keyname: o, text: "1"}`, store.LoadOptions{})
	// The slow rules' receivers hold their two slots each.
	if got, _ := claimKeys(t, db, "w1", 4, 2); got != "slow1:n0:create slow2:n0:create slow1:n1:create slow2:n1:create" {
		t.Fatalf("first claim %q", got)
	}
	if got, _ := claimKeys(t, db, "w2", 8, 2); got != "fast:o:create" {
		t.Fatalf("claim while the slow rules are at their bound: %q, want fast's event", got)
	}
}

// Lists of events read no bodies (no list shows them; each holds the old and new
// values of every changed field); Event reads one event's body.
func TestListEventsReadsNoBodies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _, _ := openEventsDB(t)
	eventRule(t, db, `- {classname: _eventrule, keyname: r1, schemas: [note], webhook_url: "http://127.0.0.1:9/in", secret: test-signing-secret}`)
	big := strings.Repeat("x", 64<<10)
	for i := range 3 {
		mustLoad(t, db, `- {classname: note, keyname: a, text: "`+strconv.Itoa(i)+big+`"}`, store.LoadOptions{})
	}
	es, err := db.ListEvents(ctx, "", "", 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 3 {
		t.Fatalf("listed %d events, want 3", len(es))
	}
	for _, e := range es {
		if len(e.Body) != 0 {
			t.Fatalf("the list read event %s's body (%d bytes)", e.ID, len(e.Body))
		}
		one, err := db.Event(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if one.ID != e.ID || one.Seq != e.Seq || !strings.Contains(string(one.Body), big) {
			t.Fatalf("event %s read alone: %+v", e.ID, one.ID)
		}
	}
	if _, err := db.Event(ctx, "no-such-event"); !store.IsNotFound(err) {
		t.Fatalf("a missing event: %v, want not found", err)
	}
}

// A rename that fails after its write recorded an event rolls the event back with
// its savepoint, and the count told after the commit (metrics, the deliverer's
// wake) counts only the events that committed.
func TestRecordedCountFollowsARolledBackRename(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _, _ := openEventsDB(t)
	eventRule(t, db, `- {classname: _eventrule, keyname: r1, schemas: [note], webhook_url: "http://127.0.0.1:9/in", secret: test-signing-secret}`)
	mustLoad(t, db, "- {classname: note, keyname: a, text: one}\n- {classname: note, keyname: b, text: one}", store.LoadOptions{})
	told := make(chan int, 10)
	store.SetOnEvents(db, func(n int) { told <- n })
	before := len(events(t, db))
	s, err := db.Schema(ctx, "note")
	if err != nil {
		t.Fatal(err)
	}
	err = db.WithTx(ctx, func(tx *store.Tx) error {
		a, err := tx.Instance(ctx, "note", "a")
		if err != nil {
			return err
		}
		// a's text changes (an update event), then its rename to b fails: b exists.
		next := *a
		next.Data = map[string]any{"text": "two"}
		next.Keyname = "b"
		if _, err := tx.Apply(ctx, store.Write{Schema: s, Old: a, New: &next, Action: model.ActionUpdate}, store.ApplyOptions{}); err == nil {
			t.Errorf("rename of a to the existing b succeeded")
		}
		b, err := tx.Instance(ctx, "note", "b")
		if err != nil {
			return err
		}
		next = *b
		next.Data = map[string]any{"text": "two"}
		_, err = tx.Apply(ctx, store.Write{Schema: s, Old: b, New: &next, Action: model.ActionUpdate}, store.ApplyOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(events(t, db)) - before; n != 1 {
		t.Fatalf("%d events committed, want 1 (b's update)", n)
	}
	select {
	case n := <-told:
		if n != 1 {
			t.Fatalf("told %d events recorded, want 1: the rolled back rename's event is not", n)
		}
	default:
		t.Fatal("OnEvents not told after the commit")
	}
}
