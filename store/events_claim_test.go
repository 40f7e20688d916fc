package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
)

// claimKeys claims for owner and returns "rule:keyname:action" of each event, with
// the events.
func claimKeys(t *testing.T, db *store.DB, owner string, limit, perRule int) (string, []*store.Event) {
	t.Helper()
	es, err := db.ClaimEvents(context.Background(), owner, 30*time.Second, limit, perRule)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range es {
		keys = append(keys, e.Rule+":"+e.Keyname+":"+e.Action)
	}
	return strings.Join(keys, " "), es
}

// The claim takes each instance's oldest pending event per rule, in commit order,
// at most perRule per rule (leased ones counted), and none another owner holds until
// its lease expires; ack, fail (retry or dead) and redeliver move the queue on.
func TestClaimEventsOrderAndLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clk, _ := openEventsDB(t)
	eventRule(t, db, `
- {classname: _eventrule, keyname: r1, schemas: [note], webhook_url: "http://127.0.0.1:9/in", secret: test-signing-secret}
- {classname: _eventrule, keyname: r2, schemas: [other], webhook_url: "http://127.0.0.1:9/in", secret: test-signing-secret}
`)
	mustLoad(t, db, `- {classname: note, keyname: a, text: "1"}`, store.LoadOptions{})
	mustLoad(t, db, `- {classname: note, keyname: b, text: "1"}`, store.LoadOptions{})
	mustLoad(t, db, `- {classname: note, keyname: a, text: "2"}`, store.LoadOptions{})
	mustLoad(t, db, `- {classname: note, keyname: a, text: "3"}`, store.LoadOptions{})
	mustLoad(t, db, `- {classname: note, keyname: c, text: "1"}`, store.LoadOptions{})
	mustLoad(t, db, `- {classname: other, keyname: o, text: "1"}`, store.LoadOptions{})

	// perRule 2: r1's heads a and b, then r2's o (c waits: r1 is at its bound).
	got, es := claimKeys(t, db, "w1", 10, 2)
	if got != "r1:a:create r1:b:create r2:o:create" {
		t.Fatalf("first claim %q", got)
	}
	if got, _ := claimKeys(t, db, "w2", 10, 2); got != "" {
		t.Fatalf("second owner claimed %q while r1 is at its bound and a, b are leased", got)
	}
	if got, _ := claimKeys(t, db, "w2", 10, 3); got != "r1:c:create" {
		t.Fatalf("with perRule 3: %q", got)
	}
	aCreate, bCreate, oCreate := es[0], es[1], es[2]
	if err := db.AckEvent(ctx, aCreate.ID, "w2", ""); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("ack by another owner: %v, want ErrLeaseLost", err)
	}
	if err := db.AckEvent(ctx, aCreate.ID, "w1", ""); err != nil {
		t.Fatal(err)
	}
	if err := db.AckEvent(ctx, aCreate.ID, "w1", ""); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("a second ack: %v, want ErrLeaseLost", err)
	}
	if err := db.AckEvent(ctx, "no-such-event", "w1", ""); !store.IsNotFound(err) {
		t.Fatalf("ack of a missing event: %v", err)
	}
	// a's next event (its update to 2) is its head now.
	got, es = claimKeys(t, db, "w1", 10, 3)
	if got != "r1:a:update" {
		t.Fatalf("after the ack of a's create: %q", got)
	}
	aUpd2 := es[0]
	// A failure with a retry later keeps a's queue behind it until it is due.
	if err := db.FailEvent(ctx, aUpd2.ID, "w1", 503, "503 Service Unavailable", clk.now().Add(time.Minute), false); err != nil {
		t.Fatal(err)
	}
	if got, _ := claimKeys(t, db, "w1", 10, 3); got != "" {
		t.Fatalf("claimed %q while a's head waits for its retry", got)
	}
	clk.add(time.Minute)
	// Every lease (30 s) has expired by now: b, o and c are due again too.
	got, es = claimKeys(t, db, "w3", 10, 5)
	if got != "r1:b:create r1:a:update r1:c:create r2:o:create" {
		t.Fatalf("after the retry time and the leases' expiry: %q", got)
	}
	if err := db.AckEvent(ctx, bCreate.ID, "w1", ""); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("ack of a lease taken over: %v, want ErrLeaseLost", err)
	}
	if err := db.FailEvent(ctx, oCreate.ID, "w1", 500, "x", clk.now(), false); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("fail of a lease taken over: %v, want ErrLeaseLost", err)
	}
	if es[1].ID != aUpd2.ID || es[1].Attempts != 1 {
		t.Fatalf("a's update after one failure: %+v", es[1])
	}
	// Dead: a's later event is delivered next; the dead one is listed with its error.
	if err := db.FailEvent(ctx, aUpd2.ID, "w3", 500, "500 Internal Server Error", time.Time{}, true); err != nil {
		t.Fatal(err)
	}
	for _, e := range []*store.Event{es[0], es[2], es[3]} {
		if err := db.AckEvent(ctx, e.ID, "w3", "task-1"); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := claimKeys(t, db, "w3", 10, 5); got != "r1:a:update" {
		t.Fatalf("after a's update died: %q, want its next update", got)
	}
	dead, err := db.ListEvents(ctx, store.EventDead, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0].ID != aUpd2.ID || dead[0].Attempts != 2 || dead[0].LastStatus != 500 ||
		dead[0].LastError != "500 Internal Server Error" || dead[0].FinishedAt == "" {
		t.Fatalf("dead letters %+v", dead)
	}
	if pending, deadN, err := db.EventCounts(ctx); err != nil || pending != 1 || deadN != 1 {
		t.Fatalf("counts pending %d dead %d (%v), want 1 and 1", pending, deadN, err)
	}
	delivered, err := db.ListEvents(ctx, store.EventDelivered, "r1", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(delivered) != 3 || delivered[0].Seq < delivered[2].Seq || delivered[0].Task != "task-1" {
		t.Fatalf("delivered of r1, newest first: %+v", delivered)
	}
	// Redelivery: pending again, attempts 0, due now; only a dead event.
	if err := db.RedeliverEvent(ctx, aUpd2.ID); err != nil {
		t.Fatal(err)
	}
	if err := db.RedeliverEvent(ctx, aUpd2.ID); store.ErrorCode(err) != model.EConflict {
		t.Fatalf("redeliver of a pending event: %v", err)
	}
	if err := db.RedeliverEvent(ctx, "nope"); !store.IsNotFound(err) {
		t.Fatalf("redeliver of a missing event: %v", err)
	}
	clk.add(time.Minute)
	got, es = claimKeys(t, db, "w4", 10, 5)
	if got != "r1:a:update" || es[0].ID != aUpd2.ID || es[0].Attempts != 0 {
		t.Fatalf("after the redelivery: %q %+v", got, es)
	}
	if _, err := db.ListEvents(ctx, "bogus", "", 10); err == nil {
		t.Fatal("a list by an unknown status was accepted")
	}
}

// Two handles on one database (two processes, or two PostgreSQL nodes) claiming at
// once never lease the same event.
func TestClaimEventsExclusiveAcrossHandles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _, addr := openEventsDB(t)
	second := testkit.Open(t, addr, testkit.Options{})
	eventRule(t, db, `- {classname: _eventrule, keyname: r1, schemas: [note], webhook_url: "http://127.0.0.1:9/in", secret: test-signing-secret}`)
	const n = 40
	var doc strings.Builder
	for i := range n {
		fmt.Fprintf(&doc, "- {classname: note, keyname: k%02d}\n", i)
	}
	mustLoad(t, db, doc.String(), store.LoadOptions{})
	seen := map[string]string{}
	type claim struct {
		owner string
		es    []*store.Event
		err   error
	}
	results := make(chan claim, 2*n)
	for round := 0; round < n; round++ {
		for _, h := range []struct {
			db    *store.DB
			owner string
		}{{db, "first"}, {second, "second"}} {
			go func() {
				es, err := h.db.ClaimEvents(ctx, h.owner, time.Hour, 3, 100)
				results <- claim{h.owner, es, err}
			}()
		}
	}
	for range 2 * n {
		c := <-results
		if c.err != nil {
			t.Fatal(c.err)
		}
		for _, e := range c.es {
			if prev, dup := seen[e.ID]; dup {
				t.Fatalf("event %s leased by %s and %s", e.ID, prev, c.owner)
			}
			seen[e.ID] = c.owner
		}
	}
	if len(seen) != n {
		t.Fatalf("%d events leased, want all %d", len(seen), n)
	}
}

