package tasks_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/tasks"
)

// schedBase is the first moment of the scheduler tests: a whole second, so due times
// of `@every` fall on whole seconds after it.
var schedBase = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// schedCounts counts a scheduler's due runs by result (its OnRun hook).
type schedCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *schedCounts) on(result string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[result]++
}

func (c *schedCounts) get(result string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[result]
}

// addSchedule stores a schedule of the marker pipeline over host.
func addSchedule(tb testing.TB, db *store.DB, name, cron, missed string) {
	tb.Helper()
	mustLoad(tb, db, fmt.Sprintf(`
- classname: _schedule
  keyname: %s
  pipeline: marker
  schemas: [host]
  cron: %q
  missed: %s
`, name, cron, missed))
}

// newScheduler is a scheduler over r whose results c counts.
func newScheduler(tb testing.TB, r *tasks.Runner, c *schedCounts) *tasks.Scheduler {
	return tasks.NewScheduler(r, tasks.SchedulerOptions{Logger: testkit.Logger(tb, 0), OnRun: c.on,
		Clock: func() time.Time { tb.Fatal("the tests tick with their own moments"); return time.Time{} }})
}

// tick calls s.Tick at now; an error fails the test.
func tick(tb testing.TB, s *tasks.Scheduler, now time.Time) {
	tb.Helper()
	if _, err := s.Tick(context.Background(), now); err != nil {
		tb.Fatalf("tick at %s: %v", now.Format(time.RFC3339Nano), err)
	}
}

// scheduledTasks counts the tasks a schedule submitted.
func scheduledTasks(tb testing.TB, db *store.DB, name string) int {
	tb.Helper()
	return queryInt(tb, db, "SELECT count(*) FROM tasks WHERE owner_type = 'schedule' AND owner_id = ?", name)
}

// lastRun is a schedule's last run as "result: error" (schedule_runs).
func lastRun(tb testing.TB, db *store.DB, name string) string {
	tb.Helper()
	return testkit.QueryString(tb, db, "SELECT last_result || ': ' || last_error FROM schedule_runs WHERE keyname = ?", name)
}

// runQueued runs every queued task to its end.
func runQueued(tb testing.TB, db *store.DB, r *tasks.Runner) {
	tb.Helper()
	_, rows := testkit.Rows(tb, db, "SELECT handle FROM tasks WHERE status = 'queued'")
	for _, row := range rows {
		handle := fmt.Sprint(row[0])
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		err := r.RunOne(ctx, handle)
		cancel()
		if err != nil {
			tb.Fatalf("run task %s: %v", handle, err)
		}
		if got := getTask(tb, r, handle); got.Status != tasks.StatusSucceeded {
			tb.Fatalf("task %s: %s (%v)", handle, got.Status, got.Error)
		}
	}
}

// TestScheduleEveryRunsInWindow: `@every 2s`, ticked every half second over ten
// seconds after its creation, submits five runs (at 2, 4, 6, 8 and 10 s), each as the
// schedule's author with the schedule as owner; a seconds cron runs every second.
func TestScheduleEveryRunsInWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cron string
		want int
	}{{"@every 2s", 5}, {"*/1 * * * * *", 10}} {
		t.Run(tc.cron, func(t *testing.T) {
			t.Parallel()
			db := newDB(t)
			insertRows(t, db, "host", []row{{Keyname: "h1", Enabled: true, Data: map[string]any{"name": "one", "note": "n"}}})
			addPipeline(t, db, "marker", markerPipeline, "")
			addSchedule(t, db, "tick", tc.cron, "run_once")
			r := newRunner(t, db, tasks.Options{})
			var c schedCounts
			s := newScheduler(t, r, &c)
			for i := 0; i <= 20; i++ {
				tick(t, s, schedBase.Add(time.Duration(i)*500*time.Millisecond))
				runQueued(t, db, r)
			}
			if got := scheduledTasks(t, db, "tick"); got != tc.want {
				t.Fatalf("runs: %d, want %d", got, tc.want)
			}
			if got, want := c.get(tasks.RunSubmitted), tc.want; got != want {
				t.Fatalf("submitted: %d, want %d", got, want)
			}
			if got := c.get(tasks.RunSkipped) + c.get(tasks.RunFailed); got != 0 {
				t.Fatalf("skipped or failed: %d, want 0", got)
			}
			list, err := r.List(context.Background(), tasks.OwnerSchedule, "tick", tasks.StatusSucceeded, 100)
			if err != nil {
				t.Fatal(err)
			}
			for _, task := range list {
				if task.Submitter != "system" || task.Pipeline != "marker" {
					t.Fatalf("task %s: submitter %s, pipeline %s; want system, marker", task.Handle, task.Submitter, task.Pipeline)
				}
			}
			if got, want := len(list), tc.want; got != want {
				t.Fatalf("succeeded runs: %d, want %d", got, want)
			}
			if got, want := testkit.QueryString(t, db, "SELECT data ->> 'note' FROM instances WHERE classname = 'host'"),
				"n"+strings.Repeat("X", tc.want); got != want {
				t.Fatalf("note: %s, want %s (one marker per run)", got, want)
			}
		})
	}
}

