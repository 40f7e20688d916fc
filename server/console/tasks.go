package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"dataservice/server/httperror"
	"dataservice/store"
	"dataservice/store/model"
	"dataservice/tasks"
)

// The task tool: /data/private/task/ lists the tasks the user may see,
// /data/private/task/<handle>/ is a task's page, .../progress/ its progress as JSON (the
// page polls it) and POST .../cancel/ cancels it. The tool needs p_pipeline_run, as the
// task API does; which tasks a user sees and may cancel is decided by the task runner
// for both (tasks.Runner.GetFor, ListFor, CancelFor).

// taskURL is the console page of the task handle.
func taskURL(handle string) string { return "/data/private/task/" + url.PathEscape(handle) + "/" }

type taskRow struct {
	*tasks.Task
	URL   string
	Short string
}

type taskListData struct {
	Rows     []taskRow
	Everyone bool
	Status   string
	Statuses []string
}

// taskList: GET /data/private/task/?status= — the newest 100 tasks the user may see.
func (c *Console) taskList(w http.ResponseWriter, r *http.Request, q *req) {
	d := taskListData{Everyone: q.auth.HasAll(), Status: r.URL.Query().Get("status"),
		Statuses: []string{tasks.StatusQueued, tasks.StatusRunning, tasks.StatusSucceeded, tasks.StatusFailed, tasks.StatusCancelled}}
	valid := d.Status == ""
	for _, s := range d.Statuses {
		valid = valid || s == d.Status
	}
	if !valid {
		c.errorPage(w, r, q, http.StatusBadRequest, "status must be queued, running, succeeded, failed or cancelled")
		return
	}
	list, err := c.runner.ListFor(r.Context(), q.auth, d.Status, 100)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	for _, t := range list {
		d.Rows = append(d.Rows, taskRow{Task: t, URL: taskURL(t.Handle), Short: shortHandle(t.Handle)})
	}
	c.render(w, r, q, http.StatusOK, "tasks", "Tasks", d)
}

func shortHandle(h string) string {
	if i := strings.IndexByte(h, '-'); i > 0 {
		return h[:i]
	}
	return h
}

// progress is what the task page shows live, and what .../progress/ answers.
type progress struct {
	Status   string  `json:"status"`
	Finished bool    `json:"finished"`
	Done     int64   `json:"done"`
	Total    int64   `json:"total"`
	Percent  float64 `json:"percent"`
	// Rate is the instances done per second since the task started (0: not known yet).
	Rate float64 `json:"rate"`
	// ETA is the time left at that rate, as text ("" when not known).
	ETA      string           `json:"eta"`
	Counters map[string]int64 `json:"counters"`
	Error    string           `json:"error,omitempty"`
}

// counterNames are the result's counters in the order the page lists them.
var counterNames = []string{"scanned", "updated", "deleted", "disabled", "enabled", "unchanged", "discarded", "errors"}

// progressOf computes a task's progress at now.
func progressOf(t *tasks.Task, now time.Time) progress {
	p := progress{Status: t.Status, Finished: t.Finished(), Done: t.Progress.Done, Total: t.Progress.Total,
		Percent: t.Progress.Percent, Counters: map[string]int64{}}
	if res := t.Result; res != nil {
		for i, n := range []int64{res.Scanned, res.Updated, res.Deleted, res.Disabled, res.Enabled, res.Unchanged, res.Discarded, res.Errors} {
			p.Counters[counterNames[i]] = n
		}
	} else {
		for _, n := range counterNames {
			p.Counters[n] = 0
		}
	}
	if t.Error != nil {
		p.Error = *t.Error
	}
	if t.StartedAt == nil {
		return p
	}
	start, err := time.Parse(time.RFC3339, *t.StartedAt)
	if err != nil {
		return p
	}
	end := now
	if t.FinishedAt != nil {
		if f, err := time.Parse(time.RFC3339, *t.FinishedAt); err == nil {
			end = f
		}
	}
	if secs := end.Sub(start).Seconds(); secs >= 1 && p.Done > 0 {
		p.Rate = float64(int64(float64(p.Done)/secs*10)) / 10
		if !p.Finished && p.Total > p.Done {
			p.ETA = duration(time.Duration(float64(p.Total-p.Done) / (float64(p.Done) / secs) * float64(time.Second)))
		}
	}
	return p
}

