package tasks_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/tasks"
)

// errCrash is what AfterBatch returns to make a runner abandon its task as if its
// process had died.
var errCrash = errors.New("simulated crash")

func TestResumeAfterCrash(t *testing.T) {
	t.Parallel()
	const hosts, sites, batch = 1000, 500, 50
	db := newDB(t)
	insertRows(t, db, "host", markerRows(hosts))
	insertRows(t, db, "site", markerRows(sites))
	addPipeline(t, db, "marker", markerPipeline, "")

	// The first runner dies after the batch that brings what it committed to hosts+4*batch
	// or more: with full batches, batch 25 (the host schema took 21 batches, the 21st
	// found nothing more). A batch also ends after a time bound, so on a slow machine it
	// may hold fewer instances; either way it dies in the middle of the site schema.
	ctx1, die := context.WithCancel(context.Background())
	defer die()
	var committed atomic.Int64
	r1 := newRunner(t, db, tasks.Options{BatchSize: batch, Lease: 500 * time.Millisecond,
		OnProcessed: func(n int) { committed.Add(int64(n)) },
		AfterBatch: func(_ string, n int) error {
			if committed.Load() >= hosts+4*batch {
				die()
				return errCrash
			}
			return nil
		}})
	h := submit(t, r1, tasks.Params{Pipeline: "marker", Schemas: []string{"host", "site"}})
	if err := r1.RunOne(ctx1, h); !errors.Is(err, context.Canceled) {
		t.Fatalf("RunOne of the dying runner: %v, want context.Canceled", err)
	}

	t.Run("the abandoned task stays running under its lease", func(t *testing.T) {
		task := getTask(t, r1, h)
		if got, want := task.Status, tasks.StatusRunning; got != want {
			t.Fatalf("status %q, want %q", got, want)
		}
		if taskColumn(t, db, h, "lease_owner") == "" || taskColumn(t, db, h, "lease_until") == "" {
			t.Fatalf("no lease on the abandoned task")
		}
		if got, want := task.Progress.Done, committed.Load(); got != want {
			t.Fatalf("progress done %d, want %d", got, want)
		}
		if got, want := task.Progress.Total, int64(hosts+sites); got != want {
			t.Fatalf("progress total %d, want %d", got, want)
		}
	})
	t.Run("the checkpoint matches what was committed", func(t *testing.T) {
		if got, want := markedCount(t, db, "host"), hosts; got != want {
			t.Fatalf("hosts marked %d, want %d", got, want)
		}
		if got, want := markedCount(t, db, "site"), int(committed.Load())-hosts; got != want || got >= sites {
			t.Fatalf("sites marked %d, want %d", got, want)
		}
		last := queryInt(t, db, "SELECT max(id) FROM instances WHERE classname = 'site' AND data ->> 'note' = 'nX'")
		if got, want := taskColumn(t, db, h, "checkpoint"), fmt.Sprintf(`{"schema":1,"after":%d}`, last); got != want {
			t.Fatalf("checkpoint %s, want %s", got, want)
		}
	})

	r2 := newRunner(t, db, tasks.Options{BatchSize: batch, Lease: 300 * time.Millisecond})
	task := runOne(t, r2, h)
	res := mustSucceed(t, task)
	t.Run("a new runner takes the task over and every instance is processed exactly once", func(t *testing.T) {
		checkMarkedOnce(t, db, h, "host", hosts)
		checkMarkedOnce(t, db, h, "site", sites)
		if got, want := counts(res), counts(&tasks.Result{Scanned: hosts + sites, Updated: hosts + sites}); got != want {
			t.Fatalf("counts:\n got %s\nwant %s", got, want)
		}
		if got, want := fmt.Sprint(task.Progress.Done, task.Progress.Total), fmt.Sprint(hosts+sites, hosts+sites); got != want {
			t.Fatalf("progress done/total %s, want %s", got, want)
		}
		if got, want := taskColumn(t, db, h, "lease_owner"), ""; got != want {
			t.Fatalf("lease_owner %q after the end, want none", got)
		}
	})
}