// TestScheduleOverlapSkips: while a run is still queued, the next due runs are
// skipped (counted, recorded); once it finished, the next due run is submitted.
func TestScheduleOverlapSkips(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	addPipeline(t, db, "marker", markerPipeline, "")
	addSchedule(t, db, "busy", "@every 2s", "run_once")
	r := newRunner(t, db, tasks.Options{})
	var c schedCounts
	s := newScheduler(t, r, &c)
	for i := 0; i <= 6; i++ {
		tick(t, s, schedBase.Add(time.Duration(i)*time.Second))
	}
	if got, want := scheduledTasks(t, db, "busy"), 1; got != want {
		t.Fatalf("runs: %d, want %d", got, want)
	}
	if got, want := c.get(tasks.RunSkipped), 2; got != want {
		t.Fatalf("skipped: %d, want %d (due at 4 s and 6 s)", got, want)
	}
	if got, want := testkit.QueryString(t, db, "SELECT last_result FROM schedule_runs WHERE keyname = 'busy'"), tasks.RunSkipped; got != want {
		t.Fatalf("last_result: %q, want %q", got, want)
	}
	if got, want := testkit.QueryString(t, db, "SELECT last_task FROM schedule_runs WHERE keyname = 'busy'"),
		testkit.QueryString(t, db, "SELECT handle FROM tasks WHERE owner_id = 'busy'"); got != want {
		t.Fatalf("last_task after the skips: %q, want the running one %q", got, want)
	}
	runQueued(t, db, r)
	tick(t, s, schedBase.Add(8*time.Second))
	if got, want := scheduledTasks(t, db, "busy"), 2; got != want {
		t.Fatalf("runs after the first finished: %d, want %d", got, want)
	}
}

// TestScheduleMissedAcrossRestart: after a run, the process stops; a new scheduler
// on a new handle of the same database starts an hour later. run_once submits one
// run for all that fell due, skip none; both then run at the next due time.
func TestScheduleMissedAcrossRestart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		missed       string
		afterRestart int
	}{{"run_once", 1}, {"skip", 0}} {
		t.Run(tc.missed, func(t *testing.T) {
			t.Parallel()
			path := newDBFile(t)
			db := openDB(t, path)
			mustLoad(t, db, testSchemas)
			addPipeline(t, db, "marker", markerPipeline, "")
			addSchedule(t, db, "hourly", "0 * * * *", tc.missed)
			r := newRunner(t, db, tasks.Options{})
			var c schedCounts
			s := newScheduler(t, r, &c)
			tick(t, s, schedBase.Add(30*time.Minute))
			tick(t, s, schedBase.Add(time.Hour+time.Second))
			runQueued(t, db, r)
			if got, want := scheduledTasks(t, db, "hourly"), 1; got != want {
				t.Fatalf("runs before the restart: %d, want %d", got, want)
			}
			db.Close()

			// Down from 11:00:01 to 16:20: five runs fell due.
			db2 := openDB(t, path)
			r2 := newRunner(t, db2, tasks.Options{})
			var c2 schedCounts
			s2 := newScheduler(t, r2, &c2)
			restart := schedBase.Add(6*time.Hour + 20*time.Minute)
			tick(t, s2, restart)
			tick(t, s2, restart.Add(time.Minute))
			if got, want := scheduledTasks(t, db2, "hourly"), 1+tc.afterRestart; got != want {
				t.Fatalf("runs after the restart: %d, want %d", got, want)
			}
			runQueued(t, db2, r2)
			tick(t, s2, schedBase.Add(7*time.Hour))
			if got, want := scheduledTasks(t, db2, "hourly"), 2+tc.afterRestart; got != want {
				t.Fatalf("runs at the next due time: %d, want %d", got, want)
			}
		})
	}
}

