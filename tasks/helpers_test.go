package tasks_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
	"dataservice/tasks"
)

// waitLimit bounds every wait for asynchronous progress; reaching it fails the test.
const waitLimit = 2 * time.Minute

// testSchemas are the user schemas of most tests: host holds the instances a task
// runs over; rack references hosts through a single- and a multi-valued field; site
// is an unrelated schema tasks must leave alone.
const testSchemas = `
- classname: _schema
  keyname: host
  displayname: Hosts
  name: {dataformat: string}
  kind: {dataformat: string}
  port: {dataformat: int}
  note: {dataformat: string}
  tags: {dataformat: string, cardinal_max: 0}
- classname: _schema
  keyname: rack
  displayname: Racks
  host: {dataformat: schema, dataformat_ext: host}
  hosts: {dataformat: schema, dataformat_ext: host, cardinal_max: 0}
- classname: _schema
  keyname: site
  displayname: Sites
  city: {dataformat: string}
  note: {dataformat: string}
`

// TestMain removes the template and benchmark databases after the run.
func TestMain(m *testing.M) {
	code := m.Run()
	testkit.Cleanup()
	os.Exit(code)
}

// newDBFile returns the path of a fresh, bootstrapped database file in tb.TempDir().
var newDBFile = testkit.MigratedFile

// openDB opens the database file at path with the real clock (leases expire) and no
// store log; it is closed when the test ends.
var openDB = testkit.OpenFile

// newDB opens a fresh bootstrapped database (built-in definitions, configuration)
// with the test schemas loaded.
func newDB(tb testing.TB) *store.DB {
	tb.Helper()
	db := openDB(tb, newDBFile(tb))
	mustLoad(tb, db, testSchemas)
	return db
}

// mustLoad loads a YAML document with every permission; any error fails the test.
func mustLoad(tb testing.TB, db *store.DB, doc string) {
	tb.Helper()
	testkit.MustLoad(tb, db, doc, store.LoadOptions{})
}

// addPipeline stores a pipeline with that content and optional run_permission.
func addPipeline(tb testing.TB, db *store.DB, name, content, runPermission string) {
	tb.Helper()
	m := map[string]any{"classname": "_pipeline", "keyname": name, "content": content}
	if runPermission != "" {
		m["run_permission"] = runPermission
	}
	res := testkit.LoadEntries(tb, db, []*model.Entry{model.NewEntry(m)}, store.LoadOptions{})
	if res.Errors != 0 {
		tb.Fatalf("load pipeline %s: %v", name, res.Messages)
	}
}

// row is an instance the tests insert by SQL.
type row = testkit.Row

// insertRows inserts instances by SQL in one transaction (much faster than a load;
// the values must be valid for the schema).
var insertRows = testkit.InsertInstances

var queryInt = testkit.QueryInt