func TestLostLeaseBatchDoesNotCommit(t *testing.T) {
	t.Parallel()
	const n, batch = 500, 50
	db := newDB(t)
	insertRows(t, db, "host", markerRows(n))
	addPipeline(t, db, "marker", markerPipeline, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := new(testkit.Recorder)
	// What the two batches before the takeover committed: 2*batch, or fewer when a batch
	// ended at its time bound on a slow machine.
	var committed int
	r1 := newRunner(t, db, tasks.Options{BatchSize: batch, Lease: time.Minute, Logger: rec.Logger(t),
		OnProcessed: func(n int) { committed += n },
		AfterBatch: func(h string, b int) error {
			if b == 2 {
				// Another runner took the task over (its lease looked expired).
				testkit.ExecAll(t, db, "UPDATE tasks SET lease_owner = 'other runner' WHERE handle = '"+h+"'")
			} else if b > 2 {
				t.Errorf("batch %d committed after the lease was lost", b)
			}
			return nil
		}})
	h := submit(t, r1, tasks.Params{Pipeline: "marker", Schemas: []string{"host"}})
	stopped := make(chan struct{})
	go func() {
		// RunOne keeps waiting for the task it no longer holds: stop it once it let go.
		defer close(stopped)
		defer cancel()
		for deadline := time.Now().Add(waitLimit); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if len(rec.Find(slog.LevelInfo, "task interrupted; it resumes from its checkpoint")) > 0 {
				return
			}
		}
		t.Errorf("the runner did not let the task go within %v", waitLimit)
	}()
	r1.RunOne(ctx, h)
	<-stopped

	t.Run("the batch after the takeover is rolled back", func(t *testing.T) {
		if committed < 2 || committed > 2*batch {
			t.Fatalf("the two batches committed %d instances, want 2..%d", committed, 2*batch)
		}
		if got, want := markedCount(t, db, "host"), committed; got != want {
			t.Fatalf("hosts marked %d, want %d", got, want)
		}
		if got, want := progressDone(t, db, h), committed; got != want {
			t.Fatalf("progress done %d, want %d", got, want)
		}
		if got, want := taskColumn(t, db, h, "status")+" "+taskColumn(t, db, h, "lease_owner"), "running other runner"; got != want {
			t.Fatalf("status and lease owner %q, want %q", got, want)
		}
	})
	t.Run("the runner holding the lease finishes exactly once", func(t *testing.T) {
		testkit.ExecAll(t, db, "UPDATE tasks SET lease_until = '2000-01-01T00:00:00.000Z' WHERE handle = '"+h+"'")
		r2 := newRunner(t, db, tasks.Options{BatchSize: batch})
		mustSucceed(t, runOne(t, r2, h))
		checkMarkedOnce(t, db, h, "host", n)
	})
}

// Environment of the helper process of TestResumeAfterKill.
const (
	helperDBEnv   = "TASKS_TEST_HELPER_DB"
	helperTaskEnv = "TASKS_TEST_HELPER_TASK"
)

// TestHelperProcess is not a test: TestResumeAfterKill runs the test binary again with
// only this function selected, as a separate process that runs a task until killed.
func TestHelperProcess(t *testing.T) {
	t.Parallel()
	path, handle := os.Getenv(helperDBEnv), os.Getenv(helperTaskEnv)
	if path == "" {
		t.Skip("helper process of TestResumeAfterKill")
	}
	db, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := tasks.New(db, tasks.Options{BatchSize: 50, Lease: 500 * time.Millisecond, Poll: 10 * time.Millisecond,
		// Pace the batches so the parent kills this process mid-run, not after it.
		AfterBatch: func(string, int) error { time.Sleep(2 * time.Millisecond); return nil }})
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	defer cancel()
	if err := r.RunOne(ctx, handle); err != nil {
		t.Fatal(err)
	}
}

