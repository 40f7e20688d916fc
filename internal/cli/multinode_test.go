package cli

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// TestMultiNodeCrashDuringPipelineRun: two nodes (child `serve` processes) share one
// PostgreSQL database; a pipeline runs over 200,000 instances and the node that
// holds its task is killed (SIGKILL) at a random point chosen by a logged seed. The
// other node takes the task over once the lease has run out, from the last
// checkpoint, and finishes it: every instance is updated exactly once, with exactly
// one revision each. The killed node's row stays in the nodes table (no clean stop),
// no longer live; the survivor's goes when it stops.
func TestMultiNodeCrashDuringPipelineRun(t *testing.T) {
	t.Parallel()
	testkit.Slow(t)
	if !testkit.Postgres() {
		t.Skip("PostgreSQL only: several nodes share a database there (on SQLite, TestCrashDuringPipelineRun kills and restarts the one process)")
	}
	const total = 200000
	ctx := context.Background()
	rng := reliabilitySeed(t, 23)
	env := nodesEnv(t)
	// The killed node's lease must run out before the other node takes the task over.
	env["SERVICE_TASK_LEASE"] = "2s"
	if code, _, stderr := runCLI(t, quiet(env), "migrate"); code != 0 {
		t.Fatalf("migrate: exit %d: %s", code, stderr)
	}
	loadDoc(t, env, `
- {classname: _schema, keyname: crashbox, note: {dataformat: string}}
- classname: _pipeline
  keyname: append_x
  content: |
    - field_append: ['', note, X]
`)
	db := openStore(t, env["SERVICE_DB"])
	started := time.Now()
	// A statement per 250 instances, each in its own transaction: 200,000 inserts one
	// by one would take minutes, and so would one transaction of them all on
	// PostgreSQL, whose per-row count trigger rewrites one row of instance_counts per
	// insert (a transaction's versions of one row are chained, so the cost grows with
	// the square of the rows). Ids go above every id given out, as the store gives them.
	const batch = 250
	base := 1 + max(queryInt(t, db.Reader(), "SELECT high FROM instance_ids"),
		queryInt(t, db.Reader(), "SELECT coalesce(max(id), 0) FROM instances"))
	for from := 0; from < total; from += batch {
		if err := testkit.Migrator(t, db).Migrate(ctx, func(m *store.Migration) error {
			return m.Exec(ctx, `WITH RECURSIVE g(n) AS (SELECT CAST(? AS BIGINT) UNION ALL SELECT n + 1 FROM g WHERE n < ?)
				INSERT INTO instances(id, classname, keyname, displayname, is_enabled, data, created_at, updated_at)
				SELECT CAST(? AS BIGINT) + n, 'crashbox', 'box' || n, 'box' || n, 1, '{"note": ""}', ?, ? FROM g`,
				from, from+batch-1, base, testkit.OldTime, testkit.OldTime)
		}); err != nil {
			t.Fatalf("insert instances %d to %d: %v", from, from+batch-1, err)
		}
	}
	t.Logf("%d instances inserted in %v", total, time.Since(started).Round(time.Millisecond))
	r := db.Reader()

	nodes := []*child{startChild(t, env, "serve"), startChild(t, env, "serve")}
	apis := []*apiClient{newAPIClient(nodes[0].baseURL()), newAPIClient(nodes[1].baseURL())}
	var run struct {
		Handle string `json:"handle"`
	}
	apis[0].json(t, "POST", "/api/pipelines/append_x/?schema=crashbox", "", 202, &run)
	handle := run.Handle
	startRE := regexp.MustCompile(`msg="task start" handle=` + regexp.QuoteMeta(handle) + `\b`)

	// The holder is the node that logged the task's start; the other one survives.
	holder := -1
	testkit.WaitFor(t, 60*time.Second, "a node to start the task", func() bool {
		for i, n := range nodes {
			if startRE.MatchString(n.out.String()) {
				holder = i
				return true
			}
		}
		return false
	})
	survivor := 1 - holder
	target := int64(total/10) + rng.Int64N(total/2)
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var tr taskReply
		apis[survivor].json(t, "GET", "/api/tasks/"+handle+"/", "", 200, &tr)
		if tr.Status != "running" {
			t.Fatalf("task %s before the kill (done %d, target %d)", tr.Status, tr.Progress.Done, target)
		}
		if tr.Progress.Done >= target {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("progress %d never reached %d", tr.Progress.Done, target)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
	nodes[holder].kill()
	killedAt := queryInt(t, r, "SELECT progress_done FROM tasks WHERE handle = ?", handle)
	t.Logf("node %d killed with %d of %d instances committed", holder, killedAt, total)
	if killedAt <= 0 || killedAt >= total {
		t.Fatalf("killed with %d of %d committed: want part of the run", killedAt, total)
	}

	final := waitTask(t, apis[survivor], handle, 15*time.Minute)
	if !startRE.MatchString(nodes[survivor].out.String()) {
		t.Fatalf("the surviving node never started the task: it was not taken over; output:\n%s", tail(nodes[survivor].out.String()))
	}
	t.Logf("taken over and finished in %v after the start", time.Since(started).Round(time.Millisecond))

	if got := queryInt(t, r, `SELECT count(*) FROM instances WHERE classname = 'crashbox' AND data ->> 'note' = 'X'`); got != total {
		t.Fatalf("%d instances updated exactly once, want %d", got, total)
	}
	if got := queryInt(t, r, "SELECT count(*) FROM revisions WHERE author = ?", "task:"+handle); got != total {
		t.Fatalf("revisions of the task = %d, want %d (one per instance)", got, total)
	}
	if got := queryInt(t, r, "SELECT count(DISTINCT keyname) FROM revisions WHERE author = ?", "task:"+handle); got != total {
		t.Fatalf("instances with a revision of the task = %d, want %d", got, total)
	}
	var result string
	var done, totalP int64
	if err := r.QueryRowContext(ctx, "SELECT result, progress_done, progress_total FROM tasks WHERE handle = ?", handle).
		Scan(&result, &done, &totalP); err != nil {
		t.Fatal(err)
	}
	var res struct{ Scanned, Updated, Unchanged, Errors int64 }
	if err := json.Unmarshal([]byte(result), &res); err != nil {
		t.Fatal(err)
	}
	if final.Status != "succeeded" || done != total || totalP != total || res.Scanned != total || res.Updated != total ||
		res.Unchanged != 0 || res.Errors != 0 {
		t.Fatalf("task %s: progress %d/%d, result %+v; want succeeded, %d/%d, %d scanned and updated", final.Status, done,
			totalP, res, total, total, total)
	}

	rows, err := db.Nodes(ctx)
	if err != nil || len(rows) != 2 {
		t.Fatalf("nodes %+v, %v: want the killed node's row and the survivor's", rows, err)
	}
	nodes[survivor].stop()
	rows, err = db.Nodes(ctx)
	if err != nil || len(rows) != 1 || !strings.Contains(nodes[holder].out.String(), "node="+rows[0].ID) {
		t.Fatalf("after the survivor stopped: nodes %+v, %v; want the killed node's row alone", rows, err)
	}
}
