package tasks_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/tasks"
)

// verify is the signature check docs/events.md gives receivers, as written there.
func verify(secret []byte, header string, body []byte, now time.Time) bool {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || now.Sub(time.Unix(t, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want, err := hex.DecodeString(sig)
	return err == nil && hmac.Equal(mac.Sum(nil), want)
}

// hit is one request a receiver got.
type hit struct {
	id, signature, contentType string
	body                       []byte
	status                     int
	at                         time.Time
}

// receiver is a real HTTP receiver on 127.0.0.1 answering with answer(n) to its n-th
// request (0-based); it records every request.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	hits   []hit
	answer func(n int) int
}

func newReceiver(t *testing.T, answer func(n int) int) *receiver {
	rc := &receiver{answer: answer}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		rc.mu.Lock()
		n := len(rc.hits)
		status := rc.answer(n)
		rc.hits = append(rc.hits, hit{id: r.Header.Get(tasks.HeaderEvent), signature: r.Header.Get(tasks.HeaderSignature),
			contentType: r.Header.Get("Content-Type"), body: body, status: status, at: time.Now()})
		rc.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) got() []hit {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]hit(nil), rc.hits...)
}

// accepted counts the requests answered 2xx, by event id.
func (rc *receiver) accepted() map[string]int {
	out := map[string]int{}
	for _, h := range rc.got() {
		if h.status/100 == 2 {
			out[h.id]++
		}
	}
	return out
}

func always(status int) func(int) int { return func(int) int { return status } }

