package tasks_test

import (
	"context"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/tasks"
)

// TestScheduleChangedDuringTick: a schedule changed after Tick read the schedules and
// before its due run is dealt with is dealt with as the run's transaction reads it:
// disabled or deleted, no run; its cron changed, no run now (the next tick starts it
// again); its pipeline or author changed, the run uses the new one.
func TestScheduleChangedDuringTick(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, change string
		// as loads the change as this user ("" = the CLI, as system).
		as       string
		runs     int
		pipeline string
		// submitter of the run when one is submitted.
		submitter string
	}{
		{name: "disabled", change: "- {classname: _schedule, keyname: s1, is_enabled: false}\n"},
		{name: "deleted", change: "- {classname: _schedule, keyname: s1, _action: delete}\n"},
		{name: "cron", change: "- {classname: _schedule, keyname: s1, cron: '0 3 * * *'}\n"},
		{name: "pipeline", change: "- {classname: _schedule, keyname: s1, pipeline: other}\n",
			runs: 1, pipeline: "other", submitter: "system"},
		{name: "author", change: "- {classname: _schedule, keyname: s1, description: ivy's now}\n", as: "ivy",
			runs: 1, pipeline: "marker", submitter: "user:ivy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := newDB(t)
			mustLoad(t, db, "- {classname: host, keyname: a, note: x}\n"+ivy+
				"- {classname: _role, keyname: ivyadmin, permissions: [p_pipeline_admin], users: [ivy]}\n")
			addPipeline(t, db, "marker", markerPipeline, "")
			addPipeline(t, db, "other", markerPipeline, "")
			addSchedule(t, db, "s1", "@every 1s", "run_once")
			r := newRunner(t, db, tasks.Options{})
			var c schedCounts
			s := newScheduler(t, r, &c)
			tick(t, s, schedBase) // starts the schedule's state
			changed := 0
			tasks.SetBeforeRun(s, func(keyname string) {
				changed++
				opts := store.LoadOptions{}
				if tc.as != "" {
					opts.Auth = userAuthOf(t, db, tc.as)
				}
				testkit.MustLoad(t, db, tc.change, opts)
			})
			tick(t, s, schedBase.Add(time.Second)) // s1 falls due
			if changed != 1 {
				t.Fatalf("the hook ran %d times, want 1", changed)
			}
			if got := scheduledTasks(t, db, "s1"); got != tc.runs {
				t.Fatalf("runs: %d, want %d", got, tc.runs)
			}
			if got := c.get(tasks.RunSubmitted); got != tc.runs {
				t.Fatalf("submitted: %d, want %d", got, tc.runs)
			}
			if tc.runs == 0 {
				return
			}
			list, err := r.List(context.Background(), tasks.OwnerSchedule, "s1", "", 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 1 || list[0].Pipeline != tc.pipeline || list[0].Submitter != tc.submitter {
				t.Fatalf("run %+v; want pipeline %s, submitter %s", list[0], tc.pipeline, tc.submitter)
			}
		})
	}
}

// TestScheduleTaskNotSeenByNamesake: a schedule's run is seen by its author; a user
// made again with the author's login after the author was deleted is another user and
// does not see it.
func TestScheduleTaskNotSeenByNamesake(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	mustLoad(t, db, "- {classname: host, keyname: a, note: x}\n"+ivy+
		"- {classname: _role, keyname: ivyadmin, permissions: [p_pipeline_admin], users: [ivy]}\n")
	addPipeline(t, db, "marker", markerPipeline, "")
	testkit.MustLoad(t, db, "- {classname: _schedule, keyname: s1, pipeline: marker, schemas: [host], cron: '@every 1s'}\n",
		store.LoadOptions{Auth: userAuthOf(t, db, "ivy")})
	r := newRunner(t, db, tasks.Options{})
	var c schedCounts
	s := newScheduler(t, r, &c)
	tick(t, s, schedBase)
	tick(t, s, schedBase.Add(time.Second))
	h := testkit.QueryString(t, db, "SELECT handle FROM tasks WHERE owner_id = 's1'")
	ctx := context.Background()
	if _, err := r.GetFor(ctx, h, userAuthOf(t, db, "ivy")); err != nil {
		t.Fatalf("the author reads its scheduled run: %v", err)
	}
	mustLoad(t, db, "- {classname: _user, keyname: ivy, _action: delete}\n"+
		"- {classname: _user, keyname: ivy, password: other-pass-1}\n"+
		"- {classname: _role, keyname: other, permissions: [p_pipeline_run, p_data_access], users: [ivy]}\n")
	if _, err := r.GetFor(ctx, h, userAuthOf(t, db, "ivy")); !store.IsNotFound(err) {
		t.Fatalf("the namesake reads the old author's scheduled run: err %v, want not found", err)
	}
}
