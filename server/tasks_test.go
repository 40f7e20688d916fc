package server_test

import (
	"encoding/json"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"dataservice/internal/testkit"
)

// taskEnv has two users with keys (alice, bob), a user-less key and an
// all-permission key.
type taskEnv struct {
	*runEnv
	alice, bob cred
	aliceID    string
}

func newTaskEnv(t *testing.T, o envOptions) *taskEnv {
	t.Helper()
	e := newRunEnv(t, o)
	e.user("alice", true)
	e.user("bob", true)
	perms := []string{"p_pipeline_run", "p_data_access", "p_data_read", "p_data_update", "p_data_delete"}
	return &taskEnv{runEnv: e,
		alice:   e.key("alice_key", keySpec{perms: perms, user: "alice"}),
		bob:     e.key("bob_key", keySpec{perms: perms, user: "bob"}),
		aliceID: strconv.FormatInt(e.instanceID("_user", "alice"), 10),
	}
}

// pollTask reads the task detail at path until it is finished, within a deadline.
func (e *env) pollTask(path string, c cred) map[string]any {
	e.t.Helper()
	var d map[string]any
	testkit.WaitFor(e.t, 20*time.Second, "the task at "+path+" to finish", func() bool {
		d = object(e.t, e.get(path, c), 200)
		return finished(d)
	})
	return d
}

// finished tells whether a task detail is in a final status.
func finished(d map[string]any) bool {
	switch d["status"] {
	case "succeeded", "failed", "cancelled":
		return true
	}
	return false
}

// TestTaskDetail: the task_url target carries handle, kind, pipeline, schemas, dryrun,
// status, owner, times, progress, result and error.
func TestTaskDetail(t *testing.T) {
	t.Parallel()
	e := newTaskEnv(t, envOptions{})
	rr := decodeRun(t, e.post("/api/pipelines/bulk_delete_disabled/?schema=server&dryrun=1", e.alice, nil))
	u, err := url.Parse(rr.TaskURL)
	if err != nil {
		t.Fatal(err)
	}
	d := e.pollTask(u.Path, e.alice)

	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if got, want := strings.Join(keys, ","),
		"created_at,dryrun,error,finished_at,handle,kind,owner_id,owner_type,pipeline,progress,result,schemas,started_at,status"; got != want {
		t.Fatalf("detail fields = %s, want %s", got, want)
	}
	for _, c := range []struct {
		field string
		want  any
	}{
		{"handle", rr.Handle},
		{"kind", "pipeline"},
		{"pipeline", "bulk_delete_disabled"},
		{"dryrun", true},
		{"status", "succeeded"},
		{"owner_type", "api"},
		{"owner_id", e.aliceID},
		{"error", nil},
	} {
		if got := d[c.field]; got != c.want {
			t.Fatalf("%s = %v, want %v", c.field, got, c.want)
		}
	}
	if got, want := d["schemas"], []any{"server"}; len(got.([]any)) != 1 || got.([]any)[0] != want[0] {
		t.Fatalf("schemas = %v, want %v", got, want)
	}
	for _, f := range []string{"created_at", "started_at", "finished_at"} {
		s, _ := d[f].(string)
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			t.Fatalf("%s = %v: not RFC 3339: %v", f, d[f], err)
		}
	}
	progress := d["progress"].(map[string]any)
	for _, c := range []struct {
		field string
		want  string
	}{{"total", "3"}, {"done", "3"}, {"percent", "100"}} {
		if got := progress[c.field].(json.Number).String(); got != c.want {
			t.Fatalf("progress.%s = %s, want %s", c.field, got, c.want)
		}
	}
	result := d["result"].(map[string]any)
	for _, c := range []struct {
		field string
		want  int64
	}{{"scanned", 3}, {"updated", 0}, {"deleted", 1}, {"disabled", 0}, {"enabled", 0},
		{"unchanged", 2}, {"discarded", 0}, {"errors", 0}} {
		if got := num(t, result[c.field]); got != c.want {
			t.Fatalf("result.%s = %d, want %d", c.field, got, c.want)
		}
	}
	changes, err := json.Marshal(result["changes"])
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(changes), `[{"action":"delete","classname":"server","keyname":"srv2"}]`; got != want {
		t.Fatalf("changes = %s, want %s", got, want)
	}
	if got, ok := result["error_messages"].([]any); !ok || len(got) != 0 {
		t.Fatalf("error_messages = %v, want []", result["error_messages"])
	}
	// A dry run writes nothing.
	if got := e.queryString("SELECT count(*) FROM instances WHERE classname = 'server' AND keyname = 'srv2'"); got != "1" {
		t.Fatalf("dry run deleted srv2")
	}
}

