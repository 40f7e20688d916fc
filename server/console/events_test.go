package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"dataservice/store"
)

// eventRules are two webhook rules on site (delivered to an address no test reaches:
// no delivery worker runs in these tests, so the events stay where the test puts them).
const eventRules = `
- {classname: _eventrule, keyname: site_hook, schemas: [site], actions: [create, update], webhook_url: "http://192.0.2.10/hook", secret: site-hook-secret}
- {classname: _eventrule, keyname: other_hook, schemas: [site], actions: [delete], webhook_url: "http://192.0.2.11/hook", secret: other-hook-secret}
`

// deadEvent records an event of rule site_hook by creating site key, and makes it dead
// as the delivery worker does after the last attempt; it returns the event.
func deadEvent(t testing.TB, e *env, key string) *store.Event {
	t.Helper()
	ctx := context.Background()
	e.load(`- {classname: site, keyname: ` + key + `, location: "Quai 1"}`)
	list, err := e.db.ClaimEvents(ctx, "console-test", time.Minute, 100, 100)
	if err != nil {
		t.Fatal(err)
	}
	var ev *store.Event
	for _, x := range list {
		if x.Rule == "site_hook" && x.Keyname == key {
			ev = x
			continue
		}
		// Others go back to pending at once, as an attempt that failed (never dead).
		if err := e.db.FailEvent(ctx, x.ID, "console-test", 0, "released by the test", time.Now(), false); err != nil {
			t.Fatal(err)
		}
	}
	if ev == nil {
		t.Fatalf("no event of site_hook recorded for site %s (claimed %d)", key, len(list))
	}
	if err := e.db.FailEvent(ctx, ev.ID, "console-test", http.StatusBadGateway, "receiver answered 502 Bad Gateway", time.Time{}, true); err != nil {
		t.Fatal(err)
	}
	return ev
}

