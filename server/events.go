package server

import (
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"dataservice/store"
	"dataservice/store/model"
)

// permEventAdmin is the permission that writes event rules and reads and redelivers
// their events.
const permEventAdmin = "p_event_admin"

// eventView is an event as the API lists it. The delivery body is left out: it holds
// field values of the watched schema, which a holder of p_event_admin need not be
// allowed to read; the receiver gets it, and the event's instance says the rest.
type eventView struct {
	ID         string   `json:"id" yaml:"id"`
	Seq        int64    `json:"seq" yaml:"seq"`
	Rule       string   `json:"rule" yaml:"rule"`
	Kind       string   `json:"kind" yaml:"kind"`
	Schema     string   `json:"schema" yaml:"schema"`
	Keyname    *string  `json:"keyname" yaml:"keyname"`
	Action     string   `json:"action" yaml:"action"`
	Chain      []string `json:"chain" yaml:"chain"`
	Status     string   `json:"status" yaml:"status"`
	Attempts   int      `json:"attempts" yaml:"attempts"`
	NextAt     *string  `json:"next_at" yaml:"next_at"`
	LastError  string   `json:"last_error" yaml:"last_error"`
	LastStatus int      `json:"last_status" yaml:"last_status"`
	CreatedAt  string   `json:"created_at" yaml:"created_at"`
	FinishedAt *string  `json:"finished_at" yaml:"finished_at"`
	Task       *string  `json:"task" yaml:"task"`
	TaskURL    *string  `json:"task_url" yaml:"task_url"`
}

// viewOf shapes ev for a reply; its keyname only when shown (the caller may read
// the event's schema: DB.EventKeynameShown), null otherwise.
func (s *server) viewOf(r *http.Request, ev *store.Event, shown bool) eventView {
	v := eventView{ID: ev.ID, Seq: ev.Seq, Rule: ev.Rule, Kind: ev.Kind, Schema: ev.Classname,
		Action: ev.Action, Chain: ev.Chain, Status: ev.Status, Attempts: ev.Attempts, LastError: ev.LastError,
		LastStatus: ev.LastStatus, CreatedAt: ev.CreatedAt}
	if v.Chain == nil {
		v.Chain = []string{}
	}
	if shown {
		k := ev.Keyname
		v.Keyname = &k
	}
	if ev.Status == store.EventPending && !ev.NextAt.IsZero() {
		t := ev.NextAt.UTC().Format("2006-01-02T15:04:05.000Z07:00")
		v.NextAt = &t
	}
	if ev.FinishedAt != "" {
		f := ev.FinishedAt
		v.FinishedAt = &f
	}
	if ev.Task != "" {
		h, u := ev.Task, s.absURL(r, "/api/tasks/"+ev.Task+"/")
		v.Task, v.TaskURL = &h, &u
	}
	return v
}

type eventListReply struct {
	Count  int         `json:"count" yaml:"count"`
	Events []eventView `json:"events" yaml:"events"`
}

// eventList: GET /api/events/?status=&rule=&limit= — the outbox's events, newest
// first: pending ones (with their next attempt), dead letters (with the last error)
// and delivered ones until they are purged.
func (s *server) eventList(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if s.denied(w, r, "p_data_access", permEventAdmin) {
		return
	}
	q := r.URL.Query()
	status := q.Get("status")
	switch status {
	case "", store.EventPending, store.EventDelivered, store.EventDead:
	default:
		s.writeError(w, r, http.StatusBadRequest, "status must be pending, delivered or dead")
		return
	}
	rule := strings.TrimSpace(q.Get("rule"))
	if len(rule) > 256 || strings.ContainsRune(rule, 0) {
		s.writeError(w, r, http.StatusBadRequest, "rule must be an event rule's keyname")
		return
	}
	limit, ok := s.listLimit(w, r, q)
	if !ok {
		return
	}
	list, err := s.db.ListEvents(r.Context(), status, rule, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := eventListReply{Count: len(list), Events: make([]eventView, 0, len(list))}
	shown := s.db.EventKeynameShown(r.Context(), principalOf(r).auth)
	for _, ev := range list {
		out.Events = append(out.Events, s.viewOf(r, ev, shown(ev)))
	}
	s.reply(w, r, http.StatusOK, out)
}

// eventRedeliver: POST /api/events/<id>/redeliver/ — a dead event becomes pending
// again, due now, its attempts counted from 0. It may arrive after later events of
// the same instance.
func (s *server) eventRedeliver(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	if !s.writeGate(w, r, "p_data_access", permEventAdmin) {
		return
	}
	id := ps.ByName("id")
	if len(id) > 64 || strings.ContainsRune(id, 0) {
		s.fail(w, r, model.Errorf(model.ENotFound, "event not found"))
		return
	}
	if err := s.db.RedeliverEvent(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	if s.onRedeliver != nil {
		s.onRedeliver()
	}
	s.reply(w, r, http.StatusOK, map[string]string{"id": id, "status": store.EventPending})
}