func TestResumeAfterKill(t *testing.T) {
	t.Parallel()
	testkit.Slow(t)
	const n = 20000
	path := newDBFile(t)
	db := openDB(t, path)
	mustLoad(t, db, testSchemas)
	insertRows(t, db, "host", markerRows(n))
	addPipeline(t, db, "marker", markerPipeline, "")
	r := newRunner(t, db, tasks.Options{})
	h := submit(t, r, tasks.Params{Pipeline: "marker", Schemas: []string{"host"}})

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v")
	cmd.Env = append(os.Environ(), helperDBEnv+"="+path, helperTaskEnv+"="+h)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	waitFor(t, "the child to commit a batch", func() bool {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("child exited before it was killed: %v\n%s", err, out.String())
		default:
		}
		return progressDone(t, db, h) >= 500
	})
	if err := cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err == nil {
		t.Fatalf("child exited cleanly, want killed\n%s", out.String())
	}
	exited <- nil

	done := progressDone(t, db, h)
	t.Run("the killed run left a consistent checkpoint", func(t *testing.T) {
		if got, want := taskColumn(t, db, h, "status"), tasks.StatusRunning; got != want {
			t.Fatalf("status %q, want %q (the child finished before it was killed?)", got, want)
		}
		// Not necessarily a multiple of the batch size: a batch also commits at its
		// time bound, which a loaded machine reaches first.
		if done <= 0 || done >= n {
			t.Fatalf("progress done %d, want some in (0, %d)", done, n)
		}
		if got, want := markedCount(t, db, "host"), done; got != want {
			t.Fatalf("hosts marked %d, want progress done %d", got, want)
		}
		if got, want := queryInt(t, db, "SELECT count(*) FROM revisions WHERE author = ?", "task:"+h), done; got != want {
			t.Fatalf("revisions %d, want progress done %d", got, want)
		}
		last := queryInt(t, db, "SELECT max(id) FROM instances WHERE classname = 'host' AND data ->> 'note' = 'nX'")
		if got, want := taskColumn(t, db, h, "checkpoint"), fmt.Sprintf(`{"schema":0,"after":%d}`, last); got != want {
			t.Fatalf("checkpoint %s, want %s", got, want)
		}
	})
	t.Logf("child killed after %d of %d instances", done, n)

	r2 := newRunner(t, db, tasks.Options{BatchSize: 500, Lease: 300 * time.Millisecond})
	task := runOne(t, r2, h)
	res := mustSucceed(t, task)
	t.Run("a new runner finishes and every instance is processed exactly once", func(t *testing.T) {
		checkMarkedOnce(t, db, h, "host", n)
		if got, want := counts(res), counts(&tasks.Result{Scanned: n, Updated: n}); got != want {
			t.Fatalf("counts:\n got %s\nwant %s", got, want)
		}
		if got, want := fmt.Sprint(task.Progress.Done, task.Progress.Total), fmt.Sprint(n, n); got != want {
			t.Fatalf("progress done/total %s, want %s", got, want)
		}
	})
}

// TestTakeoverWithinOneRunner: a worker that stalls past its lease loses the task to
// another worker of the same runner, and its next batch must not commit (each
// instance is still processed exactly once).
func TestTakeoverWithinOneRunner(t *testing.T) {
	t.Parallel()
	const hosts, batch = 400, 10
	db := newDB(t)
	insertRows(t, db, "host", markerRows(hosts))
	addPipeline(t, db, "marker", markerPipeline, "")
	var stalled atomic.Bool
	r := newRunner(t, db, tasks.Options{Workers: 2, BatchSize: batch, Lease: 300 * time.Millisecond,
		AfterBatch: func(_ string, n int) error {
			if n == 1 && stalled.CompareAndSwap(false, true) {
				// The first worker stalls after its first batch until its lease has
				// long expired and the other worker is well into the task.
				time.Sleep(time.Second)
				return nil
			}
			time.Sleep(20 * time.Millisecond) // the taking-over worker is still running when the first wakes
			return nil
		}})
	h := submit(t, r, tasks.Params{Pipeline: "marker", Schemas: []string{"host"}})
	stop := startRun(t, r)
	mustSucceed(t, waitStatus(t, r, h, tasks.StatusSucceeded))
	stop()
	checkMarkedOnce(t, db, h, "host", hosts)
}
