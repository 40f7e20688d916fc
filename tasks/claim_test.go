package tasks_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/tasks"
)

// TestClaimsInSubmissionOrder: tasks submitted within one instant of the database's
// clock (one created_at) are claimed, and listed newest first, in the order they
// were submitted: the table's insertion order (RowOrder: SQLite's rowid,
// PostgreSQL's row_order identity) breaks the tie, not the random handle.
func TestClaimsInSubmissionOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testkit.Open(t, newDBFile(t), testkit.Options{}) // a fixed clock: every created_at is the same
	mustLoad(t, db, testSchemas)
	insertRows(t, db, "host", markerRows(5))
	addPipeline(t, db, "marker", markerPipeline, "")
	const runs = 8
	var mu sync.Mutex
	var ran []string
	r := newRunner(t, db, tasks.Options{Workers: 1, AfterBatch: func(h string, batch int) error {
		if batch == 1 {
			mu.Lock()
			ran = append(ran, h)
			mu.Unlock()
		}
		return nil
	}})
	var submitted []string
	for i := 0; i < runs; i++ {
		submitted = append(submitted, submit(t, r, tasks.Params{Pipeline: "marker", Schemas: []string{"host"}, DryRun: true}))
	}
	if got := queryInt(t, db, "SELECT count(DISTINCT created_at) FROM tasks"); got != 1 {
		t.Fatalf("%d distinct created_at, want 1 (the clock is fixed)", got)
	}
	list, err := r.List(ctx, "", "", tasks.StatusQueued, runs)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, task := range list {
		listed = append([]string{task.Handle}, listed...)
	}
	if got, want := strings.Join(listed, " "), strings.Join(submitted, " "); got != want {
		t.Fatalf("listed newest first, reversed:\n%s\nwant the submission order\n%s", got, want)
	}
	stop := startRun(t, r)
	for _, h := range submitted {
		mustSucceed(t, waitStatus(t, r, h, tasks.StatusSucceeded))
	}
	stop()
	mu.Lock()
	defer mu.Unlock()
	if got, want := strings.Join(ran, " "), strings.Join(submitted, " "); got != want {
		t.Fatalf("claimed in the order\n%s\nwant the submission order\n%s", got, want)
	}
}

// TestTwoNodesShareTheQueue: two runners on two handles of one database (two nodes;
// on SQLite, two openers of one file) work one queue at once: every task runs to its
// end on one of them, and every instance is processed exactly once per task.
func TestTwoNodesShareTheQueue(t *testing.T) {
	t.Parallel()
	const n, runs = 300, 8
	path := newDBFile(t)
	db1, db2 := openDB(t, path), openDB(t, path)
	mustLoad(t, db1, testSchemas)
	insertRows(t, db1, "host", markerRows(n))
	addPipeline(t, db1, "append", "- field_append: ['', note, X]\n", "")
	var mu sync.Mutex
	ranOn := map[string]map[string]bool{}
	node := func(name string) func(string, int) error {
		return func(h string, _ int) error {
			mu.Lock()
			defer mu.Unlock()
			if ranOn[h] == nil {
				ranOn[h] = map[string]bool{}
			}
			ranOn[h][name] = true
			return nil
		}
	}
	r1 := newRunner(t, db1, tasks.Options{Workers: 2, BatchSize: 50, Lease: time.Minute, AfterBatch: node("node1")})
	r2 := newRunner(t, db2, tasks.Options{Workers: 2, BatchSize: 50, Lease: time.Minute, AfterBatch: node("node2")})
	var handles []string
	for i := 0; i < runs; i++ {
		handles = append(handles, submit(t, []*tasks.Runner{r1, r2}[i%2], tasks.Params{Pipeline: "append", Schemas: []string{"host"}}))
	}
	stop1, stop2 := startRun(t, r1), startRun(t, r2)
	for _, h := range handles {
		res := mustSucceed(t, waitStatus(t, r1, h, tasks.StatusSucceeded))
		if got, want := counts(res), counts(&tasks.Result{Scanned: n, Updated: n}); got != want {
			t.Fatalf("task %s counts:\n got %s\nwant %s", h, got, want)
		}
	}
	stop1()
	stop2()
	if got, want := queryInt(t, db2, "SELECT count(*) FROM instances WHERE classname = 'host' AND data ->> 'note' = ?", "n"+strings.Repeat("X", runs)), n; got != want {
		t.Fatalf("hosts with %d markers: %d, want %d", runs, got, want)
	}
	for _, h := range handles {
		if got, want := queryInt(t, db2, "SELECT count(DISTINCT keyname) FROM revisions WHERE author = ?", "task:"+h), n; got != want {
			t.Fatalf("task %s: %d instances with its revision, want %d", h, got, want)
		}
	}
	if got, want := queryInt(t, db2, "SELECT count(*) FROM revisions WHERE classname = 'host'"), n*runs; got != want {
		t.Fatalf("revisions %d, want %d", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	tally := map[string]int{}
	for h, nodes := range ranOn {
		if len(nodes) != 1 {
			t.Errorf("task %s ran on %d nodes, want 1 (no lease expired)", h, len(nodes))
		}
		for name := range nodes {
			tally[name]++
		}
	}
	t.Logf("tasks per node: %v", tally)
}

// TestClaimSkipsALockedTask: on PostgreSQL a claim passes over a queued task whose
// row another transaction holds locked (SKIP LOCKED) and takes the next one, instead
// of waiting for that transaction; the locked task runs once the lock is gone. The
// lock is held by a plain connection that does not take the store's writer lock,
// as a claim of another node would if writes were not serialized.
func TestClaimSkipsALockedTask(t *testing.T) {
	if !testkit.Postgres() {
		t.Skip("PostgreSQL only: row locks and SKIP LOCKED; a SQLite write transaction holds the whole file")
	}
	t.Parallel()
	ctx := context.Background()
	db := markerDB(t, 20)
	r := newRunner(t, db, tasks.Options{})
	first := submit(t, r, tasks.Params{Pipeline: "marker", Schemas: []string{"host"}, DryRun: true})
	second := submit(t, r, tasks.Params{Pipeline: "marker", Schemas: []string{"host"}, DryRun: true})

	raw, err := sql.Open("pgx", db.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	tx, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var locked string
	if err := tx.QueryRowContext(ctx, "SELECT handle FROM tasks WHERE handle = $1 FOR UPDATE", first).Scan(&locked); err != nil {
		t.Fatal(err)
	}

	stop := startRun(t, r)
	// Without SKIP LOCKED the claim would wait for the lock, which is held until the
	// second task is done: the bound is far above the tenth of a second it takes.
	testkit.WaitFor(t, 30*time.Second, "the task after the locked one to succeed", func() bool {
		return getTask(t, r, second).Status == tasks.StatusSucceeded
	})
	if got := getTask(t, r, first).Status; got != tasks.StatusQueued {
		t.Fatalf("locked task: status %q while its row is locked, want %q", got, tasks.StatusQueued)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	mustSucceed(t, waitStatus(t, r, first, tasks.StatusSucceeded))
	stop()
	if got := fmt.Sprint(getTask(t, r, first).Progress.Done); got != "20" {
		t.Fatalf("locked task processed %s instances, want 20", got)
	}
}
