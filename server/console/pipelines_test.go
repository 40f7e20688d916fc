package console_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"dataservice/bootstrap"
	"dataservice/internal/testkit"
	"dataservice/server"
	"dataservice/tasks"
)

// runEnv is env with a task runner the server and console use: the runner is stopped
// until loop.Start, its batches are batch instances, and afterBatch (when set) runs
// after each committed batch. The database's clock is the wall clock (the task page
// computes a rate).
type runEnv struct {
	*env
	runner *tasks.Runner
	loop   *testkit.Loop
}

func newRunEnv(t testing.TB, batch int, afterBatch func(handle string, n int) error) *runEnv {
	t.Helper()
	log := testkit.Logger(t, slog.LevelWarn)
	db := testkit.Open(t, testkit.NewAddress(t, "server.db"), testkit.Options{Logger: log, Clock: time.Now})
	testkit.Bootstrap(t, db, bootstrap.Options{AdminPassword: adminPassword, Logger: log})
	runner := tasks.New(db, tasks.Options{Poll: 20 * time.Millisecond, Logger: log, BatchSize: batch, AfterBatch: afterBatch})
	srv := testkit.Serve(t, server.New(server.Options{DB: db, Runner: runner, Logger: log,
		Version: testkit.Version, VersionDate: testkit.VersionDate}), nil)
	return &runEnv{env: &env{t: t, db: db, srv: srv}, runner: runner, loop: testkit.NewLoop(t, runner)}
}

// pipelinePeople: ops runs pipelines but does not administer them; padmin administers
// them; viewer reads data but runs nothing; bob runs pipelines too (another owner).
const pipelinePeople = `
- {classname: _user, keyname: ops, password: ops-pass-1}
- {classname: _user, keyname: padmin, password: padmin-pass-1}
- {classname: _user, keyname: viewer, password: viewer-pass-1}
- {classname: _user, keyname: bob, password: bob-pass-1}
- {classname: _role, keyname: runners, permissions: [p_data_access, p_data_read, p_data_update, p_pipeline_run], users: [ops, bob]}
- {classname: _role, keyname: pipeline_admins, permissions: [p_data_access, p_data_read, p_pipeline_admin, p_pipeline_run], users: [padmin]}
- {classname: _role, keyname: viewers, permissions: [p_data_access, p_data_read], users: [viewer]}
- {classname: _permission, keyname: p_special, displayname: Special}
- {classname: _schema, keyname: host, displayname: Hosts, note: {displayname: Note, dataformat: string}}
- {classname: _pipeline, keyname: tag, displayname: Tag hosts, description: Marks every host as checked, content: "- field_set: ['', note, checked]"}
- {classname: _pipeline, keyname: gated, description: Needs p_special, run_permission: p_special, content: "- field_noop: ''"}
- {classname: host, keyname: h1, note: old}
- {classname: host, keyname: h2, note: checked}
- {classname: host, keyname: h3}
`

var taskLocRE = regexp.MustCompile(`^/data/private/task/([0-9a-f-]{36})/$`)

// runForm posts the run form of pipeline name and returns the reply.
func (b *browser) runForm(name string, dryrun bool, schemas ...string) page {
	b.e.t.Helper()
	f := url.Values{"csrf": {b.csrf()}, "schema": schemas}
	if dryrun {
		f.Set("dryrun", "true")
	}
	return b.post("/data/private/pipeline/"+name+"/?do=run", f)
}

// started reads the handle of the task a successful run form redirected to.
func started(t testing.TB, p page) string {
	t.Helper()
	m := taskLocRE.FindStringSubmatch(p.loc)
	if p.status != http.StatusSeeOther || m == nil {
		t.Fatalf("run: %d %q, want a redirect to the task page\n%s", p.status, p.loc, p.body)
	}
	return m[1]
}

