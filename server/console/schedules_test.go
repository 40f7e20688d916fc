package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/tasks"
)

// TestSchedulesPage: the schedules tool lists each schedule with its next three run
// times (in its zone, UTC in the datetime) and links its last run's task; a disabled
// schedule shows no next runs; a user who may not read _schedule gets 403 and no
// sidebar link. The page has no script: the real console over HTTP.
func TestSchedulesPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(`
- {classname: _schema, keyname: box, name: {dataformat: string}}
- {classname: _pipeline, keyname: tidy, content: "- field_set: ['', name, x]"}
- {classname: _schedule, keyname: nightly, pipeline: tidy, schemas: [box], cron: "0 3 * * *", timezone: Europe/Paris, missed: skip}
- {classname: _schedule, keyname: hourly, pipeline: tidy, schemas: [box], cron: "@every 1h", dryrun: true}
- {classname: _schedule, keyname: paused, pipeline: tidy, schemas: [box], cron: "@daily", is_enabled: false}
- {classname: _user, keyname: plain, password: plain-pass-1}
- {classname: _role, keyname: lookers, permissions: [p_data_access], users: [plain]}
`)
	s := tasks.NewScheduler(tasks.New(e.db, tasks.Options{}), tasks.SchedulerOptions{Logger: testkit.Logger(t, 0)})
	for _, at := range []time.Duration{-2 * time.Hour, -time.Hour} {
		if _, err := s.Tick(context.Background(), testkit.Now.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
	handle := testkit.QueryString(t, e.db, "SELECT handle FROM tasks WHERE owner_id = 'hourly'")

	b := e.browser()
	b.signIn("admin", adminPassword)
	p := b.get("/data/private/schedule/")
	want(t, p, http.StatusOK, `id="schedule-list"`, `href="/data/private/_schedule/nightly/"`,
		// 03:00 in Paris is 02:00 UTC in November.
		`<time datetime="2026-11-23T02:00:00Z" title="2026-11-23T02:00:00Z">2026-11-23 03:00:00 &#43;01:00</time>`,
		`<time datetime="2026-11-24T02:00:00Z"`, `<time datetime="2026-11-25T02:00:00Z"`,
		// The last run was due an hour ago: the next is now.
		`<time datetime="2026-11-22T10:00:00Z"`, `<time datetime="2026-11-22T12:00:00Z"`,
		`<a href="/data/private/task/`+handle+`/">`+strings.SplitN(handle, "-", 2)[0]+`</a> <span class="status">submitted</span>`,
		`href="/data/private/schedule/"`)
	row := p.body[strings.Index(p.body, `id="schedule-paused"`):]
	row = row[:strings.Index(row, "</tr>")]
	if !strings.Contains(row, `<span class="badge">disabled</span>`) || strings.Contains(row, "<time") {
		t.Fatalf("the disabled schedule's row: %s", row)
	}
	if n := strings.Count(p.body, "<time "); n != 6 {
		t.Fatalf("%d run times shown, want 6 (three for each enabled schedule)", n)
	}

	o := e.browser()
	o.signIn("plain", "plain-pass-1")
	want(t, o.get("/data/private/schedule/"), http.StatusForbidden, "p_data_read")
	lacks(t, o.get("/"), `href="/data/private/schedule/"`)
}