// dumpTable renders every row of table, one line per row, the lines sorted: a
// comparison of two dumps sees every column of every row, on any engine (no column
// gives every table's insertion order on both).
func dumpTable(tb testing.TB, db *store.DB, table string) string {
	tb.Helper()
	cols, rows := testkit.Rows(tb, db, "SELECT * FROM "+table)
	lines := make([]string, 0, len(rows))
	for _, vals := range rows {
		var b strings.Builder
		for i, v := range vals {
			fmt.Fprintf(&b, "%s=%v|", cols[i], v)
		}
		lines = append(lines, b.String())
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// dataTables are the tables a pipeline task may write besides tasks.
var dataTables = []string{"registry", "configuration", "schemas", "schema_fields", "instances", "permissions", "revisions"}

// dumpData renders every table but tasks.
func dumpData(tb testing.TB, db *store.DB) map[string]string {
	tb.Helper()
	out := map[string]string{}
	for _, t := range dataTables {
		out[t] = dumpTable(tb, db, t)
	}
	return out
}

// instRow is a stored instance row, every column as stored.
type instRow struct {
	ID               int64
	Displayname      string
	Enabled          int64
	Data             string
	Created, Updated string
}

// instanceRows maps keyname to the stored row of every instance of cls.
func instanceRows(tb testing.TB, db *store.DB, cls string) map[string]instRow {
	tb.Helper()
	rows, err := db.Reader().QueryContext(context.Background(), `SELECT id, keyname, displayname, is_enabled, data,
		created_at, updated_at FROM instances WHERE classname = ? ORDER BY id`, cls)
	if err != nil {
		tb.Fatalf("read %s: %v", cls, err)
	}
	defer rows.Close()
	out := map[string]instRow{}
	for rows.Next() {
		var r instRow
		var key string
		if err := rows.Scan(&r.ID, &key, &r.Displayname, &r.Enabled, &r.Data, &r.Created, &r.Updated); err != nil {
			tb.Fatalf("read %s: %v", cls, err)
		}
		out[key] = r
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("read %s: %v", cls, err)
	}
	return out
}

// newRunner returns a Runner with test defaults (small batches, fast polling, a
// short lease, logs to t.Log) for every option o leaves zero.
func newRunner(tb testing.TB, db *store.DB, o tasks.Options) *tasks.Runner {
	tb.Helper()
	if o.BatchSize == 0 {
		o.BatchSize = 50
	}
	if o.Poll == 0 {
		o.Poll = 10 * time.Millisecond
	}
	if o.Lease == 0 {
		o.Lease = time.Second
	}
	if o.Workers == 0 {
		o.Workers = 1
	}
	if o.Logger == nil {
		o.Logger = new(testkit.Recorder).Logger(tb)
	}
	return tasks.New(db, o)
}

// submit submits a run or fails the test.
func submit(tb testing.TB, r *tasks.Runner, p tasks.Params) string {
	tb.Helper()
	if p.Auth == nil {
		p.Auth = model.SystemAuth()
	}
	if p.OwnerType == "" {
		p.OwnerType, p.OwnerID = "api", "system"
	}
	h, err := r.Submit(context.Background(), p)
	if err != nil {
		tb.Fatalf("submit %s on %v: %v", p.Pipeline, p.Schemas, err)
	}
	return h
}

// runOne runs the task to its end with RunOne (bounded by waitLimit) and returns it.
func runOne(tb testing.TB, r *tasks.Runner, handle string) *tasks.Task {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := r.RunOne(ctx, handle); err != nil {
		tb.Fatalf("RunOne %s: %v", handle, err)
	}
	t := getTask(tb, r, handle)
	if !t.Finished() {
		tb.Fatalf("task %s: status %q after RunOne, want a final status", handle, t.Status)
	}
	return t
}

// runPipeline submits a run with every permission and runs it to its end.
func runPipeline(tb testing.TB, r *tasks.Runner, pipeline string, dryrun bool, schemas ...string) *tasks.Task {
	tb.Helper()
	h := submit(tb, r, tasks.Params{Pipeline: pipeline, Schemas: schemas, DryRun: dryrun})
	return runOne(tb, r, h)
}

// getTask reads a task or fails the test.
func getTask(tb testing.TB, r *tasks.Runner, handle string) *tasks.Task {
	tb.Helper()
	t, err := r.Get(context.Background(), handle)
	if err != nil {
		tb.Fatalf("get task %s: %v", handle, err)
	}
	return t
}

// mustSucceed fails the test unless the task succeeded with a result.
func mustSucceed(tb testing.TB, t *tasks.Task) *tasks.Result {
	tb.Helper()
	if t.Status != tasks.StatusSucceeded {
		msg := "<nil>"
		if t.Error != nil {
			msg = *t.Error
		}
		tb.Fatalf("task %s: status %q (error %s), want %q", t.Handle, t.Status, msg, tasks.StatusSucceeded)
	}
	if t.Result == nil {
		tb.Fatalf("task %s: no result", t.Handle)
	}
	return t.Result
}

// waitFor polls cond until it holds, failing the test after waitLimit.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	testkit.WaitFor(tb, waitLimit, what, cond)
}

// counts renders a result's counters, for comparisons.
func counts(r *tasks.Result) string {
	return fmt.Sprintf("scanned=%d updated=%d deleted=%d disabled=%d enabled=%d unchanged=%d discarded=%d errors=%d",
		r.Scanned, r.Updated, r.Deleted, r.Disabled, r.Enabled, r.Unchanged, r.Discarded, r.Errors)
}

// markerRows inserts n hosts h00000.. with note "n", for the exactly-once tests.
func markerRows(n int) []row {
	rows := make([]row, n)
	for i := range rows {
		rows[i] = row{Keyname: fmt.Sprintf("h%05d", i), Enabled: true,
			Data: map[string]any{"name": fmt.Sprintf("host-%05d", i), "note": "n"}}
	}
	return rows
}

// markerPipeline appends one X to each host's note: a host processed twice shows "nXX".
const markerPipeline = `
- field_append: ['', note, X]
`

// checkMarkedOnce verifies that every one of the n instances of cls got exactly one
// marker, and that the task wrote exactly one update revision for each.
func checkMarkedOnce(tb testing.TB, db *store.DB, handle, cls string, n int) {
	tb.Helper()
	if got, want := queryInt(tb, db, "SELECT count(*) FROM instances WHERE classname = ?", cls), n; got != want {
		tb.Fatalf("%s instances: %d, want %d", cls, got, want)
	}
	if got, want := markedCount(tb, db, cls), n; got != want {
		bad := testkit.QueryString(tb, db, `SELECT string_agg(keyname || '=' || (data ->> 'note'), ',') FROM (SELECT * FROM instances
			WHERE classname = ? AND data ->> 'note' != 'nX' LIMIT 5) AS bad`, cls)
		tb.Fatalf("%s instances with exactly one marker: %d, want %d (e.g. %s)", cls, got, want, bad)
	}
	if got, want := queryInt(tb, db, "SELECT count(*) FROM revisions WHERE classname = ? AND author = ?", cls, "task:"+handle), n; got != want {
		tb.Fatalf("%s revisions by task:%s: %d, want %d", cls, handle, got, want)
	}
	if got, want := queryInt(tb, db, `SELECT count(DISTINCT keyname) FROM revisions WHERE classname = ? AND action = 'update'
		AND author = ?`, cls, "task:"+handle), n; got != want {
		tb.Fatalf("%s instances with an update revision: %d, want %d", cls, got, want)
	}
}

// markedCount counts the instances of cls whose note holds exactly one marker.
func markedCount(tb testing.TB, db *store.DB, cls string) int {
	tb.Helper()
	return queryInt(tb, db, "SELECT count(*) FROM instances WHERE classname = ? AND data ->> 'note' = 'nX'", cls)
}

// taskColumn reads one column of a task row as text.
func taskColumn(tb testing.TB, db *store.DB, handle, column string) string {
	tb.Helper()
	return testkit.QueryString(tb, db, "SELECT "+column+" FROM tasks WHERE handle = ?", handle)
}

// progressDone reads a task's progress_done.
func progressDone(tb testing.TB, db *store.DB, handle string) int {
	tb.Helper()
	return queryInt(tb, db, "SELECT progress_done FROM tasks WHERE handle = ?", handle)
}