func TestPipelineListAndDetail(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t, 0, nil)
	e.load(pipelinePeople)
	ops := e.browser()
	ops.signIn("ops", "ops-pass-1")

	p := ops.get("/data/private/pipeline/")
	want(t, p, 200, `id="pipeline-list"`, "bulk_delete_disabled", "Marks every host as checked", "<code>p_special</code>",
		`href="/data/private/pipeline/tag/#run"`)
	lacks(t, p, `href="/data/private/pipeline/gated/#run"`)
	want(t, ops.get("/"), 200, `href="/data/private/pipeline/"`, `href="/data/private/task/"`)

	p = ops.get("/data/private/pipeline/tag/")
	want(t, p, 200, `id="run-button"`, `<option value="host"`, `id="rule-list"`, "<code>field_set</code>",
		"<code>[&#39;&#39;, note, checked]</code>", `id="read-only"`)
	lacks(t, p, `name="content"`, `<option value="_schema"`, `<option value="_pipeline"`)
	// By id too, as the API finds pipelines.
	id, _ := e.runner.FindPipeline(context.Background(), "tag")
	want(t, ops.get("/data/private/pipeline/"+strconv.FormatInt(id.ID, 10)+"/"), 200, `id="run-button"`)
	want(t, ops.get("/data/private/pipeline/nosuch/"), 404, "pipeline not found")

	// A pipeline whose run_permission the user lacks: no run button, and the run is refused.
	p = ops.get("/data/private/pipeline/gated/")
	want(t, p, 200, `id="run-refused"`, "needs p_special")
	lacks(t, p, `id="run-button"`)
	want(t, ops.runForm("gated", true, "host"), 403, "needs p_special")
	if n := e.queryInt("SELECT count(*) FROM tasks"); n != 0 {
		t.Fatalf("%d tasks after refused runs", n)
	}

	// Without p_pipeline_run: the pipelines are listed (as GET /api/pipelines/), nothing runs,
	// and the task tool is 403.
	viewer := e.browser()
	viewer.signIn("viewer", "viewer-pass-1")
	p = viewer.get("/data/private/pipeline/tag/")
	want(t, p, 200, `id="run-refused"`, "p_pipeline_run", `id="rule-list"`)
	lacks(t, p, `id="run-button"`)
	want(t, viewer.runForm("tag", true, "host"), 403)
	want(t, viewer.get("/data/private/task/"), 403, "it needs p_pipeline_run.")
	lacks(t, viewer.get("/"), `href="/data/private/task/"`)
	if n := e.queryInt("SELECT count(*) FROM tasks"); n != 0 {
		t.Fatalf("%d tasks after refused runs", n)
	}
}

func TestPipelineContentEdit(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t, 0, nil)
	e.load(pipelinePeople)
	stored := func() string {
		pl, err := e.db.PipelineByName(context.Background(), "tag")
		if err != nil {
			t.Fatal(err)
		}
		return pl.Content
	}
	before := stored()

	// Without p_pipeline_admin the content is read-only and a post is refused.
	ops := e.browser()
	ops.signIn("ops", "ops-pass-1")
	want(t, ops.post("/data/private/pipeline/tag/?do=edit", url.Values{"csrf": {ops.csrf()}, "content": {"[]"}}), 403,
		"You do not have the permission to use this page: it needs p_pipeline_admin.")
	if got := stored(); got != before {
		t.Fatalf("content changed by a refused edit: %q", got)
	}

	padmin := e.browser()
	padmin.signIn("padmin", "padmin-pass-1")
	p := padmin.get("/data/private/pipeline/tag/")
	want(t, p, 200, `<textarea id="content-text" name="content"`, `id="save-content"`)
	lacks(t, p, `id="read-only"`)

	// An invalid rule: refused naming its position, the text kept, nothing stored.
	bad := "- field_set: ['', note, checked]\n- field_shout: ['', note]\n"
	p = padmin.post("/data/private/pipeline/tag/?do=edit", url.Values{"csrf": {padmin.csrf()}, "content": {bad}})
	want(t, p, 400, `id="content-error"`, "content: rule 2: unknown rule &#34;field_shout&#34;", "field_shout: [&#39;&#39;, note]")
	if got := stored(); got != before {
		t.Fatalf("content changed by an invalid edit: %q", got)
	}
	// A wrong number of arguments is named too.
	p = padmin.post("/data/private/pipeline/tag/?do=edit", url.Values{"csrf": {padmin.csrf()}, "content": {"- field_noop: ''\n- field_set: ['', note]\n"}})
	want(t, p, 400, "content: rule 2: field_set")
	// Every bad rule at once, in list order, in one answer.
	p = padmin.post("/data/private/pipeline/tag/?do=edit", url.Values{"csrf": {padmin.csrf()},
		"content": {"- field_uper: ['', note]\n- field_noop: ['']\n- field_set: ['', note]\n"}})
	want(t, p, 400, `id="content-error"`, "content: rule 1: unknown rule &#34;field_uper&#34;; content: rule 3: field_set")

	// Without the CSRF token: refused.
	want(t, padmin.post("/data/private/pipeline/tag/?do=edit", url.Values{"content": {"[]"}}), 403, "CSRF")

	good := "- field_set: ['', note, reviewed]\n- field_upper: ['', note]\n"
	p = padmin.post("/data/private/pipeline/tag/?do=edit", url.Values{"csrf": {padmin.csrf()}, "content": {strings.ReplaceAll(good, "\n", "\r\n")}})
	if p.status != http.StatusSeeOther || p.loc != "/data/private/pipeline/tag/?done=updated" {
		t.Fatalf("save: %d %q\n%s", p.status, p.loc, p.body)
	}
	if got := stored(); got != good {
		t.Fatalf("stored content %q, want %q", got, good)
	}
	want(t, padmin.get(p.loc), 200, "Saved.", "<code>field_upper</code>")
	// The save is a revision with the user as author.
	if n := e.queryInt("SELECT count(*) FROM revisions WHERE classname = '_pipeline' AND keyname = 'tag' AND author LIKE '%padmin%'"); n != 1 {
		t.Fatalf("%d revisions by padmin, want 1", n)
	}
}