// TestTaskVisibility: owners and callers holding every permission see a task; anyone
// else gets the same 404 as for a missing task.
func TestTaskVisibility(t *testing.T) {
	t.Parallel()
	e := newTaskEnv(t, envOptions{NoRunner: true})
	rr := decodeRun(t, e.post("/api/pipelines/upper/?schema=server", e.alice, nil))
	path := "/api/tasks/" + rr.Handle + "/"
	allButOne := e.key("all_but_one", keySpec{perms: []string{"role:role_admin", "!p_special"}})
	aliceOther := e.key("alice_other", keySpec{perms: []string{"p_pipeline_run"}, user: "alice", readOnly: true})
	noRun := e.key("no_run", keySpec{perms: []string{"p_data_access"}, user: "alice"})

	visible := []struct {
		name string
		c    cred
	}{
		{"owner sees the task", e.alice},
		{"another key of the same user sees the task", aliceOther},
		{"key with every permission sees the task", e.admin},
		{"admin login sees the task", adminCred},
	}
	for _, tc := range visible {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := object(t, e.get(path, tc.c), 200)["handle"], any(rr.Handle); got != want {
				t.Fatalf("handle = %v, want %v", got, want)
			}
		})
	}
	refused := []struct {
		name   string
		path   string
		c      cred
		status int
		msg    string
	}{
		{"another user gets task not found", path, e.bob, 404, "task not found"},
		{"a key without user gets task not found", path, e.run, 404, "task not found"},
		{"every permission but one gets task not found", path, allButOne, 404, "task not found"},
		{"unknown handle is task not found", "/api/tasks/no-such-handle/", e.admin, 404, "task not found"},
		{"overlong handle is task not found", "/api/tasks/" + strings.Repeat("a", 200) + "/", e.admin, 404, "task not found"},
		{"owner without p_pipeline_run is 403", path, noRun, 403, "permission denied"},
		{"no credentials is 401", path, noCred, 401, "authentication required"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, e.get(tc.path, tc.c), tc.status, tc.msg)
		})
	}
}

// TestTaskList: GET /api/tasks/?status=&limit=.
func TestTaskList(t *testing.T) {
	t.Parallel()
	e := newTaskEnv(t, envOptions{NoRunner: true})
	var aliceHandles []string // newest first
	for i := 0; i < 3; i++ {
		rr := decodeRun(t, e.post("/api/pipelines/upper/?schema=server", e.alice, nil))
		aliceHandles = append([]string{rr.Handle}, aliceHandles...)
	}
	bobHandle := decodeRun(t, e.post("/api/pipelines/upper/?schema=server", e.bob, nil)).Handle

	list := func(t *testing.T, query string, c cred) []string {
		t.Helper()
		var body struct {
			Count json.Number      `json:"count"`
			Tasks []map[string]any `json:"tasks"`
		}
		wantJSON(t, e.get("/api/tasks/"+query, c), 200, &body)
		if got, want := body.Count.String(), strconv.Itoa(len(body.Tasks)); got != want {
			t.Fatalf("count = %s, want %s", got, want)
		}
		var out []string
		for _, task := range body.Tasks {
			out = append(out, task["handle"].(string))
		}
		return out
	}
	ok := []struct {
		name  string
		query string
		c     cred
		want  []string
	}{
		{"owner lists own tasks newest first", "", e.alice, aliceHandles},
		{"limit keeps the newest", "?limit=2", e.alice, aliceHandles[:2]},
		{"status filter keeps matching tasks", "?status=queued", e.alice, aliceHandles},
		{"status filter drops others", "?status=succeeded", e.alice, nil},
		{"another owner lists only theirs", "", e.bob, []string{bobHandle}},
		{"every permission lists all tasks", "?limit=500", e.admin, append([]string{bobHandle}, aliceHandles...)},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := strings.Join(list(t, tc.query, tc.c), ","), strings.Join(tc.want, ","); got != want {
				t.Fatalf("handles = %s, want %s", got, want)
			}
		})
	}
	bad := []struct {
		name  string
		query string
		msg   string
	}{
		{"unknown status is 400", "?status=done", "status must be queued, running, succeeded, failed or cancelled"},
		{"upper-case status is 400", "?status=QUEUED", "status must be queued, running, succeeded, failed or cancelled"},
		{"zero limit is 400", "?limit=0", "limit must be an integer from 1 to 500"},
		{"negative limit is 400", "?limit=-1", "limit must be an integer from 1 to 500"},
		{"limit over 500 is 400", "?limit=501", "limit must be an integer from 1 to 500"},
		{"non-numeric limit is 400", "?limit=ten", "limit must be an integer from 1 to 500"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, e.get("/api/tasks/"+tc.query, e.alice), 400, tc.msg)
		})
	}
	t.Run("without p_pipeline_run is 403", func(t *testing.T) {
		wantError(t, e.get("/api/tasks/", e.noPerm), 403, "permission denied")
	})
}