// TestScheduleChangedStartsFromNow: a schedule whose cron changes starts again from
// the change (no back-fill of the new expression's past due times).
func TestScheduleChangedStartsFromNow(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	addPipeline(t, db, "marker", markerPipeline, "")
	addSchedule(t, db, "edit", "0 0 1 1 *", "run_once")
	r := newRunner(t, db, tasks.Options{})
	var c schedCounts
	s := newScheduler(t, r, &c)
	tick(t, s, schedBase)
	addSchedule(t, db, "edit", "@every 1h", "run_once")
	tick(t, s, schedBase.Add(3*time.Hour)) // the change is seen here: it starts now
	if got := scheduledTasks(t, db, "edit"); got != 0 {
		t.Fatalf("runs right after the change: %d, want 0", got)
	}
	tick(t, s, schedBase.Add(4*time.Hour))
	if got, want := scheduledTasks(t, db, "edit"), 1; got != want {
		t.Fatalf("runs an hour after the change: %d, want %d", got, want)
	}
}

// TestScheduleTwoSchedulersSubmitOnce: two schedulers on two handles of one database
// (two nodes on PostgreSQL) tick at the same moments, concurrently: each due run is
// dealt with once, and every run is submitted once.
func TestScheduleTwoSchedulersSubmitOnce(t *testing.T) {
	t.Parallel()
	path := newDBFile(t)
	db1 := openDB(t, path)
	mustLoad(t, db1, testSchemas)
	addPipeline(t, db1, "marker", markerPipeline, "")
	addSchedule(t, db1, "both", "@every 2s", "run_once")
	db2 := openDB(t, path)
	r1, r2 := newRunner(t, db1, tasks.Options{}), newRunner(t, db2, tasks.Options{})
	var c1, c2 schedCounts
	s1, s2 := newScheduler(t, r1, &c1), newScheduler(t, r2, &c2)
	for i := 0; i <= 20; i++ {
		now := schedBase.Add(time.Duration(i) * 500 * time.Millisecond)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for j, s := range []*tasks.Scheduler{s1, s2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[j] = s.Tick(context.Background(), now)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("tick at %s: %v", now.Format(time.RFC3339Nano), err)
			}
		}
		runQueued(t, db1, r1)
	}
	submitted := c1.get(tasks.RunSubmitted) + c2.get(tasks.RunSubmitted)
	if got, want := submitted+c1.get(tasks.RunSkipped)+c2.get(tasks.RunSkipped), 5; got != want {
		t.Fatalf("due runs dealt with: %d, want %d", got, want)
	}
	if got, want := scheduledTasks(t, db1, "both"), 5; got != want || submitted != want {
		t.Fatalf("runs: %d (submitted %d), want %d", got, submitted, want)
	}
}

// TestScheduleRefusedSubmissionIsRecorded: a run the submission refuses (here the
// pipeline was disabled after the schedule was written) is recorded as failed with the
// reason and counted; the schedule goes on with the next due time.
func TestScheduleRefusedSubmissionIsRecorded(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	addPipeline(t, db, "marker", markerPipeline, "")
	addSchedule(t, db, "refused", "@every 2s", "run_once")
	mustLoad(t, db, "- {classname: _pipeline, keyname: marker, content: \"- field_append: ['', note, X]\", is_enabled: false}\n")
	r := newRunner(t, db, tasks.Options{})
	var c schedCounts
	s := newScheduler(t, r, &c)
	for i := 0; i <= 4; i++ {
		tick(t, s, schedBase.Add(time.Duration(i)*time.Second))
	}
	if got := scheduledTasks(t, db, "refused"); got != 0 {
		t.Fatalf("runs: %d, want 0", got)
	}
	if got, want := c.get(tasks.RunFailed), 2; got != want {
		t.Fatalf("failed: %d, want %d (due at 2 s and 4 s)", got, want)
	}
	if got, want := lastRun(t, db, "refused"),
		"failed: pipeline marker is disabled"; got != want {
		t.Fatalf("last run: %q, want %q", got, want)
	}
}