func TestPipelineRunForm(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t, 0, nil) // the runner stays stopped: tasks stay queued
	e.load(pipelinePeople)
	ops := e.browser()
	ops.signIn("ops", "ops-pass-1")

	// The seed's checks and messages, as POST /api/pipelines/<name>/ gives them.
	want(t, ops.runForm("tag", true), 400, `id="run-error"`, "missing required parameter: schema")
	want(t, ops.runForm("tag", true, " ", ""), 400, "missing required parameter: schema")
	want(t, ops.runForm("tag", true, "_pipeline"), 400, "schema &#34;_pipeline&#34; cannot be run (built-in class)")
	want(t, ops.runForm("tag", true, "nosuch"), 400, "unknown schema &#34;nosuch&#34;")
	// The form keeps the choices.
	want(t, ops.runForm("tag", true, "nosuch", "host"), 400, `<option value="host" selected`, `id="dryrun" checked`)
	// Without the CSRF token, or from another origin, nothing runs.
	want(t, ops.post("/data/private/pipeline/tag/?do=run", url.Values{"schema": {"host"}}), 403)
	want(t, ops.do("POST", "/data/private/pipeline/tag/?do=run", url.Values{"csrf": {ops.csrf()}, "schema": {"host"}},
		map[string]string{"Origin": "http://evil.example"}), 403)
	if n := e.queryInt("SELECT count(*) FROM tasks"); n != 0 {
		t.Fatalf("%d tasks after refused runs", n)
	}

	h := started(t, ops.runForm("tag", true, "host"))
	task, err := e.runner.Get(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	opsID := strconv.FormatInt(e.queryIntRow("SELECT id FROM instances WHERE classname = '_user' AND keyname = 'ops'"), 10)
	if task.Pipeline != "tag" || !task.DryRun || strings.Join(task.Schemas, ",") != "host" || task.OwnerType != tasks.OwnerConsole || task.OwnerID != opsID {
		t.Fatalf("submitted task: %+v (ops is %s)", task, opsID)
	}

	// The queue limit applies as to the API.
	if err := e.db.SetConfig(context.Background(), map[string]string{"QUEUE_MAX_PER_OWNER": "1"}); err != nil {
		t.Fatal(err)
	}
	want(t, ops.runForm("tag", true, "host"), 400, "task queue is full for this owner")
}

// queryIntRow is queryInt for an int64.
func (e *env) queryIntRow(q string, args ...any) int64 {
	e.t.Helper()
	var n int64
	if err := e.db.Reader().QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return n
}

type progressReply struct {
	Status   string           `json:"status"`
	Finished bool             `json:"finished"`
	Done     int64            `json:"done"`
	Total    int64            `json:"total"`
	Percent  float64          `json:"percent"`
	Counters map[string]int64 `json:"counters"`
}

func (b *browser) progress(handle string) (int, progressReply) {
	b.e.t.Helper()
	p := b.get("/data/private/task/" + handle + "/progress/")
	var r progressReply
	if p.status == 200 {
		if ct := p.header.Get("Content-Type"); ct != "application/json" {
			b.e.t.Fatalf("progress content type %q", ct)
		}
		if err := json.Unmarshal([]byte(p.body), &r); err != nil {
			b.e.t.Fatalf("progress: %v\n%s", err, p.body)
		}
	}
	return p.status, r
}

