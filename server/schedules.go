package server

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"dataservice/store/model"
	"dataservice/tasks"
)

// scheduleView is a schedule as GET /api/schedules/ shows it: the listing's fields
// and the last run's task URL.
type scheduleView struct {
	*tasks.ScheduleStatus `yaml:",inline"`
	// TaskURL is the URL of the last run's task, "" when there is none.
	TaskURL string `json:"task_url" yaml:"task_url"`
}

type scheduleListReply struct {
	Count     int             `json:"count" yaml:"count"`
	Schedules []*scheduleView `json:"schedules" yaml:"schedules"`
}

// scheduleList: GET /api/schedules/ — every schedule with its next run times and its
// last run, for callers who may read _schedule instances.
func (s *server) scheduleList(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if s.denied(w, r, "p_data_access") {
		return
	}
	sch, err := s.db.Schema(r.Context(), "_schedule")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if auth := principalOf(r).auth; !model.CanRead(auth, sch) {
		s.writeError(w, r, http.StatusForbidden, "permission denied: this request needs "+model.ReadPermission(sch))
		return
	}
	list, err := tasks.ListSchedules(r.Context(), s.db, s.db.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := make([]*scheduleView, len(list))
	for i, sc := range list {
		out[i] = &scheduleView{ScheduleStatus: sc}
		if sc.LastTask != "" {
			out[i].TaskURL = s.absURL(r, "/api/tasks/"+sc.LastTask+"/")
		}
	}
	s.reply(w, r, http.StatusOK, scheduleListReply{Count: len(out), Schedules: out})
}