// TestTaskCancel: a queued task is cancelled at once and never runs.
func TestTaskCancel(t *testing.T) {
	t.Parallel()
	e := newTaskEnv(t, envOptions{NoRunner: true})
	first := decodeRun(t, e.post("/api/pipelines/bulk_delete_disabled/?schema=server", e.alice, nil)).Handle
	cancelPath := "/api/tasks/" + first + "/cancel/"
	roAlice := e.key("alice_ro", keySpec{perms: []string{"p_pipeline_run"}, user: "alice", readOnly: true})

	t.Run("another owner gets task not found", func(t *testing.T) {
		wantError(t, e.post(cancelPath, e.bob, nil), 404, "task not found")
	})
	t.Run("read-only key is refused", func(t *testing.T) {
		wantError(t, e.post(cancelPath, roAlice, nil), 403, "API key is read-only")
	})
	t.Run("unknown handle is task not found", func(t *testing.T) {
		wantError(t, e.post("/api/tasks/nope/cancel/", e.alice, nil), 404, "task not found")
	})
	t.Run("owner cancels the queued task", func(t *testing.T) {
		d := object(t, e.post(cancelPath, e.alice, nil), 200)
		if got, want := d["status"], any("cancelled"); got != want {
			t.Fatalf("status = %v, want %v", got, want)
		}
		if d["finished_at"] == nil {
			t.Fatalf("finished_at = null after cancelling")
		}
		if got, want := object(t, e.get("/api/tasks/"+first+"/", e.alice), 200)["status"], any("cancelled"); got != want {
			t.Fatalf("detail status = %v, want %v", got, want)
		}
	})
	t.Run("the cancelled task never runs", func(t *testing.T) {
		// The runner claims in submission order: once a later task has finished, the
		// cancelled one would have been claimed first had it still been queued.
		second := decodeRun(t, e.post("/api/pipelines/upper/?schema=server&dryrun=1", e.alice, nil)).Handle
		e.start()
		if got, want := e.pollTask("/api/tasks/"+second+"/", e.alice)["status"], any("succeeded"); got != want {
			t.Fatalf("second task status = %v, want %v", got, want)
		}
		d := object(t, e.get("/api/tasks/"+first+"/", e.alice), 200)
		if got, want := d["status"], any("cancelled"); got != want {
			t.Fatalf("status = %v, want %v", got, want)
		}
		if d["started_at"] != nil {
			t.Fatalf("started_at = %v, want null", d["started_at"])
		}
		if got := e.queryString("SELECT count(*) FROM instances WHERE classname = 'server' AND keyname = 'srv2'"); got != "1" {
			t.Fatalf("cancelled run deleted srv2")
		}
	})
}

// TestTasksOfKeysWithoutUser: keys without a user share the owner id "system", yet
// each sees, lists and cancels only the tasks it submitted.
func TestTasksOfKeysWithoutUser(t *testing.T) {
	t.Parallel()
	e := newTaskEnv(t, envOptions{NoRunner: true})
	perms := []string{"p_pipeline_run", "p_data_access", "p_data_read", "p_data_update", "p_data_delete"}
	ka := e.key("nouser_a", keySpec{perms: perms})
	kb := e.key("nouser_b", keySpec{perms: perms})
	rr := decodeRun(t, e.post("/api/pipelines/upper/?schema=server", ka, nil))
	path := "/api/tasks/" + rr.Handle + "/"
	if got := object(t, e.get(path, ka), 200)["owner_id"]; got != "system" {
		t.Fatalf("owner_id = %v, want system (the seed's owner id)", got)
	}
	wantError(t, e.get(path, kb), 404, "task not found")
	wantError(t, e.post(path+"cancel/", kb, nil), 404, "task not found")
	if list := object(t, e.get("/api/tasks/", kb), 200); num(t, list["count"]) != 0 {
		t.Fatalf("another key lists the task: %v", list)
	}
	if list := object(t, e.get("/api/tasks/", ka), 200); num(t, list["count"]) != 1 {
		t.Fatalf("the submitting key does not list its task: %v", list)
	}
}