// Purge deletes delivered events finished before the time given, nothing else.
func TestPurgeEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, clk, _ := openEventsDB(t)
	eventRule(t, db, `- {classname: _eventrule, keyname: r1, schemas: [note], webhook_url: "http://127.0.0.1:9/in", secret: test-signing-secret}`)
	for _, k := range []string{"a", "b", "c"} {
		mustLoad(t, db, "- {classname: note, keyname: "+k+"}", store.LoadOptions{})
	}
	_, es := claimKeys(t, db, "w", 10, 10)
	if len(es) != 3 {
		t.Fatalf("claimed %d", len(es))
	}
	if err := db.AckEvent(ctx, es[0].ID, "w", ""); err != nil {
		t.Fatal(err)
	}
	if err := db.FailEvent(ctx, es[1].ID, "w", 0, "refused", time.Time{}, true); err != nil {
		t.Fatal(err)
	}
	if n, err := db.PurgeEvents(ctx, clk.now()); err != nil || n != 0 {
		t.Fatalf("purge before the delivery: %d %v", n, err)
	}
	clk.add(time.Hour)
	if n, err := db.PurgeEvents(ctx, clk.now()); err != nil || n != 1 {
		t.Fatalf("purge after the delivery: %d %v, want 1", n, err)
	}
	left := events(t, db)
	if len(left) != 2 || left[0].ID != es[1].ID || left[0].Status != store.EventDead || left[1].Status != store.EventPending {
		t.Fatalf("left %+v", left)
	}
	// Purging the newest event leaves seq growing: the next event's is above it.
	if err := db.AckEvent(ctx, es[2].ID, "w", ""); err != nil {
		t.Fatal(err)
	}
	if err := db.RedeliverEvent(ctx, es[1].ID); err != nil {
		t.Fatal(err)
	}
	_, again := claimKeys(t, db, "w", 10, 10)
	if len(again) != 1 || db.AckEvent(ctx, again[0].ID, "w", "") != nil {
		t.Fatalf("redelivered %+v", again)
	}
	clk.add(time.Hour)
	if n, err := db.PurgeEvents(ctx, clk.now()); err != nil || n != 2 {
		t.Fatalf("purge of every event: %d %v, want 2", n, err)
	}
	mustLoad(t, db, "- {classname: note, keyname: d}", store.LoadOptions{})
	if left = events(t, db); len(left) != 1 || left[0].Keyname != "d" || left[0].Seq != es[2].Seq+1 {
		t.Fatalf("after a new event: %+v (the purged newest had seq %d)", left, es[2].Seq)
	}
}

// A claim that finds nothing due takes no write lock: it answers while another
// handle holds the writer (a long load), and it does not wait for it.
func TestClaimEventsWithNothingDueTakesNoWriteLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _, addr := openEventsDB(t)
	eventRule(t, db, `- {classname: _eventrule, keyname: r1, schemas: [note], webhook_url: "http://127.0.0.1:9/in", secret: test-signing-secret}`)
	writer := testkit.Open(t, addr, testkit.Options{})
	tx, err := writer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// Bounded: a claim that waited for the writer would fail here rather than hang.
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	es, err := db.ClaimEvents(cctx, "w", time.Minute, 10, 10)
	if err != nil || len(es) != 0 {
		t.Fatalf("claim with nothing due beside a writer: %v %v", es, err)
	}
}
