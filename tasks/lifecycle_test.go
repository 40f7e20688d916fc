package tasks_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
	"dataservice/tasks"
)

// markerDB is a database with n marker hosts and the marker pipeline.
func markerDB(t *testing.T, n int) *store.DB {
	t.Helper()
	db := newDB(t)
	insertRows(t, db, "host", markerRows(n))
	addPipeline(t, db, "marker", markerPipeline, "")
	return db
}

// startRun runs r.Run in the background; the returned stop cancels it and waits
// (bounded) for Run to return.
func startRun(t *testing.T, r *tasks.Runner) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan error, 1)
	go func() { returned <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		t.Helper()
		once.Do(func() {
			cancel()
			select {
			case err := <-returned:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(waitLimit):
				t.Fatalf("Run did not return within %v of its context ending", waitLimit)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitStatus waits (bounded) until the task has the status.
func waitStatus(t *testing.T, r *tasks.Runner, handle, status string) *tasks.Task {
	t.Helper()
	var task *tasks.Task
	waitFor(t, "task "+handle+" to be "+status, func() bool {
		task = getTask(t, r, handle)
		return task.Status == status
	})
	return task
}

func TestCancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("a queued task is cancelled at once and never runs", func(t *testing.T) {
		db := markerDB(t, 200)
		r := newRunner(t, db, tasks.Options{})
		h := submit(t, r, tasks.Params{Pipeline: "marker", Schemas: []string{"host"}})
		task, err := r.Cancel(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := task.Status, tasks.StatusCancelled; got != want {
			t.Fatalf("status after Cancel %q, want %q", got, want)
		}
		if task.FinishedAt == nil {
			t.Fatalf("finished_at not set")
		}
		stop := startRun(t, r)
		// A task queued after the cancelled one runs: once it is done, the
		// cancelled one would have been claimed first had it been claimable.
		h2 := submit(t, r, tasks.Params{Pipeline: "marker", Schemas: []string{"site"}})
		waitStatus(t, r, h2, tasks.StatusSucceeded)
		stop()
		task = getTask(t, r, h)
		if got, want := task.Status, tasks.StatusCancelled; got != want {
			t.Fatalf("status %q, want %q", got, want)
		}
		if task.StartedAt != nil || task.Progress.Done != 0 || task.Result != nil {
			t.Fatalf("cancelled task ran: started %v, done %d, result %+v", task.StartedAt != nil, task.Progress.Done, task.Result)
		}
		if got, want := markedCount(t, db, "host"), 0; got != want {
			t.Fatalf("hosts marked %d, want %d", got, want)
		}
	})
	t.Run("a running task stops after its current batch and keeps what was committed", func(t *testing.T) {
		const n, batch = 2000, 50
		db := markerDB(t, n)
		// A batch ends after 50 instances or after its time bound (a loaded machine may
		// reach that first): the batches and what they committed are counted.
		var r *tasks.Runner
		var batches, committed int
		r = newRunner(t, db, tasks.Options{BatchSize: batch, OnProcessed: func(n int) { committed += n }, AfterBatch: func(h string, b int) error {
			batches = b
			if b == 2 {
				task, err := r.Cancel(context.Background(), h)
				if err != nil {
					t.Errorf("Cancel: %v", err)
				} else if task.Status != tasks.StatusRunning {
					t.Errorf("status right after Cancel %q, want %q", task.Status, tasks.StatusRunning)
				}
			}
			return nil
		}})
		h := submit(t, r, tasks.Params{Pipeline: "marker", Schemas: []string{"host"}})
		task := runOne(t, r, h)
		if got, want := task.Status, tasks.StatusCancelled; got != want {
			t.Fatalf("status %q, want %q", got, want)
		}
		if task.Error != nil {
			t.Errorf("error %q, want none", *task.Error)
		}
		done := int(task.Progress.Done)
		if batches < 2 || batches > 3 || done != committed || done < 2 || done > 3*batch {
			t.Fatalf("progress done %d after %d batches that committed %d: want 2 or 3 batches of at most %d, all counted",
				done, batches, committed, batch)
		}
		if got, want := markedCount(t, db, "host"), done; got != want {
			t.Fatalf("hosts marked %d, want %d (what was committed)", got, want)
		}
		if got, want := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'host' AND data ->> 'note' = 'n'"), n-done; got != want {
			t.Fatalf("hosts untouched %d, want %d", got, want)
		}
		if got, want := int(task.Result.Scanned), done; got != want {
			t.Fatalf("scanned %d, want %d", got, want)
		}
	})
	t.Run("a finished task is left as it is", func(t *testing.T) {
		db := markerDB(t, 10)
		r := newRunner(t, db, tasks.Options{})
		h := submit(t, r, tasks.Params{Pipeline: "marker", Schemas: []string{"host"}})
		mustSucceed(t, runOne(t, r, h))
		task, err := r.Cancel(ctx, h)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := task.Status, tasks.StatusSucceeded; got != want {
			t.Fatalf("status %q, want %q", got, want)
		}
	})
	t.Run("an unknown task is not found", func(t *testing.T) {
		db := newDB(t)
		r := newRunner(t, db, tasks.Options{})
		_, err := r.Cancel(ctx, "no-such-handle")
		if got, want := store.ErrorCode(err)+" "+store.ErrorMessage(err), "not_found task not found"; got != want {
			t.Fatalf("Cancel: %q, want %q", got, want)
		}
	})
}

// hookHandler calls fn for each record, then passes it on.
type hookHandler struct {
	slog.Handler
	fn func(slog.Record)
}

func (h hookHandler) Handle(ctx context.Context, r slog.Record) error {
	h.fn(r)
	return h.Handler.Handle(ctx, r)
}

func TestShutdown(t *testing.T) {
	t.Parallel()
	t.Run("the current batch commits and the task goes back to the queue", func(t *testing.T) {
		const n, batch = 2000, 50
		db := markerDB(t, n)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// The batches committed and what they held: a batch ends after 50 instances or
		// after its time bound (a slow machine reaches it first).
		var batches, committed int
		r1 := newRunner(t, db, tasks.Options{BatchSize: batch,
			OnProcessed: func(n int) { batches, committed = batches+1, committed+n },
			AfterBatch: func(_ string, b int) error {
				if b == 2 {
					// Hold the write connection so that batch 3 is under way (waiting for it)
					// when the shutdown comes, then let it go.
					tx, err := db.Begin(context.Background())
					if err != nil {
						t.Errorf("begin: %v", err)
						return nil
					}
					go func() {
						time.Sleep(50 * time.Millisecond)
						cancel()
						tx.Rollback()
					}()
				}
				return nil
			}})
		h := submit(t, r1, tasks.Params{Pipeline: "marker", Schemas: []string{"host"}})
		returned := make(chan error, 1)
		go func() { returned <- r1.Run(ctx) }()
		select {
		case err := <-returned:
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
		case <-time.After(waitLimit):
			t.Fatalf("Run did not return within %v", waitLimit)
		}
		task := getTask(t, r1, h)
		msg := ""
		if task.Error != nil {
			msg = *task.Error
		}
		if got, want := task.Status, tasks.StatusQueued; got != want {
			t.Fatalf("status after shutdown %q (error %q), want %q", got, msg, want)
		}
		if got, want := taskColumn(t, db, h, "lease_owner"), ""; got != want {
			t.Fatalf("lease owner %q, want none", got)
		}
		done := progressDone(t, db, h)
		if batches != 2 && batches != 3 {
			t.Fatalf("%d batches committed, want 2 or 3", batches)
		}
		if done != committed || done < batches {
			t.Fatalf("progress done %d, want the %d whole batches committed (%d instances)", done, batches, committed)
		}
		if got, want := markedCount(t, db, "host"), done; got != want {
			t.Fatalf("hosts marked %d, want %d", got, want)
		}
		t.Logf("shutdown after %d instances", done)

		r2 := newRunner(t, db, tasks.Options{BatchSize: batch})
		stop := startRun(t, r2)
		task = waitStatus(t, r2, h, tasks.StatusSucceeded)
		stop()
		checkMarkedOnce(t, db, h, "host", n)
		if got, want := counts(task.Result), counts(&tasks.Result{Scanned: n, Updated: n}); got != want {
			t.Fatalf("counts:\n got %s\nwant %s", got, want)
		}
	})
	t.Run("a shutdown before the first batch leaves the task queued", func(t *testing.T) {
		db := markerDB(t, 500)
		mustLoad(t, db, `
- classname: _user
  keyname: alice
- classname: _role
  keyname: role_runner
  permissions: [p_pipeline_run, p_data_read, p_data_update]
  users: [alice]
`)
		auth, err := db.UserAuth(context.Background(), "alice")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		rec := new(testkit.Recorder)
		logger := slog.New(hookHandler{Handler: rec.Logger(t).Handler(), fn: func(r slog.Record) {
			if r.Message == "task start" {
				cancel()
			}
		}})
		r1 := newRunner(t, db, tasks.Options{Logger: logger})
		h := submit(t, r1, tasks.Params{Pipeline: "marker", Schemas: []string{"host"}, Auth: auth})
		if err := r1.Run(ctx); err != nil {
			t.Fatal(err)
		}
		task := getTask(t, r1, h)
		msg := ""
		if task.Error != nil {
			msg = *task.Error
		}
		if got, want := task.Status+" "+msg, tasks.StatusQueued+" "; got != want {
			t.Fatalf("status and error %q, want %q", got, want)
		}
		r2 := newRunner(t, db, tasks.Options{})
		mustSucceed(t, runOne(t, r2, h))
		checkMarkedOnce(t, db, h, "host", 500)
	})
}

func TestWorkersRunEveryTaskOnce(t *testing.T) {
	t.Parallel()
	const n, runs = 1000, 6
	db := newDB(t)
	insertRows(t, db, "host", markerRows(n))
	addPipeline(t, db, "append", "- field_append: ['', note, X]\n", "")
	r := newRunner(t, db, tasks.Options{Workers: 3, BatchSize: 100})
	var handles []string
	for i := 0; i < runs; i++ {
		handles = append(handles, submit(t, r, tasks.Params{Pipeline: "append", Schemas: []string{"host"}}))
	}
	stop := startRun(t, r)
	for _, h := range handles {
		res := mustSucceed(t, waitStatus(t, r, h, tasks.StatusSucceeded))
		if got, want := counts(res), counts(&tasks.Result{Scanned: n, Updated: n}); got != want {
			t.Fatalf("task %s counts:\n got %s\nwant %s", h, got, want)
		}
	}
	stop()
	if got, want := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'host' AND data ->> 'note' = ?", "n"+strings.Repeat("X", runs)), n; got != want {
		t.Fatalf("hosts with %d markers: %d, want %d", runs, got, want)
	}
	if got, want := queryInt(t, db, "SELECT count(*) FROM revisions WHERE classname = 'host'"), n*runs; got != want {
		t.Fatalf("revisions %d, want %d", got, want)
	}
}

func TestPurge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := markerDB(t, 1)
	r := newRunner(t, db, tasks.Options{})
	ago := func(d time.Duration) string { return time.Now().UTC().Add(-d).Format(time.RFC3339) }
	day := 24 * time.Hour
	states := []struct {
		name, status string
		finished     any
	}{
		{"succeeded 40 days ago", "succeeded", ago(40 * day)},
		{"failed 31 days ago", "failed", ago(31 * day)},
		{"cancelled 20 days ago", "cancelled", ago(20 * day)},
		{"succeeded an hour ago", "succeeded", ago(time.Hour)},
		{"queued 40 days ago", "queued", nil},
		{"running since 40 days ago", "running", nil},
	}
	handles := map[string]string{}
	for _, s := range states {
		h := submit(t, r, tasks.Params{Pipeline: "marker", Schemas: []string{"host"}})
		handles[s.name] = h
		err := db.WithTx(ctx, func(tx *store.Tx) error {
			_, err := tasks.QueueTable.Exec(ctx, tx, "UPDATE tasks SET status = ?, finished_at = ?, created_at = ? WHERE handle = ?",
				s.status, s.finished, ago(40*day), h)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	kept := func() string {
		var out []string
		for _, s := range states {
			if _, err := r.Get(ctx, handles[s.name]); err == nil {
				out = append(out, s.name)
			} else if !store.IsNotFound(err) {
				t.Fatalf("get %s: %v", s.name, err)
			}
		}
		return strings.Join(out, ", ")
	}
	t.Run("finished tasks older than 30 days are removed", func(t *testing.T) {
		n, err := r.Purge(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := n, int64(2); got != want {
			t.Errorf("purged %d, want %d", got, want)
		}
		if got, want := kept(), "cancelled 20 days ago, succeeded an hour ago, queued 40 days ago, running since 40 days ago"; got != want {
			t.Fatalf("kept: %s\nwant: %s", got, want)
		}
	})
	t.Run("TASK_RETENTION_DAYS sets the age and Run purges at start", func(t *testing.T) {
		if err := db.SetConfig(ctx, map[string]string{"TASK_RETENTION_DAYS": "10"}); err != nil {
			t.Fatal(err)
		}
		// The running task's lease is long gone; keep Run from claiming it and the
		// queued one so they stay as they are.
		testkit.ExecAll(t, db, "UPDATE tasks SET lease_until = '9999-01-01T00:00:00.000Z' WHERE status = 'running'")
		testkit.ExecAll(t, db, fmt.Sprintf("UPDATE tasks SET status = 'paused' WHERE handle = '%s'", handles["queued 40 days ago"]))
		stop := startRun(t, r)
		waitFor(t, "Run to purge", func() bool {
			_, err := r.Get(ctx, handles["cancelled 20 days ago"])
			return store.IsNotFound(err)
		})
		stop()
		if got, want := kept(), "succeeded an hour ago, queued 40 days ago, running since 40 days ago"; got != want {
			t.Fatalf("kept: %s\nwant: %s", got, want)
		}
	})
}

func TestPermissionsRecheckedAtStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	setup := func(t *testing.T) (*store.DB, *tasks.Runner, func(who, pipeline string) string) {
		db := markerDB(t, 300)
		addPipeline(t, db, "guarded", markerPipeline, "p_special")
		mustLoad(t, db, `
- classname: _permission
  keyname: p_special
- classname: _user
  keyname: carol
- classname: _role
  keyname: role_runner
  permissions: [p_pipeline_run, p_data_read, p_data_update, p_special]
  users: [carol]
- classname: _apikey
  keyname: k1
  secret: s3cret
  is_readonly: false
  permissions: [p_pipeline_run, p_data_read, p_data_update]
`)
		r := newRunner(t, db, tasks.Options{})
		submitAs := func(who, pipeline string) string {
			var auth *model.Auth
			var err error
			if who == "k1" {
				auth, _, err = db.KeyAuth(ctx, "k1")
			} else {
				auth, err = db.UserAuth(ctx, who)
			}
			if err != nil {
				t.Fatal(err)
			}
			return submit(t, r, tasks.Params{Pipeline: pipeline, Schemas: []string{"host"}, Auth: auth})
		}
		return db, r, submitAs
	}
	for _, tc := range []struct {
		name     string
		who      string
		pipeline string
		change   string
		err      string
	}{
		{"a user disabled before the start fails the task", "carol", "guarded",
			"- {classname: _user, keyname: carol, is_enabled: false}",
			"user carol is disabled"},
		{"a user deleted before the start fails the task", "carol", "guarded",
			"- {classname: _user, keyname: carol, _action: delete}",
			"user carol no longer exists"},
		{"a lost run_permission fails the task", "carol", "guarded",
			"- {classname: _role, keyname: role_runner, permissions: [p_pipeline_run, p_data_read, p_data_update]}",
			"permission denied: pipeline guarded needs p_special"},
		{"a lost update permission fails the task", "carol", "guarded",
			"- {classname: _role, keyname: role_runner, permissions: [p_pipeline_run, p_data_read, p_special]}",
			"permission denied: updating host needs p_data_update"},
		{"a disabled API key fails the task", "k1", "marker",
			"- {classname: _apikey, keyname: k1, is_enabled: false}",
			"API key k1 is no longer valid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, r, submitAs := setup(t)
			h := submitAs(tc.who, tc.pipeline)
			mustLoad(t, db, tc.change)
			task := runOne(t, r, h)
			msg := "<nil>"
			if task.Error != nil {
				msg = *task.Error
			}
			if got, want := task.Status+": "+msg, tasks.StatusFailed+": "+tc.err; got != want {
				t.Fatalf("task %q, want %q", got, want)
			}
			if got, want := markedCount(t, db, "host"), 0; got != want {
				t.Fatalf("hosts marked %d, want %d", got, want)
			}
		})
	}
	t.Run("a submitter who keeps the permissions runs the task", func(t *testing.T) {
		db, r, submitAs := setup(t)
		h := submitAs("carol", "guarded")
		mustSucceed(t, runOne(t, r, h))
		checkMarkedOnce(t, db, h, "host", 300)
	})
}

func TestPanickingTask(t *testing.T) {
	t.Parallel()
	db := markerDB(t, 300)
	rec := new(testkit.Recorder)
	var first string
	var mu sync.Mutex
	r := newRunner(t, db, tasks.Options{Logger: rec.Logger(t), AfterBatch: func(h string, b int) error {
		mu.Lock()
		defer mu.Unlock()
		if h == first && b == 1 {
			panic("boom")
		}
		return nil
	}})
	mu.Lock()
	first = submit(t, r, tasks.Params{Pipeline: "marker", Schemas: []string{"host"}})
	mu.Unlock()
	second := submit(t, r, tasks.Params{Pipeline: "marker", Schemas: []string{"site"}})
	insertRows(t, db, "site", markerRows(100))
	stop := startRun(t, r)
	waitStatus(t, r, second, tasks.StatusSucceeded)
	stop()

	t.Run("the panicking task is failed with an internal error", func(t *testing.T) {
		task := getTask(t, r, first)
		msg := "<nil>"
		if task.Error != nil {
			msg = *task.Error
		}
		if got, want := task.Status+": "+msg, tasks.StatusFailed+": internal error"; got != want {
			t.Fatalf("task %q, want %q", got, want)
		}
		// The first batch committed before the panic: it ends after 50 instances or after
		// the batch time, whichever comes first. What it committed stays, nothing more.
		committed := progressDone(t, db, first)
		if committed < 1 || committed > 50 {
			t.Fatalf("progress done %d, want the first batch's (1..50)", committed)
		}
		if got, want := markedCount(t, db, "host"), committed; got != want {
			t.Fatalf("hosts marked %d, want the committed batch (%d)", got, want)
		}
	})
	t.Run("the panic is logged with its stack", func(t *testing.T) {
		logged := rec.Find(slog.LevelError, "task panicked")
		if got, want := len(logged), 1; got != want {
			t.Fatalf("%d panic records, want %d", got, want)
		}
		if got, want := logged[0].Attrs["handle"]+" "+logged[0].Attrs["panic"], first+" boom"; got != want {
			t.Errorf("record %q, want %q", got, want)
		}
		if !strings.Contains(logged[0].Attrs["stack"], "TestPanickingTask") {
			t.Errorf("stack does not show the panicking function:\n%s", logged[0].Attrs["stack"])
		}
	})
	t.Run("the runner keeps working", func(t *testing.T) {
		checkMarkedOnce(t, db, second, "site", 100)
	})
}

func TestGetAndList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := markerDB(t, 10)
	r := newRunner(t, db, tasks.Options{})
	a1 := submit(t, r, tasks.Params{Pipeline: "marker", Schemas: []string{"host"}, DryRun: true, OwnerType: "api", OwnerID: "1"})
	b1 := submit(t, r, tasks.Params{Pipeline: "marker", Schemas: []string{"host"}, OwnerType: "api", OwnerID: "2"})
	a2 := submit(t, r, tasks.Params{Pipeline: "bulk_delete_disabled", Schemas: []string{"site", "host"}, OwnerType: "api", OwnerID: "1"})
	mustSucceed(t, runOne(t, r, a1))

	t.Run("a task shows what it was submitted with", func(t *testing.T) {
		task := getTask(t, r, a2)
		got := fmt.Sprintf("%s %s %v %v %s %s/%s", task.Kind, task.Pipeline, task.Schemas, task.DryRun, task.Status, task.OwnerType, task.OwnerID)
		if want := "pipeline bulk_delete_disabled [site host] false queued api/1"; got != want {
			t.Fatalf("task %q, want %q", got, want)
		}
		if task.StartedAt != nil || task.FinishedAt != nil || task.Result != nil || task.Error != nil {
			t.Fatalf("queued task has run fields: %+v", task)
		}
	})
	t.Run("a finished dry run shows its result and full progress", func(t *testing.T) {
		task := getTask(t, r, a1)
		if got, want := fmt.Sprintf("%v %v %d/%d %v", task.DryRun, task.StartedAt != nil && task.FinishedAt != nil,
			task.Progress.Done, task.Progress.Total, task.Progress.Percent), "true true 10/10 100"; got != want {
			t.Fatalf("task %q, want %q", got, want)
		}
		if got, want := counts(task.Result), counts(&tasks.Result{Scanned: 10, Updated: 10}); got != want {
			t.Fatalf("counts %s, want %s", got, want)
		}
	})
	t.Run("an owner lists only its tasks, newest first", func(t *testing.T) {
		list, err := r.List(ctx, "api", "1", "", 10)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, task := range list {
			got = append(got, task.Handle)
		}
		if want := []string{a2, a1}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("list %v, want %v", got, want)
		}
	})
	t.Run("a status filter and a limit apply", func(t *testing.T) {
		list, err := r.List(ctx, "", "", tasks.StatusQueued, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].Handle != a2 {
			t.Fatalf("list %+v, want only %s", list, a2)
		}
		all, err := r.List(ctx, "", "", "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(all), 3; got != want {
			t.Fatalf("all tasks: %d, want %d", got, want)
		}
		other, err := r.List(ctx, "api", "2", "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(other) != 1 || other[0].Handle != b1 {
			t.Fatalf("owner 2 lists %+v, want only %s", other, b1)
		}
	})
	t.Run("an unknown handle is not found", func(t *testing.T) {
		_, err := r.Get(ctx, "nope")
		if got, want := store.ErrorCode(err)+" "+store.ErrorMessage(err), "not_found task not found"; got != want {
			t.Fatalf("Get: %q, want %q", got, want)
		}
	})
}