// TestDeletedUsersTasksNotInherited: a user created after the newest user was deleted
// gets another id and sees none of the deleted user's tasks.
func TestDeletedUsersTasksNotInherited(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t, envOptions{NoRunner: true})
	e.load(`[{classname: _role, keyname: r_run, permissions: [p_pipeline_run, p_data_access, p_data_read, p_data_update]}]`)
	carol := e.user("carol", true)
	e.load(`[{classname: _role, keyname: r_run, _action: update, users: [carol]}]`)
	carolID := e.instanceID("_user", "carol")
	if max := e.queryString("SELECT max(id) FROM instances"); max != strconv.FormatInt(carolID, 10) {
		t.Fatalf("carol has id %d, the highest is %s: the test needs her to be the newest row", carolID, max)
	}
	handle := decodeRun(t, e.post("/api/pipelines/upper/?schema=server", carol, nil)).Handle
	e.load(`[{classname: _role, keyname: r_run, _action: update, users: []}, {classname: _user, keyname: carol, _action: delete}]`)
	dave := e.user("dave", true)
	e.load(`[{classname: _role, keyname: r_run, _action: update, users: [dave]}]`)
	if daveID := e.instanceID("_user", "dave"); daveID == carolID {
		t.Fatalf("dave got the deleted user's id %d", daveID)
	}
	var body struct {
		Tasks []map[string]any `json:"tasks"`
	}
	wantJSON(t, e.get("/api/tasks/", dave), 200, &body)
	if len(body.Tasks) != 0 {
		t.Fatalf("dave lists %d task(s) of the deleted user: %v", len(body.Tasks), body.Tasks)
	}
	wantError(t, e.get("/api/tasks/"+handle+"/", dave), 404, "task not found")
}

// TestRecreatedKeyGetsNoOldTasks: a key without a user, revoked and created again
// under the same name (and secret), is another key: it neither sees, lists nor
// cancels the old key's tasks, and the old key's queued task does not run with the
// new key's rights.
func TestRecreatedKeyGetsNoOldTasks(t *testing.T) {
	t.Parallel()
	e := newTaskEnv(t, envOptions{NoRunner: true})
	perms := []string{"p_pipeline_run", "p_data_access", "p_data_read", "p_data_update", "p_data_delete"}
	old := e.key("nouser", keySpec{perms: perms})
	oldID := e.instanceID("_apikey", "nouser")
	handle := decodeRun(t, e.post("/api/pipelines/upper/?schema=server", old, nil)).Handle
	path := "/api/tasks/" + handle + "/"
	object(t, e.get(path, old), 200)

	e.load(`[{classname: _apikey, keyname: nouser, _action: delete}]`)
	again := e.key("nouser", keySpec{perms: perms})
	if id := e.instanceID("_apikey", "nouser"); id == oldID {
		t.Fatalf("the re-created key has the old key's id %d", id)
	}
	wantError(t, e.get(path, again), 404, "task not found")
	wantError(t, e.post(path+"cancel/", again, nil), 404, "task not found")
	if list := object(t, e.get("/api/tasks/", again), 200); num(t, list["count"]) != 0 {
		t.Fatalf("the re-created key lists the old key's task: %v", list)
	}
	if got := object(t, e.get(path, e.admin), 200)["status"]; got != "queued" {
		t.Fatalf("the old task's status after the refused cancel = %v, want queued", got)
	}
	// The new key's own task is its own.
	mine := decodeRun(t, e.post("/api/pipelines/upper/?schema=server&dryrun=1", again, nil)).Handle
	var body struct {
		Tasks []map[string]any `json:"tasks"`
	}
	wantJSON(t, e.get("/api/tasks/", again), 200, &body)
	if len(body.Tasks) != 1 || body.Tasks[0]["handle"] != mine {
		t.Fatalf("the re-created key lists %v, want only %s", body.Tasks, mine)
	}
	// The old key's task fails when it runs: its key is gone, whoever holds the name.
	e.start()
	if task := e.waitTask(handle); task.Status != "failed" || task.Error == nil || !strings.Contains(*task.Error, "no longer valid") {
		t.Fatalf("the revoked key's task: status %s, error %v; want failed, no longer valid", task.Status, task.Error)
	}
	// <> compares case on both engines (SQLite's LIKE folds ASCII case).
	if got := e.queryString("SELECT count(*) FROM instances WHERE classname = 'server' AND data ->> 'hostname' <> lower(data ->> 'hostname')"); got != "0" {
		t.Fatalf("the revoked key's task changed %s instance(s)", got)
	}
}
