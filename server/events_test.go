package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"dataservice/store"
)

// TestEventsAPI: GET /api/events/ lists the outbox (no delivery bodies) to holders of
// p_data_access and p_event_admin; POST /api/events/<id>/redeliver/ makes a dead event
// pending again, 404 for an unknown id, 409 for one that is not dead, 403 for a
// read-only key.
func TestEventsAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRunner: true})
	e.load(`
- {classname: _schema, keyname: host, note: {dataformat: string}}
- {classname: _eventrule, keyname: hook, schemas: [host], webhook_url: "http://192.0.2.1/hook", secret: k}
- {classname: host, keyname: a, note: secret-looking-value}
- {classname: host, keyname: b, note: x}
`)
	ctx := context.Background()
	evs, err := e.db.ClaimEvents(ctx, "test", time.Minute, 1, 1)
	if err != nil || len(evs) != 1 {
		t.Fatalf("claim: %v %v", evs, err)
	}
	dead := evs[0]
	if err := e.db.FailEvent(ctx, dead.ID, "test", 500, "answered 500", time.Now(), true); err != nil {
		t.Fatal(err)
	}
	admin := e.key("events", keySpec{perms: []string{"p_data_access", "p_event_admin"}})
	ro := e.key("events-ro", keySpec{perms: []string{"p_data_access", "p_event_admin"}, readOnly: true})
	noEvents := e.key("data", keySpec{perms: []string{"p_data_access", "p_data_read"}})

	wantError(t, e.get("/api/events/", noCred), http.StatusUnauthorized, "authentication required")
	wantError(t, e.get("/api/events/", noEvents), http.StatusForbidden, "permission denied: this request needs p_event_admin")
	wantError(t, e.get("/api/events/?status=lost", admin), http.StatusBadRequest, "status must be pending, delivered or dead")
	wantError(t, e.get("/api/events/?limit=0", admin), http.StatusBadRequest, "limit must be an integer from 1 to 500")

	var list struct {
		Count  int              `json:"count"`
		Events []map[string]any `json:"events"`
	}
	r := e.get("/api/events/", admin)
	wantJSON(t, r, http.StatusOK, &list)
	if list.Count != 2 || len(list.Events) != 2 {
		t.Fatalf("events: %s, want 2", r.body)
	}
	if strings.Contains(string(r.body), "secret-looking-value") || strings.Contains(string(r.body), `"body"`) {
		t.Fatalf("the list shows delivery bodies: %s", r.body)
	}
	wantJSON(t, e.get("/api/events/?status=dead&rule=hook", admin), http.StatusOK, &list)
	if list.Count != 1 || list.Events[0]["id"] != dead.ID || list.Events[0]["last_error"] != "answered 500" ||
		list.Events[0]["status"] != "dead" {
		t.Fatalf("dead events: %+v", list.Events)
	}
	wantJSON(t, e.get("/api/events/?rule=other", admin), http.StatusOK, &list)
	if list.Count != 0 || list.Events == nil {
		t.Fatalf("another rule's events: %+v, want an empty list", list)
	}

	path := "/api/events/" + dead.ID + "/redeliver/"
	wantError(t, e.post(path, noEvents, nil), http.StatusForbidden, "permission denied: this request needs p_event_admin")
	wantError(t, e.post(path, ro, nil), http.StatusForbidden, "API key is read-only")
	wantError(t, e.post("/api/events/00000000-0000-4000-8000-000000000000/redeliver/", admin, nil), http.StatusNotFound,
		`event "00000000-0000-4000-8000-000000000000" not found`)
	var out map[string]string
	wantJSON(t, e.post(path, admin, nil), http.StatusOK, &out)
	if out["id"] != dead.ID || out["status"] != store.EventPending {
		t.Fatalf("redeliver: %v", out)
	}
	r = e.post(path, admin, nil)
	if r.status != http.StatusConflict {
		t.Fatalf("redeliver of a pending event: %d %s, want 409", r.status, r.body)
	}
	wantJSON(t, e.get("/api/events/?status=pending&rule=hook", admin), http.StatusOK, &list)
	if list.Count != 2 {
		t.Fatalf("pending after redelivery: %d, want 2", list.Count)
	}
}

// TestEventsAPIHidesKeynamesOfUnreadableSchemas: an event's keyname is shown only to
// a caller who may read the event's schema (as the console's events tool shows it);
// to others it is null, and the rest of the event is listed.
func TestEventsAPIHidesKeynamesOfUnreadableSchemas(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRunner: true})
	e.load(`
- {classname: _schema, keyname: payroll, p_read: p_payroll, note: {dataformat: string}}
- {classname: _permission, keyname: p_payroll}
- {classname: _eventrule, keyname: hook, schemas: [payroll], webhook_url: "http://192.0.2.1/hook", secret: k}
- {classname: payroll, keyname: ceo-salary-cut-2026, note: x}
`)
	var list struct {
		Events []map[string]any `json:"events"`
	}
	for _, c := range []struct {
		perms []string
		want  any
	}{
		{[]string{"p_data_access", "p_event_admin", "p_data_read"}, nil},
		{[]string{"p_data_access", "p_event_admin", "p_payroll"}, "ceo-salary-cut-2026"},
	} {
		r := e.get("/api/events/", e.key(strings.Join(c.perms, "-"), keySpec{perms: c.perms}))
		wantJSON(t, r, http.StatusOK, &list)
		if len(list.Events) != 1 || list.Events[0]["keyname"] != c.want || list.Events[0]["schema"] != "payroll" {
			t.Fatalf("with %v: %s, want keyname %v", c.perms, r.body, c.want)
		}
		if c.want == nil && strings.Contains(string(r.body), "ceo-salary-cut-2026") {
			t.Fatalf("with %v the list names the instance: %s", c.perms, r.body)
		}
	}
}
