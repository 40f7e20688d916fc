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
// batch (a dry run, then a real run) each get the writer within ten times the quarter
// of a second a real batch holds it (maxBatchTime, then its re-indexing): a dry-run
// batch does not take the writer, a real batch commits early. Each instance is held
// 2 ms inside its batch (DB.SetTestHold), so a batch holding the writer to its end
// would make a small write wait over 10 s, whatever the machine's speed: the bound
// depends on no machine's speed or load.
func TestWriterNotHeldByLongBatches(t *testing.T) {
	t.Parallel()
	testkit.Slow(t)
	ctx := context.Background()
	db := newDB(t)
	addPipeline(t, db, "marker", markerPipeline, "")
	const n = 5000
	insertRows(t, db, "host", markerRows(n))
	r := newRunner(t, db, tasks.Options{BatchSize: n + 1})
	db.SetTestHold(2 * time.Millisecond)
	const bound = 10 * 250 * time.Millisecond
	for _, dry := range []bool{true, false} {
		t.Run(fmt.Sprintf("dryrun=%v", dry), func(t *testing.T) {
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
			t.Logf("%d small writes during the run, worst wait %v", writes, worst)
			if writes < 2 {
				t.Fatalf("only %d small writes during a run of at least %v", writes, n*2*time.Millisecond)
			}
			if worst > bound {
				t.Fatalf("a small write waited %v behind the batch (bound %v)", worst, bound)
			}
		})
	}
}
