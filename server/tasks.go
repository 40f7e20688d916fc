package server

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"dataservice/tasks"
)

// visibleTask returns the task when the caller may see it (tasks.Runner.GetFor: its
// own, or every task for callers holding every permission); anyone else gets the same
// 404 as for a missing task.
func (s *server) visibleTask(r *http.Request, handle string) (*tasks.Task, error) {
	return s.runner.GetFor(r.Context(), handle, principalOf(r).auth)
}

// shown fills a task's empty result lists, so replies carry [] rather than null
// (changes and error_messages are always lists in the task detail).
func shown(t *tasks.Task) *tasks.Task {
	if t.Result != nil {
		if t.Result.Changes == nil {
			t.Result.Changes = []tasks.Change{}
		}
		if t.Result.ErrorMessages == nil {
			t.Result.ErrorMessages = []string{}
		}
	}
	return t
}

// taskView is a task as its detail shows it: when the run had errors, "errors" and the
// first error messages come before everything else, so a task whose status is
// "succeeded" (the seed's statuses are kept) while instances failed cannot be misread.
type taskView struct {
	Errors        *int64   `json:"errors,omitempty" yaml:"errors,omitempty"`
	ErrorMessages []string `json:"error_messages,omitempty" yaml:"error_messages,omitempty"`
	tasks.Task    `yaml:",inline"`
}

// errorsFirst wraps t in a taskView; at most the first 5 error messages are repeated
// at the top (result.error_messages keeps up to 100).
func errorsFirst(t *tasks.Task) *taskView {
	v := &taskView{Task: *t}
	if r := t.Result; r != nil && r.Errors > 0 {
		n := r.Errors
		v.Errors = &n
		v.ErrorMessages = r.ErrorMessages[:min(5, len(r.ErrorMessages))]
	}
	return v
}

// taskDetail: GET /api/tasks/<handle>/ — the target of task_url.
func (s *server) taskDetail(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	if s.denied(w, r, "p_pipeline_run") {
		return
	}
	t, err := s.visibleTask(r, ps.ByName("handle"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.reply(w, r, http.StatusOK, errorsFirst(shown(t)))
}

type taskListReply struct {
	Count int           `json:"count" yaml:"count"`
	Tasks []*tasks.Task `json:"tasks" yaml:"tasks"`
}

// taskList: GET /api/tasks/?status=&limit= — the caller's tasks, newest first (every
// task for callers holding every permission).
func (s *server) taskList(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if s.denied(w, r, "p_pipeline_run") {
		return
	}
	q := r.URL.Query()
	status := q.Get("status")
	switch status {
	case "", tasks.StatusQueued, tasks.StatusRunning, tasks.StatusSucceeded, tasks.StatusFailed, tasks.StatusCancelled:
	default:
		s.writeError(w, r, http.StatusBadRequest, "status must be queued, running, succeeded, failed or cancelled")
		return
	}
	limit, ok := s.listLimit(w, r, q)
	if !ok {
		return
	}
	list, err := s.runner.ListFor(r.Context(), principalOf(r).auth, status, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, t := range list {
		shown(t)
	}
	s.reply(w, r, http.StatusOK, taskListReply{Count: len(list), Tasks: list})
}

// taskCancel: POST /api/tasks/<handle>/cancel/ — a queued task is cancelled at once, a
// running one after its current batch.
func (s *server) taskCancel(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	if s.denied(w, r, "p_pipeline_run") {
		return
	}
	t, err := s.runner.CancelFor(r.Context(), ps.ByName("handle"), principalOf(r).auth)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.reply(w, r, http.StatusOK, errorsFirst(shown(t)))
}

// listLimit reads a list's limit parameter (1 to 500, default 50); on a bad value it
// answers 400 and reports false.
func (s *server) listLimit(w http.ResponseWriter, r *http.Request, q url.Values) (int, bool) {
	v := q.Get("limit")
	if v == "" {
		return 50, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 500 {
		s.writeError(w, r, http.StatusBadRequest, "limit must be an integer from 1 to 500")
		return 0, false
	}
	return n, true
}