// duration is d rounded to the second, as "1h 2m 3s".
func duration(d time.Duration) string {
	d = d.Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	switch {
	case h > 0:
		return fmt.Sprintf("%dh %dm %ds", h, m, s)
	case m > 0:
		return fmt.Sprintf("%dm %ds", m, s)
	}
	return fmt.Sprintf("%ds", s)
}

type fieldChange struct {
	Field, Old, New string
}

type changeRow struct {
	Classname, Keyname, NewKey, Action, Link, Note string
	Fields                                         []fieldChange
}

type taskData struct {
	Task      *tasks.Task
	Short     string
	Self      string
	Progress  progress
	Counters  []counter
	Changes   []changeRow
	Errors    []string
	CanCancel bool
	Cancelled bool
	// Source is the event rule or schedule that submitted the task, nil for others.
	Source *taskSource
}

// taskSource is the event rule or schedule a task was submitted for.
type taskSource struct {
	Kind, Name, Link string
}

// sourceOf is the event rule or schedule that submitted t (its owner), or nil.
func sourceOf(t *tasks.Task) *taskSource {
	switch t.OwnerType {
	case "eventrule":
		return &taskSource{Kind: "event rule", Name: t.OwnerID, Link: link("_eventrule", t.OwnerID)}
	case "schedule":
		return &taskSource{Kind: "schedule", Name: t.OwnerID, Link: link("_schedule", t.OwnerID)}
	}
	return nil
}

type counter struct {
	Name  string
	Value int64
}

// taskPage: GET /data/private/task/<handle>/ — the task the user may see (else 404).
func (c *Console) taskPage(w http.ResponseWriter, r *http.Request, q *req) {
	handle := q.ps.ByName("handle")
	t, err := c.runner.GetFor(r.Context(), handle, q.auth)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	d := taskData{Task: t, Short: shortHandle(t.Handle), Self: taskURL(t.Handle), Progress: progressOf(t, c.db.Now()),
		CanCancel: !t.Finished() && !q.auth.ReadOnly, Cancelled: r.URL.Query().Get("done") == "cancel", Source: sourceOf(t)}
	for _, n := range counterNames {
		d.Counters = append(d.Counters, counter{Name: n, Value: d.Progress.Counters[n]})
	}
	if res := t.Result; res != nil {
		d.Errors = res.ErrorMessages
		for _, ch := range res.Changes {
			row := changeRow{Classname: ch.Classname, Keyname: ch.Keyname, NewKey: ch.NewKey, Action: ch.Action, Note: ch.Note}
			if ch.Action != string(model.ActionDelete) && !t.DryRun {
				key := ch.Keyname
				if ch.NewKey != "" {
					key = ch.NewKey
				}
				row.Link = link(ch.Classname, key)
			}
			for f, fc := range ch.Fields {
				row.Fields = append(row.Fields, fieldChange{Field: f, Old: text(fc.Old), New: text(fc.New)})
			}
			sort.Slice(row.Fields, func(i, j int) bool { return row.Fields[i].Field < row.Fields[j].Field })
			d.Changes = append(d.Changes, row)
		}
	}
	c.render(w, r, q, http.StatusOK, "task", "Task "+d.Short, d)
}

// taskProgress: GET /data/private/task/<handle>/progress/ — the live part of the page as
// JSON, with the same visibility as the page.
func (c *Console) taskProgress(w http.ResponseWriter, r *http.Request, q *req) {
	handle := q.ps.ByName("handle")
	w.Header().Set("Content-Type", "application/json")
	t, err := c.runner.GetFor(r.Context(), handle, q.auth)
	if err != nil {
		status := httperror.Status(err)
		msg := store.ErrorMessage(err)
		if status == http.StatusInternalServerError {
			c.log.Error("read task", "handle", handle, "error", err)
			msg = "internal error"
		}
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"error": msg})
		return
	}
	json.NewEncoder(w).Encode(progressOf(t, c.db.Now()))
}

// taskCancel: POST /data/private/task/<handle>/cancel/ — as the API's cancel: a queued
// task is cancelled at once, a running one after its current batch.
func (c *Console) taskCancel(w http.ResponseWriter, r *http.Request, q *req) {
	handle := q.ps.ByName("handle")
	t, err := c.runner.CancelFor(r.Context(), handle, q.auth)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	http.Redirect(w, r, taskURL(t.Handle)+"?done=cancel", http.StatusSeeOther)
}