func TestTaskPages(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t, 0, nil)
	e.load(pipelinePeople)
	ctx := context.Background()
	ops, bob, admin := e.browser(), e.browser(), e.browser()
	ops.signIn("ops", "ops-pass-1")
	bob.signIn("bob", "bob-pass-1")
	admin.signIn("admin", adminPassword)

	// Queued (the runner is stopped): the page refreshes itself without JS and offers cancel.
	h1 := started(t, ops.runForm("tag", false, "host"))
	p := ops.get("/data/private/task/" + h1 + "/")
	want(t, p, 200, `<meta http-equiv="refresh"`, `id="cancel"`, `id="status">queued`, `id="bar"`, `/static/task.js`)
	if st, pr := ops.progress(h1); st != 200 || pr.Status != "queued" || pr.Finished {
		t.Fatalf("progress of a queued task: %d %+v", st, pr)
	}

	// Another owner neither sees nor cancels it (the same 404 as for a missing task).
	want(t, bob.get("/data/private/task/"+h1+"/"), 404, "task not found")
	if st, _ := bob.progress(h1); st != 404 {
		t.Fatalf("bob's progress read: %d, want 404", st)
	}
	want(t, bob.post("/data/private/task/"+h1+"/cancel/", url.Values{"csrf": {bob.csrf()}}), 404)
	lacks(t, bob.get("/data/private/task/"), h1[:8])
	if task, _ := e.runner.Get(ctx, h1); task.Status != tasks.StatusQueued {
		t.Fatalf("status after bob's cancel: %s", task.Status)
	}
	// Cancel needs the CSRF token.
	want(t, ops.post("/data/private/task/"+h1+"/cancel/", url.Values{}), 403)
	// The owner's task list; everyone's for the caller holding every permission.
	want(t, ops.get("/data/private/task/"), 200, "yours", h1[:8])
	want(t, admin.get("/data/private/task/"), 200, "everyone", h1[:8], "console "+strconv.FormatInt(e.queryIntRow("SELECT id FROM instances WHERE classname = '_user' AND keyname = 'ops'"), 10))
	// The owner sees its console task through the API too, and its API tasks in the console.
	api := func(method, path string) (int, string) {
		req, _ := http.NewRequest(method, e.srv.URL+path, nil)
		req.SetBasicAuth("ops", "ops-pass-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body strings.Builder
		_, _ = io.Copy(&body, resp.Body)
		return resp.StatusCode, body.String()
	}
	if st, body := api("GET", "/api/tasks/"+h1+"/"); st != 200 || !strings.Contains(body, `"owner_type":"console"`) {
		t.Fatalf("API read of the console task: %d %s", st, body)
	}
	st, body := api("POST", "/api/pipelines/tag/?schema=host&dryrun=1")
	var rr struct{ Handle string }
	if err := json.Unmarshal([]byte(body), &rr); st != 202 || err != nil {
		t.Fatalf("API run: %d %s", st, body)
	}
	if st, body := api("GET", "/api/tasks/"); st != 200 || !strings.Contains(body, h1) || !strings.Contains(body, rr.Handle) {
		t.Fatalf("API task list lacks the console task or the API task: %d %s", st, body)
	}
	want(t, ops.get("/data/private/task/"), 200, h1[:8], rr.Handle[:8])
	want(t, ops.get("/data/private/task/"+rr.Handle+"/"), 200, `id="dryrun-badge"`)
	lacks(t, bob.get("/data/private/task/"), rr.Handle[:8])

	p = ops.post("/data/private/task/"+h1+"/cancel/", url.Values{"csrf": {ops.csrf()}})
	if p.status != http.StatusSeeOther || p.loc != "/data/private/task/"+h1+"/?done=cancel" {
		t.Fatalf("cancel: %d %q", p.status, p.loc)
	}
	if task, _ := e.runner.Get(ctx, h1); task.Status != tasks.StatusCancelled {
		t.Fatalf("status after cancel: %s", task.Status)
	}
	p = ops.get(p.loc)
	want(t, p, 200, `id="cancel-note"`, `id="status">cancelled`)
	lacks(t, p, `id="cancel"`, `http-equiv="refresh"`)

	// A real run to its end: the page shows the task's counters, the change sample and no refresh.
	e.loop.Start()
	h2 := started(t, ops.runForm("tag", false, "host"))
	var task *tasks.Task
	testkit.WaitFor(t, 20*time.Second, "the run to finish", func() bool {
		task, _ = e.runner.Get(ctx, h2)
		return task.Finished()
	})
	if task.Status != tasks.StatusSucceeded || task.Result.Updated != 2 || task.Result.Unchanged != 1 {
		t.Fatalf("run result: %s %+v", task.Status, task.Result)
	}
	p = ops.get("/data/private/task/" + h2 + "/")
	want(t, p, 200, `id="status">succeeded`, `<progress id="bar" max="100" value="100">`, `id="c-scanned">3<`,
		`id="c-updated">2<`, `id="c-unchanged">1<`, `id="change-list"`, "<code>note</code>: <del>old</del> → <ins>checked</ins>",
		`href="/data/private/host/h1/"`)
	lacks(t, p, `http-equiv="refresh"`, `id="cancel"`)
	st, pr := ops.progress(h2)
	if st != 200 || !pr.Finished || pr.Percent != 100 || pr.Done != 3 || pr.Total != 3 ||
		pr.Counters["updated"] != task.Result.Updated || pr.Counters["unchanged"] != task.Result.Unchanged {
		t.Fatalf("progress of the finished run: %d %+v", st, pr)
	}
	// A finished task cannot be cancelled any more: the cancel leaves it as it is.
	ops.post("/data/private/task/"+h2+"/cancel/", url.Values{"csrf": {ops.csrf()}})
	if task, _ := e.runner.Get(ctx, h2); task.Status != tasks.StatusSucceeded {
		t.Fatalf("status after a late cancel: %s", task.Status)
	}
	want(t, ops.get("/data/private/task/?status=succeeded"), 200, h2[:8])
	lacks(t, ops.get("/data/private/task/?status=succeeded"), h1[:8])
	want(t, ops.get("/data/private/task/?status=bogus"), 400)
	// A status nothing has: it says so, with the way back to every status.
	want(t, ops.get("/data/private/task/?status=failed"), 200, "No tasks with status failed.", `href="/data/private/task/" id="clear-status"`)
}

