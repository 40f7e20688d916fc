package tasks_test

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	"dataservice/bootstrap"
	"dataservice/internal/testkit"
	"dataservice/rules"
	"dataservice/store"
	"dataservice/store/model"
	"dataservice/tasks"
)

// benchSchema is the schema of the benchmark instances: six string fields.
const benchSchema = `
- classname: _schema
  keyname: item
  f1: {dataformat: string}
  f2: {dataformat: string}
  f3: {dataformat: string}
  f4: {dataformat: string}
  f5: {dataformat: string}
  f6: {dataformat: string}
`

// benchPipeline has the five rules of the benchmark (testdata/bench_pipeline.yml, which
// BenchmarkProcess runs too): lower, set with a condition, regexp_sub, copy and delete.
// Every instance changes.
var benchPipeline = func() string {
	b, err := os.ReadFile("testdata/bench_pipeline.yml")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// benchData is the data of instance i: about 200 bytes of JSON.
func benchData(i int) string {
	return fmt.Sprintf(`{"f1":"Host-%07d-ABCDEF","f2":"value-%07d","f3":"three-%07d","f4":"a-b-c-d-%07d","f5":"copy-me-%07d-xyz","f6":"old-value-%07d-tail"}`,
		i, i, i, i, i, i)
}

// benchDB returns the address of a template database (testkit.Template: a file on
// SQLite, a database of the test cluster on PostgreSQL, made once per test binary)
// that is bootstrapped and holds n item instances and the bench pipeline; each
// benchmark iteration works on a copy of it (testkit.FromTemplate).
func benchDB(b *testing.B, n int) string {
	b.Helper()
	src, err := testkit.Template(fmt.Sprintf("tasks-bench-%d", n), func(db *store.DB) error {
		testkit.Bootstrap(b, db, bootstrap.Options{})
		mustLoad(b, db, benchSchema)
		addPipeline(b, db, "bench", benchPipeline, "")
		start := time.Now()
		if err := insertBenchItems(b, db, "item", n); err != nil {
			return err
		}
		b.Logf("built %d instances in %v", n, time.Since(start).Round(time.Millisecond))
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return src
}

// insertBenchItems inserts n instances of class cls with benchData by SQL, in
// transactions of 50,000, under ids above every id given out (both engines), and
// indexes them for search.
func insertBenchItems(b *testing.B, db *store.DB, cls string, n int) error {
	ctx := context.Background()
	next := testkit.NextInstanceID(b, db)
	const insert = `INSERT INTO instances(id, classname, keyname, displayname, is_enabled, data,
			created_at, updated_at) VALUES(?, ?, ?, '', 1, ?, ?, ?)`
	for from := 0; from < n; from += 50_000 {
		err := testkit.Migrator(b, db).Migrate(ctx, func(m *store.Migration) error {
			for i := from; i < min(from+50_000, n); i++ {
				if err := m.Exec(ctx, insert, next+int64(i), cls, fmt.Sprintf("item-%07d", i), benchData(i), testkit.OldTime, testkit.OldTime); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	// Indexed for search, as after a server's catch-up: a run starts with no backlog.
	_, err := db.CatchUpSearch(ctx)
	return err
}

// benchSizes are the instance counts: BENCH_N when set, else 100k (and 1M with BENCH_1M=1).
func benchSizes() []int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_N")); err == nil && n > 0 {
		return []int{n}
	}
	if os.Getenv("BENCH_1M") != "" {
		return []int{100_000, 1_000_000}
	}
	return []int{100_000}
}

// BenchmarkPipeline runs the five-rule pipeline over every item (real run and dry
// run, batches of the product's default 1000) and its floors, which do the same SQL
// on the same bytes without the product's bookkeeping ("floor": read the 8 columns
// on the read pool, decode the data as the store does, apply the same compiled rules,
// encode as the store does, the same UPDATE, the same revision row (the
// delta row: the changed fields' old values and the whole new object, built by
// store.RevisionDeltas as a write transaction builds them, by the store's statement), and the same checkpoint UPDATE per batch, in one write
// transaction; "floor-dry": read in a read transaction, decode and apply the rules, then
// the same checkpoint UPDATE in a write transaction of its own, as a dry run records
// its progress). On the PostgreSQL pass each iteration's database is made by CREATE
// DATABASE … TEMPLATE from the built one, the floors' writes take the product's
// advisory writer lock (they commit through the store), and the engine maintains the
// pg_trgm index for product and floor alike; "real-without-index" drops that index.
// Two more floors have no search index at all (its triggers, or PostgreSQL's index,
// dropped): "floor-physical" reads, decodes, applies the rules, encodes and updates,
// with the checkpoint but no revision row; "floor-revision" adds the revision row.
// revision-B/row is the bytes of before and after of the revision rows a run writes,
// per instance (timer stopped). After a real run (timer stopped) the search index's catch-up indexes the rows the
// run listed (SQLite): catch-up-rows/s is its rate, catch-up-s the time it took (the
// merge of the index after it included, as the background catch-up merges).
func BenchmarkPipeline(b *testing.B) {
	const batch = 1000
	for _, n := range benchSizes() {
		for _, mode := range []string{"real", "real-without-index", "floor", "floor-physical", "floor-revision", "dry", "floor-dry"} {
			b.Run(fmt.Sprintf("n=%d/%s", n, mode), func(b *testing.B) {
				src := benchDB(b, n)
				b.ResetTimer()
				var peak float64
				var caught int64
				var revBytes int64 // bytes of the revision rows' before and after the runs wrote
				var catchUp time.Duration
				var cpu time.Duration // process CPU time (user + system) in the timed regions
				var c0 time.Duration
				timing := false
				stop := func() {
					if timing {
						b.StopTimer()
						cpu += cpuTime() - c0
						timing = false
					}
				}
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					path := testkit.FromTemplate(b, src)
					db, err := testkit.OpenStore(b, path, store.Options{})
					if err != nil {
						b.Fatal(err)
					}
					compiled, err := rules.Parse(benchPipeline)
					if err != nil {
						b.Fatal(err)
					}
					testkit.Exec(b, db, `INSERT INTO tasks(handle, kind, status, created_at, lease_owner)
						VALUES('floor', 'pipeline', 'running', '', 'floor')`)
					if mode == "real-without-index" || mode == "floor-physical" || mode == "floor-revision" {
						// The write cost of the search index, measured: without the triggers
						// that feed it (PostgreSQL: without the pg_trgm index), writes cost
						// what they cost before it.
						testkit.DropSearchIndex(b, db)
					}
					testkit.ResetPeakRSS()
					c0, timing = cpuTime(), true
					b.StartTimer()
					switch mode {
					case "floor", "floor-dry", "floor-physical", "floor-revision":
						if got := floorPass(b, db, compiled, batch, mode != "floor-dry", mode != "floor-physical", mode == "floor"); got != n {
							b.Fatalf("floor changed %d, want %d", got, n)
						}
						if mode == "floor" {
							stop()
							checkListed(b, db, n)
						}
					default:
						runBenchPipeline(b, db, batch, n, mode == "dry", stop)
						if mode == "real" {
							checkListed(b, db, n)
							t0 := time.Now()
							rows, err := db.CatchUpSearch(context.Background())
							if err != nil {
								b.Fatal(err)
							}
							catchUp += time.Since(t0)
							caught += rows
						}
					}
					stop()
					peak = max(peak, testkit.PeakRSS())
					if mode == "real" || mode == "floor" || mode == "floor-revision" {
						revBytes += revisionBytes(b, db, n)
					}
					db.Close()
					if !testkit.Postgres() {
						os.Remove(path) // PostgreSQL: the kit drops the database when the benchmark ends
					}
				}
				b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "instances/s")
				b.ReportMetric(peak, "peak-RSS-MB")
				b.ReportMetric(float64(n)*float64(b.N)/cpu.Seconds(), "instances/cpu-s")
				if revBytes > 0 {
					b.ReportMetric(float64(revBytes)/float64(n*b.N), "revision-B/row")
				}
				if caught > 0 {
					b.ReportMetric(float64(caught)/catchUp.Seconds(), "catch-up-rows/s")
					b.ReportMetric(catchUp.Seconds()/float64(b.N), "catch-up-s")
				}
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// checkListed fails the benchmark unless n rows are listed for SQLite's search index:
// every row a run or a floor with the index updated.
func checkListed(b *testing.B, db *store.DB, n int) {
	b.Helper()
	if !db.IsFile() {
		return
	}
	if got := testkit.QueryInt(b, db, "SELECT count(*) FROM instances_search_dirty"); got != n {
		b.Fatalf("%d rows listed for the search index, want %d", got, n)
	}
}

// runBenchPipeline runs the bench pipeline over the n items of db as a task (a dry run
// when dry), calls stop as soon as it has run, and checks it succeeded and counted n.
func runBenchPipeline(b *testing.B, db *store.DB, batch, n int, dry bool, stop func()) {
	b.Helper()
	r := tasks.New(db, tasks.Options{BatchSize: batch, Workers: 1})
	h, err := r.Submit(context.Background(), tasks.Params{Pipeline: "bench", Schemas: []string{"item"},
		DryRun: dry, Auth: model.SystemAuth(), OwnerType: "api", OwnerID: "system"})
	if err != nil {
		b.Fatal(err)
	}
	if err := r.RunOne(context.Background(), h); err != nil {
		b.Fatal(err)
	}
	stop()
	task, err := r.Get(context.Background(), h)
	if err != nil {
		b.Fatal(err)
	}
	if task.Status != tasks.StatusSucceeded || task.Result.Updated != int64(n) {
		b.Fatalf("task %s: %+v", task.Status, task.Result)
	}
}

// BenchmarkIndexWriteCost measures the search index's cost to a pipeline real run
// as a pair: each iteration runs the product on a fresh copy with the index and on
// another without it (its triggers dropped, PostgreSQL: its pg_trgm index), the order
// alternating between iterations, so that a machine's drift over the minutes a 1M run
// takes falls on both alike (BenchmarkPipeline's real and real-without-index run one
// after the other, -count times each). It reports both rates by CPU time and by the
// wall clock, and their ratios (with / without); only the runs are timed.
func BenchmarkIndexWriteCost(b *testing.B) {
	const batch = 1000
	for _, n := range benchSizes() {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			src := benchDB(b, n)
			var cpu, wall [2]time.Duration // [0] with the index, [1] without
			run := func(without int) {
				b.StopTimer()
				path := testkit.FromTemplate(b, src)
				db, err := testkit.OpenStore(b, path, store.Options{})
				if err != nil {
					b.Fatal(err)
				}
				if without == 1 {
					testkit.DropSearchIndex(b, db)
				}
				c0, t0 := cpuTime(), time.Now()
				b.StartTimer()
				// Labelled, so that a CPU profile of the benchmark tells the two apart
				// (go tool pprof -tagfocus index=without).
				pprof.Do(context.Background(), pprof.Labels("index", [2]string{"with", "without"}[without]), func(context.Context) {
					runBenchPipeline(b, db, batch, n, false, func() {
						b.StopTimer()
						cpu[without] += cpuTime() - c0
						wall[without] += time.Since(t0)
					})
				})
				if without == 0 {
					checkListed(b, db, n)
				}
				db.Close()
				if !testkit.Postgres() {
					os.Remove(path)
				}
			}
			for i := 0; i < b.N; i++ {
				run(i % 2)
				run(1 - i%2)
			}
			rows := float64(n) * float64(b.N)
			b.ReportMetric(rows/cpu[0].Seconds(), "instances/cpu-s")
			b.ReportMetric(rows/cpu[1].Seconds(), "without-index-instances/cpu-s")
			b.ReportMetric(rows/wall[0].Seconds(), "instances/s")
			b.ReportMetric(rows/wall[1].Seconds(), "without-index-instances/s")
			b.ReportMetric(cpu[1].Seconds()/cpu[0].Seconds(), "ratio-cpu")
			b.ReportMetric(wall[1].Seconds()/wall[0].Seconds(), "ratio-wall")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// revisionBytes is the size of the before and after documents of the n newest
// revision rows (the run's): what a run adds to the history, besides each row's fixed
// columns.
func revisionBytes(b *testing.B, db *store.DB, n int) int64 {
	var sum int64
	err := db.Reader().QueryRowContext(context.Background(), `SELECT coalesce(sum(octet_length(coalesce(before, ''))
		+ octet_length(coalesce(after, ''))), 0) FROM (SELECT before, after FROM revisions ORDER BY id DESC LIMIT ?) run`, n).Scan(&sum)
	if err != nil {
		b.Fatal(err)
	}
	return sum
}

// floorPass is the floor of a pipeline run (see BenchmarkPipeline); it returns the
// number of instances the rules changed. Its SQL is the product's: a real pass
// writes and records its checkpoint in one write transaction per batch; a dry pass
// records the checkpoint in a write transaction of its own. A dry pass reads each
// batch in a read transaction, as the product does; a real pass reads it on the read
// pool (the store hands out no raw statements in a write transaction; the rows read
// are the same, the batch before having committed) and writes through the migration
// door's raw statements. Without revisions a real pass writes no revision rows.
//
// With list (the search index kept, SQLite), each batch lists the rows it updated for
// the index as the store does, with the store's one statement (store.SearchListSQL)
// before it commits; its raw statements are not listed otherwise.
func floorPass(b *testing.B, db *store.DB, p *rules.Pipeline, batch int, write, revisions, list bool) int {
	ctx := context.Background()
	list = list && db.IsFile()
	if list {
		db.UnlistedUpdatesForTest() // the floor lists with its own statement
	}
	var after int64
	changed := 0
	now := time.Now().UTC()
	stamp := now.Format(time.RFC3339)
	const checkpointSQL = `UPDATE tasks SET checkpoint = ?, result = ?, progress_done = ?, lease_until = ?
			WHERE handle = 'floor' AND lease_owner = 'floor' AND status = 'running' RETURNING cancel_requested`
	checkpointArgs := func() []any {
		return []any{fmt.Sprintf(`{"schema":0,"after":%d}`, after), fmt.Sprintf(`{"scanned":%d,"updated":%d}`, changed, changed),
			changed, stamp}
	}
	sch, err := db.Schema(ctx, "item")
	if err != nil {
		b.Fatal(err)
	}
	var deltas store.RevisionDeltas // as a write transaction builds its delta rows
	checkpoint := func(tx *store.Tx) error {
		var flag int
		return tasks.QueueTable.QueryRow(ctx, tx, checkpointSQL, checkpointArgs()...).Scan(&flag)
	}
	for done := false; !done; {
		var n int
		var err error
		if write {
			err = testkit.Migrator(b, db).Migrate(ctx, func(m *store.Migration) error {
				var err error
				var ids []byte // the ids the batch updated, as a JSON array
				if n, err = floorBatch(ctx, db.Reader(), m, sch, &deltas, p, batch, now, stamp, &after, revisions, &ids); err != nil {
					return err
				}
				changed += n
				if list && len(ids) > 0 {
					if err := m.Exec(ctx, store.SearchListSQL, string(append(ids, ']'))); err != nil {
						return err
					}
				}
				return m.Exec(ctx, checkpointSQL, checkpointArgs()...)
			})
		} else {
			err = db.WithRead(ctx, func(r store.Reader) error {
				var err error
				n, err = floorBatch(ctx, r, nil, sch, nil, p, batch, now, stamp, &after, false, nil)
				return err
			})
			if err == nil {
				changed += n
				err = db.WithTx(ctx, checkpoint)
			}
		}
		done = n < batch
		if err != nil {
			b.Fatal(err)
		}
	}
	return changed
}

// floorBatch reads up to batch instances after *after, applies the rules and, with
// m, stores each result (with its revision when revisions is set; each id appended
// to ids, a JSON array left open, when ids is not nil); it returns how many it
// processed.
func floorBatch(ctx context.Context, r store.Reader, m *store.Migration, sch *model.Schema, deltas *store.RevisionDeltas, p *rules.Pipeline, batch int, now time.Time, stamp string, after *int64, revisions bool, ids *[]byte) (int, error) {
	write := m != nil
	rows, err := r.QueryContext(ctx, `SELECT id, classname, keyname, displayname, is_enabled, data, created_at,
		updated_at FROM instances WHERE classname = ? AND id > ? ORDER BY id LIMIT ?`, "item", *after, batch)
	if err != nil {
		return 0, err
	}
	type item struct {
		id                              int64
		cls, key, display, raw, cr, upd string
		enabled                         bool
		data                            map[string]any
	}
	items := make([]item, 0, batch)
	for rows.Next() {
		var it item
		if err := rows.Scan(&it.id, &it.cls, &it.key, &it.display, &it.enabled, &it.raw, &it.cr, &it.upd); err != nil {
			rows.Close()
			return 0, err
		}
		if it.data, err = model.DecodeData(it.raw); err != nil {
			rows.Close()
			return 0, err
		}
		items = append(items, it)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	const update = "UPDATE instances SET displayname = ?, is_enabled = ?, data = ?, updated_at = ? WHERE id = ?"
	for _, it := range items {
		e := make(rules.Entry, len(it.data)+4)
		e["classname"], e["keyname"], e["displayname"], e["is_enabled"] = it.cls, it.key, it.display, it.enabled
		for k, v := range it.data {
			e[k] = v
		}
		if _, err := p.Apply(e, now); err != nil {
			return 0, err
		}
		*after = it.id
		if !write {
			continue
		}
		for _, k := range []string{"classname", "keyname", "displayname", "is_enabled"} {
			delete(e, k)
		}
		next := map[string]any(e)
		data := model.EncodeData(next)
		if err := m.Exec(ctx, update, it.display, it.enabled, data, stamp, it.id); err != nil {
			return 0, err
		}
		if ids != nil { // as the store notes them (the caller closes the JSON array)
			sep := byte(',')
			if len(*ids) == 0 {
				sep = '['
			}
			*ids = strconv.AppendInt(append(*ids, sep), it.id, 10)
		}
		if !revisions {
			continue
		}
		// The product's delta row: the changed fields' old values, the whole new object.
		old := &store.Instance{Keyname: it.key, Displayname: it.display, IsEnabled: it.enabled, Data: it.data}
		now := &store.Instance{Keyname: it.key, Displayname: it.display, IsEnabled: it.enabled, Data: next}
		before, after := deltas.Delta(sch, old, now, data)
		if err := m.Exec(ctx, store.RevisionDeltaInsertSQL, it.cls, it.key, "update", before, after, "task:floor", stamp); err != nil {
			return 0, err
		}
	}
	return len(items), nil
}

// BenchmarkSubmit measures how fast tasks enter the queue. The queue is emptied
// (timer stopped) before it reaches QUEUE_MAX, so it holds 0 to 999 tasks.
func BenchmarkSubmit(b *testing.B) {
	db := openDB(b, newDBFile(b))
	mustLoad(b, db, testSchemas)
	addPipeline(b, db, "marker", markerPipeline, "")
	r := tasks.New(db, tasks.Options{})
	ctx := context.Background()
	p := tasks.Params{Pipeline: "marker", Schemas: []string{"host", "site"}, Auth: model.SystemAuth(), OwnerType: "api", OwnerID: "system"}
	queued := 0
	for b.Loop() {
		if queued == 999 {
			b.StopTimer()
			testkit.ExecAll(b, db, "UPDATE tasks SET status = 'succeeded' WHERE status = 'queued'")
			queued = 0
			b.StartTimer()
		}
		if _, err := r.Submit(ctx, p); err != nil {
			b.Fatal(err)
		}
		queued++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}

// cpuTime is the CPU time (user + system) the process has used: a machine shared with
// other work slows a benchmark's wall clock, much less its CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
