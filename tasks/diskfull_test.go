package tasks_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
	"dataservice/tasks"
)

// TestPipelineOnAFullDisk: a real run whose batch cannot be written for lack of space
// ends failed, its error the store's disk-full message naming the database file (not
// "internal error", and not logged as a failed batch); the batch before it stays
// committed, the failed one left nothing. The disk is a small filesystem made for the
// test, filled at a batch boundary (AfterBatch) with room for the task's final status
// but not for a batch.
func TestPipelineOnAFullDisk(t *testing.T) {
	testkit.SQLiteOnly(t, "fills the small filesystem holding the database file; PostgreSQL's full disk is the server's (SQLSTATE 53100)")
	t.Parallel()
	dir := testkit.SmallFS(t, 32<<20)
	db := openDB(t, testkit.MigratedFileIn(t, dir))
	mustLoad(t, db, testSchemas)
	const n, batch = 1000, 200
	rows := markerRows(n)
	for i := range rows {
		// About 4 KiB written per instance (the row and its revision): a batch needs
		// several times the space left free.
		rows[i].Data["note"] = "n"
		rows[i].Data["kind"] = strings.Repeat("k", 2000)
	}
	insertRows(t, db, "host", rows)
	addPipeline(t, db, "marker", markerPipeline, "")
	dbFile := filepath.Join(dir, "data.db")
	ballast := filepath.Join(dir, "ballast")

	// A batch also commits early once it has worked for a while (on a loaded machine
	// the first one may hold fewer than 200 rows): what it committed is counted when
	// the disk is filled, and is what must stay.
	rec := new(testkit.Recorder)
	committed := -1
	r := newRunner(t, db, tasks.Options{BatchSize: batch, Logger: rec.Logger(t), AfterBatch: func(_ string, b int) error {
		if b == 1 {
			committed = markedCount(t, db, "host")
			testkit.EmptyWAL(t, dbFile)
			testkit.FillDisk(t, ballast, 128<<10)
		}
		return nil
	}})
	task := runPipeline(t, r, "marker", false, "host")

	if task.Status != tasks.StatusFailed || task.Error == nil {
		t.Fatalf("task on a full disk: status %q, error %v; want failed with the disk-full message", task.Status, task.Error)
	}
	msg := *task.Error
	if !strings.HasPrefix(msg, "disk full: ") || !strings.Contains(msg, dbFile) || strings.Contains(msg, "internal error") {
		t.Fatalf("task error %q: want the disk-full message naming %s", msg, dbFile)
	}
	if l := rec.Find(slog.LevelError, "pipeline batch"); len(l) != 0 {
		t.Fatalf("the full disk was logged as a failed batch (an internal error): %v", l)
	}
	if committed < 1 || committed > batch {
		t.Fatalf("the first batch committed %d rows, want 1 to %d", committed, batch)
	}
	if got := task.Progress.Done; got != int64(committed) {
		t.Fatalf("progress done %d, want the one batch committed before the disk filled (%d)", got, committed)
	}
	if got := markedCount(t, db, "host"); got != committed {
		t.Fatalf("%d hosts marked, want %d (the committed batch only)", got, committed)
	}
	t.Logf("task error: %s", msg)

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}

	// A run submitted on a full disk: the seed's failed submission, 400 (invalid) with
	// the submission's message, which names the full disk and the file.
	testkit.EmptyWAL(t, dbFile)
	testkit.FillDisk(t, ballast, 0)
	_, _, err := r.Start(context.Background(), tasks.RunRequest{Pipeline: "marker", Schemas: []string{"host"},
		Auth: model.SystemAuth(), OwnerType: tasks.OwnerAPI})
	if store.ErrorCode(err) != model.EInvalid || !strings.HasPrefix(store.ErrorMessage(err), "disk full: ") ||
		!strings.Contains(store.ErrorMessage(err), dbFile) {
		t.Fatalf("submission on a full disk: %v (code %s); want invalid with the disk-full message", err, store.ErrorCode(err))
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	if got := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'host'"); got != n {
		t.Fatalf("%d hosts, want %d", got, n)
	}
}