// TestTaskErrorsShown: a run whose entries fail shows the messages, and a secret never
// appears on the task page.
func TestTaskErrorsShown(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t, 0, nil)
	e.load(pipelinePeople + `
- {classname: _schema, keyname: vault, note: {displayname: Note, dataformat: string}, code: {displayname: Code, dataformat: int}, pin: {displayname: PIN, dataformat: secret}}
- {classname: vault, keyname: v1, note: "12", pin: "pin-secret-value-1"}
- {classname: vault, keyname: v2, note: "x", pin: "pin-secret-value-2"}
- {classname: _pipeline, keyname: toint, content: "- field_copy: ['', note, code]\n- field_toint: ['', code]\n- field_set: ['', pin, changed-secret-3]"}
`)
	e.loop.Start()
	admin := e.browser()
	admin.signIn("admin", adminPassword)
	h := started(t, admin.runForm("toint", false, "vault"))
	testkit.WaitFor(t, 20*time.Second, "the run to finish", func() bool {
		task, _ := e.runner.Get(context.Background(), h)
		return task.Finished()
	})
	p := admin.get("/data/private/task/" + h + "/")
	want(t, p, 200, `id="error-list"`, `id="c-errors">1<`, "v2")
	lacks(t, p, "pin-secret-value", "changed-secret-3", "$argon2")
}

// TestTaskPageNotesUnappliedChanges: when a rule disables an entry, the task page's
// change sample says the entry's other changes were not applied.
func TestTaskPageNotesUnappliedChanges(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t, 0, nil)
	e.load(pipelinePeople + `
- {classname: _pipeline, keyname: retire, content: "- set_condition: [old, field_match, note, '^old$']\n- field_set: [old, note, gone]\n- field_set: [old, displayname, Retired]\n- field_set: [old, _action, disable]"}
`)
	e.loop.Start()
	admin := e.browser()
	admin.signIn("admin", adminPassword)
	h := started(t, admin.runForm("retire", true, "host"))
	testkit.WaitFor(t, 20*time.Second, "the run to finish", func() bool {
		task, _ := e.runner.Get(context.Background(), h)
		return task.Finished()
	})
	want(t, admin.get("/data/private/task/"+h+"/"), 200, `id="change-list"`, "host h1",
		`<span class="meta note">(disabled; 2 field changes not applied)</span>`)
}
