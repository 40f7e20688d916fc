package tasks_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"dataservice/bootstrap"
	"dataservice/builtin"
	"dataservice/store"
	"dataservice/tasks"
)

// waitLimit bounds every wait for asynchronous progress; reaching it fails the test.
const waitLimit = 30 * time.Second

// oldTime is the created_at/updated_at of the rows the tests insert by SQL, so any
// write by a task shows as a changed updated_at.
const oldTime = "2020-01-01T00:00:00Z"

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

// logRecord is one record a logRecorder saw, attributes rendered as text.
type logRecord struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

// logRecorder keeps the records of its logger and echoes them to t.Log while the
// test runs.
type logRecorder struct {
	mu      sync.Mutex
	tb      testing.TB
	done    bool
	records []logRecord
}

func newLogRecorder(tb testing.TB) *logRecorder {
	rec := &logRecorder{tb: tb}
	tb.Cleanup(func() {
		rec.mu.Lock()
		rec.done = true
		rec.mu.Unlock()
	})
	return rec
}

func (r *logRecorder) logger() *slog.Logger { return slog.New(&recordHandler{rec: r}) }

// find returns the records with that level and message.
func (r *logRecorder) find(level slog.Level, msg string) []logRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []logRecord
	for _, e := range r.records {
		if e.Level == level && e.Msg == msg {
			out = append(out, e)
		}
	}
	return out
}

type recordHandler struct {
	rec   *logRecorder
	attrs []slog.Attr
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	e := logRecord{Level: r.Level, Msg: r.Message, Attrs: map[string]string{}}
	for _, a := range h.attrs {
		e.Attrs[a.Key] = a.Value.Resolve().String()
	}
	r.Attrs(func(a slog.Attr) bool {
		e.Attrs[a.Key] = a.Value.Resolve().String()
		return true
	})
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	h.rec.records = append(h.rec.records, e)
	if !h.rec.done {
		msg := fmt.Sprintf("%s %s %v", r.Level, r.Message, e.Attrs)
		if len(msg) > 400 {
			msg = msg[:400] + "..."
		}
		h.rec.tb.Log(msg)
	}
	return nil
}

func (h *recordHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &recordHandler{rec: h.rec, attrs: append(append([]slog.Attr(nil), h.attrs...), attrs...)}
}

func (h *recordHandler) WithGroup(string) slog.Handler { return h }

// template is a bootstrapped database file built once per test binary; each test
// starts from a copy, which is much faster than running the start-up sequence.
var template struct {
	once sync.Once
	path string
	err  error
}

func templatePath() (string, error) {
	template.once.Do(func() {
		dir, err := os.MkdirTemp("", "tasks-test-template-")
		if err != nil {
			template.err = err
			return
		}
		path := filepath.Join(dir, "template.db")
		ctx := context.Background()
		db, err := store.Open(ctx, path, store.Options{})
		if err != nil {
			template.err = err
			return
		}
		err = bootstrap.Run(ctx, db, bootstrap.Options{Version: "4.9.0", VersionDate: "2026-11-22", Init: builtin.Init()})
		// Closing the last connection folds the WAL into the main file, so copying
		// that one file is enough.
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if _, serr := os.Stat(path + "-wal"); err == nil && serr == nil {
			err = fmt.Errorf("%s-wal left after close", path)
		}
		template.path, template.err = path, err
	})
	return template.path, template.err
}

// TestMain removes the template and benchmark databases after the run.
func TestMain(m *testing.M) {
	code := m.Run()
	if template.path != "" {
		os.RemoveAll(filepath.Dir(template.path))
	}
	if benchFiles.dir != "" {
		os.RemoveAll(benchFiles.dir)
	}
	os.Exit(code)
}

