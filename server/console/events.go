package console

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"dataservice/store"
	"dataservice/store/model"
)

// The events tool: /data/private/event_queue/ lists the events of the event rules'
// outbox that are still pending (waiting for their next attempt) and those that are
// dead (every attempt failed), newest first, filtered by ?status= and ?rule= (and the
// delivered ones when ?status=delivered asks for them); POST
// .../<id>/redeliver/ makes a dead event pending again. It needs p_event_admin, the
// permission that writes event rules, as the events API does.

// eventToolName is the events tool's path segment: not "events", a likely name of a
// user's schema, which a tool's name would hide in the console.
const eventToolName = "event_queue"

// eventsURL is the events tool's page.
const eventsURL = "/data/private/" + eventToolName + "/"

// eventListLimit is how many events of each status the page lists.
const eventListLimit = 200

type eventRow struct {
	ID, Short, Rule, RuleURL, Kind, Schema, Keyname, InstanceURL, Action string
	// Hidden: the user may not read the event's schema, so its keyname is not shown.
	Hidden                                   bool
	Attempts, LastStatus                     int
	LastError, CreatedAt, FinishedAt, NextAt string
	TaskURL, Task                            string
	Dead, Delivered                          bool
	RedeliverURL                             string
}

type eventSection struct {
	Status, Title string
	Rows          []eventRow
	More          bool
}

type eventsData struct {
	Pending, Dead int
	Status, Rule  string
	Rules         []string
	Sections      []eventSection
	Limit         int
}

// eventStatuses are the statuses the page lists, in its order: dead first, they need
// someone. Delivered events (kept until purged) are listed only when asked for: they
// are where a pipeline event's task is found.
var eventStatuses = []struct {
	Status, Title string
	OnlyAsked     bool
}{
	{store.EventDead, "Dead", false},
	{store.EventPending, "Pending", false},
	{store.EventDelivered, "Delivered", true},
}

// eventList: GET /data/private/event_queue/?status=&rule=.
func (c *Console) eventList(w http.ResponseWriter, r *http.Request, q *req) {
	ctx := r.Context()
	d := eventsData{Status: r.URL.Query().Get("status"), Rule: r.URL.Query().Get("rule"), Limit: eventListLimit}
	switch d.Status {
	case "", store.EventDead, store.EventPending, store.EventDelivered:
	default:
		c.errorPage(w, r, q, http.StatusBadRequest, "status must be pending, dead or delivered")
		return
	}
	var err error
	if d.Pending, d.Dead, err = c.db.EventCounts(ctx); err != nil {
		c.fail(w, r, q, err)
		return
	}
	err = c.db.EachInstance(ctx, "_eventrule", func(in *store.Instance) error {
		d.Rules = append(d.Rules, in.Keyname)
		return nil
	})
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	shown := c.db.EventKeynameShown(ctx, q.auth)
	for _, st := range eventStatuses {
		if (d.Status != "" && d.Status != st.Status) || (d.Status == "" && st.OnlyAsked) {
			continue
		}
		list, err := c.db.ListEvents(ctx, st.Status, d.Rule, eventListLimit+1)
		if err != nil {
			c.fail(w, r, q, err)
			return
		}
		sec := eventSection{Status: st.Status, Title: st.Title}
		if len(list) > eventListLimit {
			list, sec.More = list[:eventListLimit], true
		}
		for _, ev := range list {
			sec.Rows = append(sec.Rows, eventRowOf(ev, shown(ev)))
		}
		d.Sections = append(d.Sections, sec)
	}
	c.render(w, r, q, http.StatusOK, "events", "Events", d)
}

// eventRowOf is the row of ev; readable tells whether the user may read its schema.
func eventRowOf(ev *store.Event, readable bool) eventRow {
	row := eventRow{ID: ev.ID, Short: shortHandle(ev.ID), Rule: ev.Rule, RuleURL: link("_eventrule", ev.Rule), Kind: ev.Kind,
		Schema: ev.Classname, Action: ev.Action, Attempts: ev.Attempts, LastStatus: ev.LastStatus, LastError: ev.LastError,
		CreatedAt: ev.CreatedAt, FinishedAt: ev.FinishedAt, Dead: ev.Status == store.EventDead,
		Delivered: ev.Status == store.EventDelivered}
	if readable {
		row.Keyname = ev.Keyname
		if ev.Action != string(model.ActionDelete) {
			row.InstanceURL = link(ev.Classname, ev.Keyname)
		}
	} else {
		row.Hidden = true
	}
	if ev.Task != "" {
		row.Task, row.TaskURL = shortHandle(ev.Task), taskURL(ev.Task)
	}
	if ev.Status == store.EventPending && !ev.NextAt.IsZero() {
		row.NextAt = ev.NextAt.UTC().Format(time.RFC3339)
	}
	if row.Dead {
		row.RedeliverURL = eventsURL + url.PathEscape(ev.ID) + "/redeliver/"
	}
	return row
}

// eventRedeliver: POST /data/private/event_queue/<id>/redeliver/ — a dead event is
// delivered again from its first attempt (after the events of its instance that are
// pending: a redelivered event arrives out of order).
func (c *Console) eventRedeliver(w http.ResponseWriter, r *http.Request, q *req) {
	id := q.ps.ByName("id")
	if err := c.db.RedeliverEvent(r.Context(), id); err != nil {
		c.fail(w, r, q, err)
		return
	}
	c.log.Info("event redelivered", "event", id, "user", q.user.Keyname)
	back := eventsURL + "?done=redelivered"
	if rule := r.PostFormValue("rule"); rule != "" {
		back += "&rule=" + url.QueryEscape(rule)
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// eventFailures adds the dead and pending events to the dashboard's failures of a
// user who may open the events tool.
func (c *Console) eventFailures(ctx context.Context, auth *model.Auth, f *failures) {
	t := toolNamed(eventToolName)
	if t == nil || !t.allowed(auth) {
		return
	}
	pending, dead, err := c.db.EventCounts(ctx)
	if err != nil {
		c.log.Error("count events", "error", err)
		return
	}
	f.Pending, f.Dead, f.EventsURL = pending, dead, eventsURL
}