// newEventDB is newDB with webhooks allowed to 127.0.0.1 and the given attempts.
func newEventDB(t *testing.T, maxAttempts int) *store.DB {
	t.Helper()
	db := newDB(t)
	err := db.SetConfig(context.Background(), map[string]string{store.ConfigWebhookAllowPrivate: "127.0.0.1",
		store.ConfigWebhookMaxAttempts: strconv.Itoa(maxAttempts), store.ConfigWebhookTimeout: "5"})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// addWebhookRule stores an event rule on host posting to url with secret.
func addWebhookRule(t *testing.T, db *store.DB, name, url, secret string) {
	t.Helper()
	mustLoad(t, db, fmt.Sprintf("- {classname: _eventrule, keyname: %s, schemas: [host], webhook_url: %q, secret: %q}\n",
		name, url, secret))
}

// startDeliverer runs a Deliverer (and runner, when not nil) until the test ends.
func startDeliverer(t *testing.T, db *store.DB, runner *tasks.Runner, o tasks.DeliveryOptions) *tasks.Deliverer {
	t.Helper()
	if runner == nil {
		runner = newRunner(t, db, tasks.Options{})
	}
	if o.Poll == 0 {
		o.Poll = 50 * time.Millisecond
	}
	if o.BaseDelay == 0 {
		o.BaseDelay = 20 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = new(testkit.Recorder).Logger(t)
	}
	d := tasks.NewDeliverer(db, runner, o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return d
}

// events lists a rule's events with their bodies, newest first.
func events(t *testing.T, db *store.DB, rule string) []*store.Event {
	t.Helper()
	list, err := db.ListEvents(context.Background(), "", rule, 500)
	if err != nil {
		t.Fatal(err)
	}
	out := list[:0]
	for _, e := range list {
		full, err := db.Event(context.Background(), e.ID)
		if store.IsNotFound(err) {
			continue // purged between the list and the read
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, full)
	}
	return out
}

// eventsWith waits until the rule has n events, all with status, and returns them.
func eventsWith(t *testing.T, db *store.DB, rule, status string, n int) []*store.Event {
	t.Helper()
	var list []*store.Event
	waitFor(t, fmt.Sprintf("%d %s events of %s", n, status, rule), func() bool {
		list = events(t, db, rule)
		if len(list) != n {
			return false
		}
		for _, ev := range list {
			if ev.Status != status {
				return false
			}
		}
		return true
	})
	return list
}

// TestWebhookSignedDelivery: a write a rule watches is posted soon after its commit,
// as JSON with the event's id, signed with the rule's secret at the deliverer's clock
// (injected), and the event is recorded delivered.
func TestWebhookSignedDelivery(t *testing.T) {
	t.Parallel()
	db := newEventDB(t, 8)
	rc := newReceiver(t, always(http.StatusOK))
	addWebhookRule(t, db, "notify", rc.URL+"/hook?token=abc", "s3cret-key")
	clock := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	const poll = 200 * time.Millisecond
	var delivered sync.WaitGroup
	delivered.Add(1)
	startDeliverer(t, db, nil, tasks.DeliveryOptions{Poll: poll, Now: func() time.Time { return clock },
		OnDelivered: func(time.Duration) { delivered.Done() }})

	committed := time.Now()
	mustLoad(t, db, "- {classname: host, keyname: web1, port: 8080}\n")
	list := eventsWith(t, db, "notify", store.EventDelivered, 1)
	delivered.Wait()
	hits := rc.got()
	if len(hits) != 1 {
		t.Fatalf("receiver got %d requests, want 1", len(hits))
	}
	h := hits[0]
	// Soon: the deliverer polls every 200 ms here; ten times that (plus the attempt)
	// bounds the wait from the commit.
	if took := h.at.Sub(committed); took > 10*poll+5*time.Second {
		t.Errorf("delivered %v after the commit, want within %v", took, 10*poll+5*time.Second)
	}
	ev := list[0]
	if h.id != ev.ID || h.contentType != "application/json" {
		t.Errorf("headers: event %q content type %q; want %q and application/json", h.id, h.contentType, ev.ID)
	}
	if string(h.body) != string(ev.Body) {
		t.Errorf("body sent %s, want the stored body %s", h.body, ev.Body)
	}
	if want := "t=" + strconv.FormatInt(clock.Unix(), 10) + ","; !strings.HasPrefix(h.signature, want) {
		t.Errorf("signature %q, want it to start with %q (the injected clock)", h.signature, want)
	}
	if !verify([]byte("s3cret-key"), h.signature, h.body, clock) {
		t.Errorf("signature %q does not verify with the rule's secret", h.signature)
	}
	if verify([]byte("other-key"), h.signature, h.body, clock) {
		t.Error("signature verifies with another secret")
	}
	var body struct {
		ID, Schema, Keyname, Action, Actor string
	}
	if err := json.Unmarshal(h.body, &body); err != nil {
		t.Fatalf("body is not JSON: %v", err)
	}
	if body.ID != ev.ID || body.Schema != "host" || body.Keyname != "web1" || body.Action != "create" {
		t.Errorf("body %+v, want the event's id, host, web1, create", body)
	}
	if ev.Attempts != 0 && ev.Attempts != 1 {
		t.Errorf("attempts %d after one accepted request", ev.Attempts)
	}
}

// TestWebhookRetriedUntilAccepted: a receiver failing twice, then answering 2xx, gets
// three requests of the same event and exactly one accepted; the event is not sent
// again afterwards (a later event of the same rule is delivered meanwhile).
func TestWebhookRetriedUntilAccepted(t *testing.T) {
	t.Parallel()
	db := newEventDB(t, 8)
	rc := newReceiver(t, func(n int) int {
		if n < 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	addWebhookRule(t, db, "flaky", rc.URL, "k")
	var retried, dead int
	var mu sync.Mutex
	startDeliverer(t, db, nil, tasks.DeliveryOptions{
		OnRetried: func() { mu.Lock(); retried++; mu.Unlock() },
		OnDead:    func() { mu.Lock(); dead++; mu.Unlock() }})
	mustLoad(t, db, "- {classname: host, keyname: a}\n")
	first := eventsWith(t, db, "flaky", store.EventDelivered, 1)[0]
	mustLoad(t, db, "- {classname: host, keyname: b}\n")
	eventsWith(t, db, "flaky", store.EventDelivered, 2)
	hits := rc.got()
	if len(hits) != 4 {
		t.Fatalf("receiver got %d requests, want 4 (3 of the first event, 1 of the second)", len(hits))
	}
	for i := range 3 {
		if hits[i].id != first.ID {
			t.Fatalf("request %d is of event %s, want %s", i, hits[i].id, first.ID)
		}
		if string(hits[i].body) != string(first.Body) {
			t.Fatalf("request %d: body differs from the stored one", i)
		}
	}
	if got := rc.accepted()[first.ID]; got != 1 {
		t.Fatalf("event accepted %d times, want 1", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if retried != 2 || dead != 0 {
		t.Fatalf("retried %d, dead %d; want 2 and 0", retried, dead)
	}
}

// TestWebhookDeadThenRedelivered: after WEBHOOK_MAX_ATTEMPTS failures the event is dead
// with the last error and status; redelivered, it is posted again and delivered.
func TestWebhookDeadThenRedelivered(t *testing.T) {
	t.Parallel()
	db := newEventDB(t, 3)
	var mu sync.Mutex
	status := http.StatusInternalServerError
	rc := newReceiver(t, func(int) int { mu.Lock(); defer mu.Unlock(); return status })
	addWebhookRule(t, db, "down", rc.URL, "k")
	startDeliverer(t, db, nil, tasks.DeliveryOptions{})
	mustLoad(t, db, "- {classname: host, keyname: a}\n")
	ev := eventsWith(t, db, "down", store.EventDead, 1)[0]
	if ev.Attempts != 3 || ev.LastStatus != 500 || !strings.HasPrefix(ev.LastError, "answered 500") {
		t.Fatalf("dead event: attempts %d, last status %d, last error %q; want 3, 500, answered 500",
			ev.Attempts, ev.LastStatus, ev.LastError)
	}
	if got := len(rc.got()); got != 3 {
		t.Fatalf("receiver got %d requests, want 3", got)
	}
	mu.Lock()
	status = http.StatusOK
	mu.Unlock()
	if err := db.RedeliverEvent(context.Background(), ev.ID); err != nil {
		t.Fatal(err)
	}
	eventsWith(t, db, "down", store.EventDelivered, 1)
	if got := rc.accepted()[ev.ID]; got != 1 || len(rc.got()) != 4 {
		t.Fatalf("after redelivery: %d requests, accepted %d; want 4 and 1", len(rc.got()), got)
	}
}

// TestWebhookRefusedTargets: loopback without WEBHOOK_ALLOW_PRIVATE (by address and by
// a name resolving to it), the metadata address and a redirect are failed attempts
// whose error says why; the redirect's target is never requested.
func TestWebhookRefusedTargets(t *testing.T) {
	t.Parallel()
	db := newEventDB(t, 1)
	target := newReceiver(t, always(http.StatusOK))
	redirect := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	_, port, _ := strings.Cut(strings.TrimPrefix(target.URL, "http://"), ":")
	addWebhookRule(t, db, "redirected", redirect.URL, "k")
	addWebhookRule(t, db, "metadata", "http://169.254.169.254/latest/", "k")
	addWebhookRule(t, db, "byname", "http://localhost:"+port+"/", "k")
	addWebhookRule(t, db, "loopback", target.URL, "k")
	// Only the redirect's own server is allowed: the receiver on 127.0.0.1 is reached
	// by the name localhost and by its address with the loopback refusal in force.
	if err := db.SetConfig(context.Background(), map[string]string{store.ConfigWebhookAllowPrivate: "127.0.0.2"}); err != nil {
		t.Fatal(err)
	}
	startDeliverer(t, db, nil, tasks.DeliveryOptions{})
	mustLoad(t, db, "- {classname: host, keyname: a}\n")
	for rule, want := range map[string]string{"metadata": "169.254.169.254", "byname": "is loopback",
		"loopback": "is loopback", "redirected": "is loopback"} {
		ev := eventsWith(t, db, rule, store.EventDead, 1)[0]
		if !strings.Contains(ev.LastError, want) || !strings.Contains(ev.LastError, "refused") {
			t.Errorf("%s: last error %q, want a refusal naming %q", rule, ev.LastError, want)
		}
	}
	// With the redirect's server allowed (127.0.0.1 holds both servers: the redirect
	// is reached, its target never, since redirects are not followed).
	if err := db.SetConfig(context.Background(), map[string]string{store.ConfigWebhookAllowPrivate: "127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	targetBefore := len(target.got())
	ev := eventsWith(t, db, "redirected", store.EventDead, 1)[0]
	if err := db.RedeliverEvent(context.Background(), ev.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the redirect answered", func() bool {
		ev = eventsWith(t, db, "redirected", store.EventDead, 1)[0]
		return ev.LastStatus == http.StatusTemporaryRedirect
	})
	if !strings.Contains(ev.LastError, "redirects are not followed") {
		t.Errorf("redirect: last error %q", ev.LastError)
	}
	if got := len(target.got()); got != targetBefore {
		t.Errorf("the redirect's target got %d requests, want %d", got, targetBefore)
	}
}

// TestSlowReceiverHoldsOnlyItsRulesSlots: a receiver that does not answer holds at most
// PerRule deliveries; the other rule's events are all delivered meanwhile, and the
// held ones are delivered once it answers.
func TestSlowReceiverHoldsOnlyItsRulesSlots(t *testing.T) {
	t.Parallel()
	db := newEventDB(t, 8)
	if err := db.SetConfig(context.Background(), map[string]string{store.ConfigWebhookTimeout: "120"}); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var mu sync.Mutex
	held := 0
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		held++
		mu.Unlock()
		<-release
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(slow.Close)
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open)
	fast := newReceiver(t, always(http.StatusOK))
	addWebhookRule(t, db, "slow", slow.URL, "k")
	addWebhookRule(t, db, "fast", fast.URL, "k")
	startDeliverer(t, db, nil, tasks.DeliveryOptions{Concurrency: 3, PerRule: 2})
	var doc strings.Builder
	for i := range 6 {
		fmt.Fprintf(&doc, "- {classname: host, keyname: h%d}\n", i)
	}
	mustLoad(t, db, doc.String())
	eventsWith(t, db, "fast", store.EventDelivered, 6)
	mu.Lock()
	got := held
	mu.Unlock()
	if got > 2 {
		t.Fatalf("the slow receiver holds %d requests, want at most 2 (PerRule)", got)
	}
	open()
	eventsWith(t, db, "slow", store.EventDelivered, 6)
}

// TestDeliveredEventsArePurged: a deliverer's start deletes delivered events older than
// TASK_RETENTION_DAYS and keeps the dead ones.
func TestDeliveredEventsArePurged(t *testing.T) {
	t.Parallel()
	db := newEventDB(t, 1)
	ok := newReceiver(t, always(http.StatusOK))
	addWebhookRule(t, db, "ok", ok.URL, "k")
	addWebhookRule(t, db, "dead", "http://169.254.169.254/", "k")
	ctx, cancel := context.WithCancel(context.Background())
	d := tasks.NewDeliverer(db, newRunner(t, db, tasks.Options{}), tasks.DeliveryOptions{Poll: 20 * time.Millisecond,
		Logger: new(testkit.Recorder).Logger(t)})
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
	mustLoad(t, db, "- {classname: host, keyname: a}\n")
	eventsWith(t, db, "ok", store.EventDelivered, 1)
	eventsWith(t, db, "dead", store.EventDead, 1)
	cancel()
	<-done
	testkit.Exec(t, db, "UPDATE events SET finished_at = '2000-01-01T00:00:00Z'")
	startDeliverer(t, db, nil, tasks.DeliveryOptions{})
	waitFor(t, "the delivered event purged", func() bool { return len(events(t, db, "ok")) == 0 })
	if got := len(events(t, db, "dead")); got != 1 {
		t.Fatalf("%d dead events after the purge, want 1", got)
	}
}

// TestShutdownCutsOffUnrecorded: a delivery still waiting for its receiver when the
// deliverer stops (after its grace) records nothing: the event stays pending, its
// attempts uncounted, and is delivered by the next deliverer once the lease ends.
func TestShutdownCutsOffUnrecorded(t *testing.T) {
	t.Parallel()
	db := newEventDB(t, 8)
	if err := db.SetConfig(context.Background(), map[string]string{store.ConfigWebhookTimeout: "1"}); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var mu sync.Mutex
	requests := 0
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		first := requests == 1
		mu.Unlock()
		if first {
			<-release
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(recv.Close)
	t.Cleanup(func() { close(release) })
	addWebhookRule(t, db, "hook", recv.URL, "k")
	ctx, cancel := context.WithCancel(context.Background())
	d := tasks.NewDeliverer(db, newRunner(t, db, tasks.Options{}), tasks.DeliveryOptions{Poll: 20 * time.Millisecond,
		ShutdownGrace: 50 * time.Millisecond, Logger: new(testkit.Recorder).Logger(t)})
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx)
	}()
	mustLoad(t, db, "- {classname: host, keyname: a}\n")
	waitFor(t, "the receiver holding the first request", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return requests == 1
	})
	cancel()
	<-done
	ev := events(t, db, "hook")[0]
	if ev.Status != store.EventPending || ev.Attempts != 0 || ev.LastError != "" {
		t.Fatalf("after the cut-off: status %s attempts %d error %q; want pending, 0, none", ev.Status, ev.Attempts, ev.LastError)
	}
	startDeliverer(t, db, nil, tasks.DeliveryOptions{})
	eventsWith(t, db, "hook", store.EventDelivered, 1)
}

// TestTwoDeliverersShareTheOutbox: two processes' deliverers (two opens of one
// database, as two nodes) deliver every event once between them.
func TestTwoDeliverersShareTheOutbox(t *testing.T) {
	t.Parallel()
	path := newDBFile(t)
	db := openDB(t, path)
	mustLoad(t, db, testSchemas)
	if err := db.SetConfig(context.Background(), map[string]string{store.ConfigWebhookAllowPrivate: "127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	other := openDB(t, path)
	rc := newReceiver(t, always(http.StatusOK))
	addWebhookRule(t, db, "hook", rc.URL, "k")
	startDeliverer(t, db, nil, tasks.DeliveryOptions{})
	startDeliverer(t, other, nil, tasks.DeliveryOptions{})
	const n = 30
	var doc strings.Builder
	for i := range n {
		fmt.Fprintf(&doc, "- {classname: host, keyname: h%02d}\n", i)
	}
	mustLoad(t, db, doc.String())
	for _, ev := range eventsWith(t, db, "hook", store.EventDelivered, n) {
		if got := rc.accepted()[ev.ID]; got != 1 {
			t.Errorf("event %s accepted %d times, want 1", ev.ID, got)
		}
	}
	if got := len(rc.got()); got != n {
		t.Fatalf("receiver got %d requests for %d events", got, n)
	}
}