// newDBFile returns the path of a fresh, bootstrapped database file in tb.TempDir().
func newDBFile(tb testing.TB) string {
	tb.Helper()
	src, err := templatePath()
	if err != nil {
		tb.Fatalf("bootstrap template database: %v", err)
	}
	dst := filepath.Join(tb.TempDir(), "data.db")
	in, err := os.Open(src)
	if err != nil {
		tb.Fatalf("copy template: %v", err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		tb.Fatalf("copy template: %v", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		tb.Fatalf("copy template: %v", err)
	}
	if err := out.Close(); err != nil {
		tb.Fatalf("copy template: %v", err)
	}
	return dst
}

// openDB opens the database file at path; it is closed when the test ends.
func openDB(tb testing.TB, path string) *store.DB {
	tb.Helper()
	db, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		tb.Fatalf("open %s: %v", path, err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return db
}

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
	entries, err := store.ParseDocument("test.yml", []byte(doc))
	if err != nil {
		tb.Fatalf("parse: %v", err)
	}
	res, err := db.Load(context.Background(), entries, store.LoadOptions{})
	if err != nil {
		tb.Fatalf("load: %v", err)
	}
	if res.Errors != 0 {
		tb.Fatalf("load: %d errors: %v", res.Errors, res.Messages)
	}
}

// addPipeline stores a pipeline with that content and optional run_permission.
func addPipeline(tb testing.TB, db *store.DB, name, content, runPermission string) {
	tb.Helper()
	m := map[string]any{"classname": "_pipeline", "keyname": name, "content": content}
	if runPermission != "" {
		m["run_permission"] = runPermission
	}
	res, err := db.Load(context.Background(), []*store.Entry{store.NewEntry(m)}, store.LoadOptions{})
	if err != nil {
		tb.Fatalf("load pipeline %s: %v", name, err)
	}
	if res.Errors != 0 {
		tb.Fatalf("load pipeline %s: %v", name, res.Messages)
	}
}

// row is an instance the tests insert by SQL.
type row struct {
	Keyname string
	Enabled bool
	Data    map[string]any
}

// insertRows inserts instances of cls by SQL in one transaction (much faster than a
// load; the values must be valid for the schema).
func insertRows(tb testing.TB, db *store.DB, cls string, rows []row) {
	tb.Helper()
	ctx := context.Background()
	err := db.WithTx(ctx, func(tx *store.Tx) error {
		st, err := tx.PrepareContext(ctx, `INSERT INTO instances(classname, keyname, displayname, is_enabled, data,
			created_at, updated_at) VALUES(?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, r := range rows {
			data, err := json.Marshal(r.Data)
			if err != nil {
				return err
			}
			if _, err := st.ExecContext(ctx, cls, r.Keyname, "", r.Enabled, string(data), oldTime, oldTime); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("insert %s rows: %v", cls, err)
	}
}

// execSQL runs statements in one write transaction.
func execSQL(tb testing.TB, db *store.DB, stmts ...string) {
	tb.Helper()
	ctx := context.Background()
	err := db.WithTx(ctx, func(tx *store.Tx) error {
		for _, q := range stmts {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// queryInt runs a query returning one integer.
func queryInt(tb testing.TB, db *store.DB, query string, args ...any) int {
	tb.Helper()
	var n int
	if err := db.Reader().QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
	return n
}

// queryString runs a query returning one text value (NULL reads as "<null>").
func queryString(tb testing.TB, db *store.DB, query string, args ...any) string {
	tb.Helper()
	var s sql.NullString
	if err := db.Reader().QueryRowContext(context.Background(), query, args...).Scan(&s); err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
	if !s.Valid {
		return "<null>"
	}
	return s.String
}

// dumpTable renders every row of table, in rowid order, one line per row.
func dumpTable(tb testing.TB, db *store.DB, table string) string {
	tb.Helper()
	rows, err := db.Reader().QueryContext(context.Background(), "SELECT * FROM "+table+" ORDER BY rowid")
	if err != nil {
		tb.Fatalf("dump %s: %v", table, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		tb.Fatalf("dump %s: %v", table, err)
	}
	var b strings.Builder
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			tb.Fatalf("dump %s: %v", table, err)
		}
		for i, v := range vals {
			if b, ok := v.([]byte); ok {
				v = string(b)
			}
			fmt.Fprintf(&b, "%s=%v|", cols[i], v)
		}
		b.WriteByte('\n')
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("dump %s: %v", table, err)
	}
	return b.String()
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

// instance reads one instance or fails the test.
func instance(tb testing.TB, db *store.DB, cls, key string) *store.Instance {
	tb.Helper()
	in, err := db.Instance(context.Background(), cls, key)
	if err != nil {
		tb.Fatalf("read %s %s: %v", cls, key, err)
	}
	return in
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
		o.Logger = newLogRecorder(tb).logger()
	}
	return tasks.New(db, o)
}

// submit submits a run or fails the test.
func submit(tb testing.TB, r *tasks.Runner, p tasks.Params) string {
	tb.Helper()
	if p.Auth == nil {
		p.Auth = store.SystemAuth()
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
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("gave up after %v waiting for %s", waitLimit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
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
		bad := queryString(tb, db, `SELECT group_concat(keyname || '=' || (data ->> 'note')) FROM (SELECT * FROM instances
			WHERE classname = ? AND data ->> 'note' != 'nX' LIMIT 5)`, cls)
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
	return queryString(tb, db, "SELECT "+column+" FROM tasks WHERE handle = ?", handle)
}

// progressDone reads a task's progress_done.
func progressDone(tb testing.TB, db *store.DB, handle string) int {
	tb.Helper()
	return queryInt(tb, db, "SELECT progress_done FROM tasks WHERE handle = ?", handle)
}
