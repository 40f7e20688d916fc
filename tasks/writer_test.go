package tasks_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"dataservice/tasks"

	"dataservice/internal/testkit"
)

// TestWriterNotHeldByLongBatches: small writes made while a pipeline runs one large
// batch (a dry run, then a real run) each wait less than a second: a dry-run batch
// does not take the writer, a real batch commits after about a quarter of a second.
// A run disturbed by unrelated load is repeated, at most three times.
func TestWriterNotHeldByLongBatches(t *testing.T) {
	testkit.Slow(t)
	ctx := context.Background()
	db := newDB(t)
	addPipeline(t, db, "marker", markerPipeline, "")
	const n = 20000
	insertRows(t, db, "host", markerRows(n))
	r := newRunner(t, db, tasks.Options{BatchSize: n + 1})
	// run runs one task while small writes are made every 20 ms; it returns the longest wait.
	run := func(t *testing.T, dry bool) time.Duration {
		h := submit(t, r, tasks.Params{Pipeline: "marker", Schemas: []string{"host"}, DryRun: dry})
		done := make(chan *tasks.Task, 1)
		go func() { done <- runOne(t, r, h) }()
		var worst time.Duration
		writes := 0
		for running := true; running; {
			select {
			case task := <-done:
				if task.Status != tasks.StatusSucceeded {
					t.Errorf("task: %s %v", task.Status, task.Error)
				}
				running = false
			default:
				t0 := time.Now()
				if err := db.SetRegistry(ctx, "WRITER_PROBE", t0.String()); err != nil {
					t.Fatalf("small write: %v", err)
				}
				worst = max(worst, time.Since(t0))
				writes++
				time.Sleep(20 * time.Millisecond)
			}
		}
		t.Logf("dryrun=%v: %d small writes during the run, worst wait %v", dry, writes, worst)
		return worst
	}
	// A writer held for the whole batch makes every run fail (the batch takes seconds);
	// a run on a machine loaded by other work may miss the bound once: at most three runs.
	const attempts = 3
	for _, dry := range []bool{true, false} {
		t.Run(fmt.Sprintf("dryrun=%v", dry), func(t *testing.T) {
			var worst time.Duration
			for a := 1; a <= attempts; a++ {
				if worst = run(t, dry); worst < time.Second {
					return
				}
			}
			t.Fatalf("a small write waited %v behind the batch (worst of each of %d runs >= 1s)", worst, attempts)
		})
	}
}
