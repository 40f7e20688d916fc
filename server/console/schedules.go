package console

import (
	"net/http"
	"net/url"
	"time"

	"dataservice/store/model"
	"dataservice/tasks"
)

// The schedules tool: /data/private/schedule/ lists every schedule (_schedule) with
// its next three run times and a link to its last run's task. It needs the read
// permission of _schedule, as GET /api/schedules/ does; the schedules themselves are
// edited as instances of _schedule.

// mayReadSchedules reports whether auth may read _schedule instances (the class has
// no p_read option of its own).
func mayReadSchedules(auth *model.Auth) bool {
	return model.CanRead(auth, &model.Schema{Keyname: "_schedule"})
}

// scheduleRun is one next run time, in the schedule's zone and in UTC.
type scheduleRun struct {
	Local, UTC string
}

type scheduleRow struct {
	*tasks.ScheduleStatus
	URL     string // the schedule's instance page
	Next    []scheduleRun
	TaskURL string // the last run's task page, "" when there is none
	Short   string
}

// scheduleList: GET /data/private/schedule/.
func (c *Console) scheduleList(w http.ResponseWriter, r *http.Request, q *req) {
	list, err := tasks.ListSchedules(r.Context(), c.db, c.db.Now())
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	rows := make([]scheduleRow, 0, len(list))
	for _, sc := range list {
		row := scheduleRow{ScheduleStatus: sc, URL: "/data/private/_schedule/" + url.PathEscape(sc.Keyname) + "/"}
		loc, err := model.LoadZone(sc.Timezone)
		if err != nil {
			loc = time.UTC
		}
		for _, t := range sc.Next {
			row.Next = append(row.Next, scheduleRun{Local: t.In(loc).Format("2006-01-02 15:04:05 -07:00"),
				UTC: t.UTC().Format(time.RFC3339)})
		}
		if sc.LastTask != "" {
			row.TaskURL, row.Short = taskURL(sc.LastTask), shortHandle(sc.LastTask)
		}
		rows = append(rows, row)
	}
	c.render(w, r, q, http.StatusOK, "schedules", "Schedules", rows)
}