// eventStatus is the stored status and attempts of event id.
func eventStatus(t testing.TB, e *env, id string) (string, int) {
	t.Helper()
	for _, st := range []string{store.EventDead, store.EventPending, store.EventDelivered} {
		list, err := e.db.ListEvents(context.Background(), st, "", 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range list {
			if ev.ID == id {
				return ev.Status, ev.Attempts
			}
		}
	}
	t.Fatalf("event %s not found", id)
	return "", 0
}

// TestEventsTool: the events tool lists dead and pending events with their last
// error and status, links a readable instance, filters by rule, and redelivers a dead
// event on a POST carrying the session's CSRF token; without p_event_admin there is no
// page, no link and no redelivery.
func TestEventsTool(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(eventPeople)
	e.load(eventRules)
	ev := deadEvent(t, e, "nantes")
	e.load(`- {classname: site, keyname: brest}`) // a pending event, never claimed

	for _, who := range []string{"plain", "dataadmin", "sched"} {
		b := e.browser()
		b.signIn(who, who+"-pass-1")
		p := b.get("/")
		lacks(t, p, `href="/data/private/event_queue/"`, "dead event")
		want(t, b.get("/data/private/event_queue/"), http.StatusForbidden, "it needs p_event_admin")
		p = b.post("/data/private/event_queue/"+ev.ID+"/redeliver/", url.Values{"csrf": {b.csrf()}})
		want(t, p, http.StatusForbidden, "it needs p_event_admin")
	}
	if st, _ := eventStatus(t, e, ev.ID); st != store.EventDead {
		t.Fatalf("status %s after refused redeliveries, want dead", st)
	}

	// evadmin may not read site: the keyname is not shown, nor linked.
	admin := e.browser()
	admin.signIn("evadmin", "evadmin-pass-1")
	p := admin.get("/")
	want(t, p, http.StatusOK, `id="dead-events"`, `href="/data/private/event_queue/?status=dead"`, "<strong>1</strong> dead event<", `href="/data/private/event_queue/"`)
	p = admin.get("/data/private/event_queue/")
	want(t, p, http.StatusOK, `id="count-dead">1<`, `id="count-pending">1<`, `id="event-`+ev.ID+`"`,
		"receiver answered 502 Bad Gateway", `HTTP 502`, `href="/data/private/_eventrule/site_hook/"`,
		`action="/data/private/event_queue/`+ev.ID+`/redeliver/"`, "(not shown)")
	lacks(t, p, "nantes", "brest")

	reader := e.browser()
	reader.signIn("evreader", "evreader-pass-1")
	p = reader.get("/data/private/event_queue/?status=dead")
	want(t, p, http.StatusOK, `<a href="/data/private/site/nantes/">nantes</a>`)
	lacks(t, p, "brest", `id="events-pending"`)
	p = reader.get("/data/private/event_queue/?status=pending")
	want(t, p, http.StatusOK, "brest")
	lacks(t, p, "nantes", `class="redeliver"`)
	p = reader.get("/data/private/event_queue/?rule=other_hook")
	want(t, p, http.StatusOK, "No dead events of rule other_hook.", "No pending events of rule other_hook.")
	want(t, reader.get("/data/private/event_queue/?status=bogus"), http.StatusBadRequest, "status must be pending, dead or delivered")
	want(t, reader.get("/data/private/event_queue/"+ev.ID+"/redeliver/"), http.StatusMethodNotAllowed)

	// Refused without the session's token, or from another origin.
	redeliver := "/data/private/event_queue/" + ev.ID + "/redeliver/"
	want(t, admin.post(redeliver, url.Values{}), http.StatusForbidden, "CSRF")
	want(t, admin.post(redeliver, url.Values{"csrf": {"not-the-token"}}), http.StatusForbidden, "CSRF")
	want(t, admin.do("POST", redeliver, url.Values{"csrf": {admin.csrf()}}, map[string]string{"Origin": "http://evil.example"}), http.StatusForbidden, "CSRF")
	if st, _ := eventStatus(t, e, ev.ID); st != store.EventDead {
		t.Fatalf("status %s after refused posts, want dead", st)
	}

	p = admin.post(redeliver, url.Values{"csrf": {admin.csrf()}, "rule": {"site_hook"}})
	if p.status != http.StatusSeeOther || p.loc != "/data/private/event_queue/?done=redelivered&rule=site_hook" {
		t.Fatalf("redeliver: %d %q\n%s", p.status, p.loc, p.body)
	}
	if st, n := eventStatus(t, e, ev.ID); st != store.EventPending || n != 0 {
		t.Fatalf("after redelivery: %s with %d attempts, want pending with 0", st, n)
	}
	p = admin.get(p.loc)
	want(t, p, http.StatusOK, "Redelivery queued", `id="count-dead">0<`, `id="count-pending">2<`)
	lacks(t, p, `class="redeliver"`)
	lacks(t, admin.get("/"), `id="dead-events"`)
	// A second redelivery finds no dead event: the store's refusal, nothing changes.
	p = admin.post(redeliver, url.Values{"csrf": {admin.csrf()}})
	if p.status < 400 || !strings.Contains(p.body, "event") {
		t.Fatalf("redelivering a pending event: %d\n%s", p.status, p.body)
	}
}

// TestEventsToolDelivered: delivered events are listed only when asked for, and a
// pipeline event's row links the task it submitted.
func TestEventsToolDelivered(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(eventPeople)
	e.load(`- {classname: _eventrule, keyname: site_pipe, schemas: [site], actions: [create], pipeline: tag}`)
	e.load(`- {classname: site, keyname: vannes}`)
	ctx := context.Background()
	list, err := e.db.ClaimEvents(ctx, "console-test", time.Minute, 10, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Kind != "pipeline" || list[0].Rule != "site_pipe" {
		t.Fatalf("claimed %d events, want the one pipeline event of site_pipe", len(list))
	}
	const handle = "0f4c2a9e-5b7d-4c1e-9a3f-2d6b8e1c7a40"
	if err := e.db.AckEvent(ctx, list[0].ID, "console-test", handle); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signIn("evreader", "evreader-pass-1")
	p := b.get("/data/private/event_queue/")
	want(t, p, http.StatusOK, "No dead events.", "No pending events.")
	lacks(t, p, list[0].ID, `id="events-delivered"`)
	p = b.get("/data/private/event_queue/?status=delivered")
	want(t, p, http.StatusOK, `id="event-`+list[0].ID+`"`, `<span class="badge">pipeline</span>`,
		`task <a href="/data/private/task/`+handle+`/">0f4c2a9e</a>`, `<a href="/data/private/site/vannes/">vannes</a>`)
	lacks(t, p, `class="redeliver"`)
}
