package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"

	"dataservice/internal/testkit"
)

// pipelineData adds pipelines beside the built-in bulk_delete_disabled.
const pipelineData = `
- {classname: _permission, keyname: p_special, displayname: Special}
- classname: _pipeline
  keyname: guarded
  run_permission: p_special
  content: |
    - field_noop: ['']
- classname: _pipeline
  keyname: upper
  content: |
    - field_upper: ['', hostname]
- classname: _pipeline
  keyname: broken
  content: |
    - field_noop: ['']
- classname: _pipeline
  keyname: dormant
  is_enabled: false
  content: '[]'
`

// runEnv is an environment with the server schema, the test pipelines and keys of
// every kind the run checks distinguish.
type runEnv struct {
	*env
	noPerm       cred // allowed, without p_pipeline_run
	run          cred // p_pipeline_run and the data permissions a run needs
	readOnly     cred // read-only, with p_pipeline_run
	readOnlyNone cred // read-only, without p_pipeline_run
	admin        cred // every permission, no user
}

func newRunEnv(t *testing.T, o envOptions) *runEnv {
	t.Helper()
	e := newEnv(t, o)
	e.load(serverSchema)
	e.load(pipelineData)
	runPerms := []string{"p_pipeline_run", "p_data_access", "p_data_read", "p_data_update", "p_data_delete"}
	return &runEnv{env: e,
		noPerm:       e.key("noperm", keySpec{perms: []string{"p_data_access", "p_data_read"}}),
		run:          e.key("runner", keySpec{perms: runPerms}),
		readOnly:     e.key("ro", keySpec{perms: runPerms, readOnly: true}),
		readOnlyNone: e.key("ro_none", keySpec{perms: []string{"p_data_access"}, readOnly: true}),
		admin:        e.key("all", keySpec{perms: []string{"role:role_admin"}}),
	}
}

// runReply is the 202 body of a run.
type runReply struct {
	Pipeline string `json:"pipeline"`
	DryRun   bool   `json:"dryrun"`
	Handle   string `json:"handle"`
	TaskURL  string `json:"task_url"`
}

func decodeRun(t *testing.T, r reply) runReply {
	t.Helper()
	if r.status != http.StatusAccepted {
		t.Fatalf("status = %d, want 202 (body %s)", r.status, r.body)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if got, want := strings.Join(keys, ","), "dryrun,handle,pipeline,task_url"; got != want {
		t.Fatalf("reply fields = %s, want %s", got, want)
	}
	var rr runReply
	if err := json.Unmarshal(r.body, &rr); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
	if rr.Handle == "" {
		t.Fatalf("empty handle in %s", r.body)
	}
	return rr
}

// TestPipelineRunCheckOrder walks the seed's seven ordered checks of
// POST /api/pipelines/<name or id>/; each row fails exactly one check while the later
// ones would fail too, so only the right order gives the expected reply.
func TestPipelineRunCheckOrder(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t, envOptions{NoRunner: true})
	testkit.SetDataField(t, e.db, "_pipeline", "broken", "content", "- no_such_rule: [x]")
	badCred := bearer("runner", "wrong")
	cases := []struct {
		name   string
		method string
		path   string
		c      cred
		status int
		msg    string
	}{
		// 1. p_pipeline_run (denied: 401 without credentials, 401 for bad ones, 403 without the permission).
		{"no credentials is 401", "POST", "/api/pipelines/upper/?schema=server", noCred, 401, "authentication required"},
		{"no credentials on GET is 401 not 405", "GET", "/api/pipelines/nope/", noCred, 401, "authentication required"},
		{"wrong secret is 401", "POST", "/api/pipelines/upper/?schema=server", badCred, 401, "authentication required"},
		{"no p_pipeline_run on GET is 403 not 405", "GET", "/api/pipelines/upper/?schema=server", e.noPerm, 403, "permission denied"},
		{"no p_pipeline_run on DELETE is 403 not 405", "DELETE", "/api/pipelines/nope/", e.noPerm, 403, "permission denied"},
		{"no p_pipeline_run on TRACE is 403 not 405", "TRACE", "/api/pipelines/nope/", e.noPerm, 403, "permission denied"},
		{"no p_pipeline_run on a custom method is 403 not 405", "PURGE", "/api/pipelines/nope/", e.noPerm, 403, "permission denied"},
		{"no credentials on a custom method is 401", "PURGE", "/api/pipelines/nope/", noCred, 401, "authentication required"},
		{"no p_pipeline_run on POST is 403", "POST", "/api/pipelines/upper/?schema=server", e.noPerm, 403, "permission denied"},
		{"read-only key without p_pipeline_run is the permission denial", "POST", "/api/pipelines/upper/?schema=server", e.readOnlyNone, 403, "permission denied"},
		// 2. method.
		{"GET with p_pipeline_run is 405", "GET", "/api/pipelines/nope/", e.run, 405, "method not allowed"},
		{"PUT with p_pipeline_run is 405", "PUT", "/api/pipelines/nope/", e.run, 405, "method not allowed"},
		{"PATCH with p_pipeline_run is 405", "PATCH", "/api/pipelines/upper/?schema=server", e.run, 405, "method not allowed"},
		{"DELETE with p_pipeline_run is 405", "DELETE", "/api/pipelines/upper/?schema=server", e.run, 405, "method not allowed"},
		{"OPTIONS with p_pipeline_run is 405", "OPTIONS", "/api/pipelines/upper/?schema=server", e.run, 405, "method not allowed"},
		{"custom method with p_pipeline_run is 405", "PURGE", "/api/pipelines/upper/?schema=server", e.run, 405, "method not allowed"},
		{"GET by a read-only key with p_pipeline_run is 405", "GET", "/api/pipelines/upper/?schema=server", e.readOnly, 405, "method not allowed"},
		// 3. read-only key.
		{"read-only key is refused", "POST", "/api/pipelines/upper/?schema=server", e.readOnly, 403, "API key is read-only"},
		{"read-only key is refused before the schema check", "POST", "/api/pipelines//", e.readOnly, 403, "API key is read-only"},
		// 4. schema.
		{"missing schema is 400", "POST", "/api/pipelines/upper/", e.run, 400, "missing required parameter: schema"},
		{"empty schema is 400", "POST", "/api/pipelines/upper/?schema=", e.run, 400, "missing required parameter: schema"},
		{"blank schema is 400", "POST", "/api/pipelines/upper/?schema=%20", e.run, 400, "missing required parameter: schema"},
		{"schema of commas and spaces is 400", "POST", "/api/pipelines/upper/?schema=%20,%20,,%09,", e.run, 400, "missing required parameter: schema"},
		{"missing schema wins over a missing identifier", "POST", "/api/pipelines//", e.run, 400, "missing required parameter: schema"},
		{"missing schema wins over an unknown pipeline", "POST", "/api/pipelines/nope/?schema=,", e.run, 400, "missing required parameter: schema"},
		// 5. identifier.
		{"empty identifier is 400", "POST", "/api/pipelines//?schema=server", e.run, 400, "missing pipeline identifier"},
		{"blank identifier is 400", "POST", "/api/pipelines/%20/?schema=server", e.run, 400, "missing pipeline identifier"},
		{"whitespace identifier is 400", "POST", "/api/pipelines/%20%09%20/?schema=x", e.run, 400, "missing pipeline identifier"},
		// 6. lookup.
		{"unknown name is 404", "POST", "/api/pipelines/nope/?schema=server", e.run, 404, "pipeline not found"},
		{"unknown id is 404", "POST", "/api/pipelines/987654321/?schema=server", e.run, 404, "pipeline not found"},
		{"unknown pipeline wins over an unknown schema", "POST", "/api/pipelines/nope/?schema=nosuch", e.run, 404, "pipeline not found"},
		{"nested path is an unknown pipeline", "POST", "/api/pipelines/upper/x/?schema=server", e.run, 404, "pipeline not found"},
		// 7. submission.
		{"unknown schema is 400", "POST", "/api/pipelines/upper/?schema=nosuch", e.run, 400, `unknown schema "nosuch"`},
		{"non-runnable built-in class is 400", "POST", "/api/pipelines/upper/?schema=_apikey", e.admin, 400, `schema "_apikey" cannot be run (built-in class)`},
		{"invalid pipeline content is 400", "POST", "/api/pipelines/broken/?schema=server", e.run, 400, `pipeline broken: invalid content: rule 1: unknown rule "no_such_rule"`},
		{"missing run_permission is 400", "POST", "/api/pipelines/guarded/?schema=server", e.run, 400, "permission denied: pipeline guarded needs p_special"},
		{"more than 64 schemas is 400", "POST", "/api/pipelines/upper/?schema=" + strings.Repeat("server,", 65), e.run, 400, "too many schemas: 65 (at most 64)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, e.do(tc.method, tc.path, tc.c, nil), tc.status, tc.msg)
		})
	}
	if got := e.queryString("SELECT count(*) FROM tasks"); got != "0" {
		t.Fatalf("refused runs queued %s tasks", got)
	}
}

// TestPipelineRunSubmissionFailures covers check 7's other refusals.
func TestPipelineRunSubmissionFailures(t *testing.T) {
	t.Parallel()
	t.Run("full queue is 400 with the submission's message", func(t *testing.T) {
		e := newRunEnv(t, envOptions{NoRunner: true})
		if err := e.db.SetConfig(context.Background(), map[string]string{"QUEUE_MAX": "1"}); err != nil {
			t.Fatal(err)
		}
		decodeRun(t, e.post("/api/pipelines/upper/?schema=server", e.run, nil))
		wantError(t, e.post("/api/pipelines/upper/?schema=server", e.run, nil), 400,
			"task queue is full (1 unfinished tasks, QUEUE_MAX 1)")
	})
	t.Run("run_permission held is accepted", func(t *testing.T) {
		e := newRunEnv(t, envOptions{NoRunner: true})
		c := e.key("special", keySpec{perms: []string{"p_pipeline_run", "p_special", "p_data_read", "p_data_update"}})
		if got, want := decodeRun(t, e.post("/api/pipelines/guarded/?schema=server", c, nil)).Pipeline, "guarded"; got != want {
			t.Fatalf("pipeline = %q, want %q", got, want)
		}
	})
	t.Run("missing read permission of a schema is 400", func(t *testing.T) {
		e := newRunEnv(t, envOptions{NoRunner: true})
		c := e.key("blind", keySpec{perms: []string{"p_pipeline_run", "p_data_update"}})
		wantError(t, e.post("/api/pipelines/upper/?schema=server", c, nil), 400, "permission denied: reading server needs p_data_read")
	})
	t.Run("missing update permission is 400 for a real run only", func(t *testing.T) {
		e := newRunEnv(t, envOptions{NoRunner: true})
		c := e.key("viewer", keySpec{perms: []string{"p_pipeline_run", "p_data_read"}})
		wantError(t, e.post("/api/pipelines/upper/?schema=server", c, nil), 400, "permission denied: updating server needs p_data_update")
		if got := decodeRun(t, e.post("/api/pipelines/upper/?schema=server&dryrun=yes", c, nil)); !got.DryRun {
			t.Fatalf("dry run refused or not dry: %+v", got)
		}
	})
	t.Run("submission without a message is failed to submit task", func(t *testing.T) {
		e := newRunEnv(t, envOptions{NoRunner: true})
		// An internal failure of the submission (its table is gone) carries no message
		// fit for the caller.
		e.exec("ALTER TABLE tasks RENAME TO tasks_gone")
		wantError(t, e.post("/api/pipelines/upper/?schema=server", e.run, nil), 400, "failed to submit task")
	})
}

// TestPipelineRunAccepted: the 202 reply, the submitted task and its effect.
func TestPipelineRunAccepted(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t, envOptions{})
	r := e.post("/api/pipelines/bulk_delete_disabled/?schema=server", e.run, nil)
	rr := decodeRun(t, r)
	if got, want := rr.Pipeline, "bulk_delete_disabled"; got != want {
		t.Fatalf("pipeline = %q, want %q", got, want)
	}
	if rr.DryRun {
		t.Fatalf("dryrun = true, want false")
	}
	if got, want := rr.TaskURL, e.srv.URL+"/api/tasks/"+rr.Handle+"/"; got != want {
		t.Fatalf("task_url = %q, want %q", got, want)
	}
	task := e.waitTask(rr.Handle)
	if got, want := task.Status, "succeeded"; got != want {
		t.Fatalf("status = %q, want %q (error %v)", got, want, task.Error)
	}
	if got, want := task.Result.Deleted, int64(1); got != want {
		t.Fatalf("deleted = %d, want %d", got, want)
	}
	if _, err := e.db.Instance(context.Background(), "server", "srv2"); err == nil {
		t.Fatalf("disabled srv2 still exists after the run")
	}
	if _, err := e.db.Instance(context.Background(), "server", "srv1"); err != nil {
		t.Fatalf("enabled srv1 gone: %v", err)
	}
}

// TestPipelineRunTaskURL: task_url is absolute, from Options.BaseURL or the request's Host.
func TestPipelineRunTaskURL(t *testing.T) {
	t.Parallel()
	t.Run("base URL prefixes task_url", func(t *testing.T) {
		e := newRunEnv(t, envOptions{NoRunner: true, BaseURL: "https://data.example.test/svc"})
		rr := decodeRun(t, e.post("/api/pipelines/upper/?schema=server", e.run, nil))
		if got, want := rr.TaskURL, "https://data.example.test/svc/api/tasks/"+rr.Handle+"/"; got != want {
			t.Fatalf("task_url = %q, want %q", got, want)
		}
		u, err := url.Parse(rr.TaskURL)
		if err != nil {
			t.Fatal(err)
		}
		// The path part (after the base URL's own path) is the task detail endpoint.
		path := strings.TrimPrefix(u.Path, "/svc")
		if got, want := object(t, e.get(path, e.run), 200)["handle"], any(rr.Handle); got != want {
			t.Fatalf("task detail handle = %v, want %v", got, want)
		}
	})
	t.Run("without base URL task_url uses the request Host", func(t *testing.T) {
		e := newRunEnv(t, envOptions{NoRunner: true})
		host := func(r *http.Request) { r.Host = "svc.example.test:8080" }
		rr := decodeRun(t, e.post("/api/pipelines/upper/?schema=server", both(e.run, host), nil))
		if got, want := rr.TaskURL, "http://svc.example.test:8080/api/tasks/"+rr.Handle+"/"; got != want {
			t.Fatalf("task_url = %q, want %q", got, want)
		}
	})
}

// TestPipelineRunDryRun applies the seed's dryrun parsing to the reply and the task.
func TestPipelineRunDryRun(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t, envOptions{NoRunner: true})
	cases := []struct {
		name  string
		query string
		want  bool
	}{
		{"padded upper-case TRUE is true", "&dryrun=%20TRUE%20", true},
		{"1 is true", "&dryrun=1", true},
		{"yes is true", "&dryrun=yes", true},
		{"Yes is true", "&dryrun=Yes", true},
		{"no is false", "&dryrun=no", false},
		{"2 is false", "&dryrun=2", false},
		{"empty is false", "&dryrun=", false},
		{"absent is false", "", false},
		{"on is false", "&dryrun=on", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rr := decodeRun(t, e.post("/api/pipelines/upper/?schema=server"+tc.query, e.run, nil))
			if got, want := rr.DryRun, tc.want; got != want {
				t.Fatalf("reply dryrun = %v, want %v", got, want)
			}
			task, err := e.runner.Get(context.Background(), rr.Handle)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := task.DryRun, tc.want; got != want {
				t.Fatalf("task dryrun = %v, want %v", got, want)
			}
		})
	}
}

// TestPipelineRunSchemaList: the schema value and its items are trimmed, empty items
// dropped, and the built-in user class is allowed.
func TestPipelineRunSchemaList(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t, envOptions{NoRunner: true})
	rr := decodeRun(t, e.post("/api/pipelines/upper/?schema=%20%20server%20,%20,,_user%09", e.admin, nil))
	task, err := e.runner.Get(context.Background(), rr.Handle)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(task.Schemas, "|"), "server|_user"; got != want {
		t.Fatalf("schemas = %q, want %q", got, want)
	}
	if got, want := task.Pipeline, "upper"; got != want {
		t.Fatalf("task pipeline = %q, want %q", got, want)
	}
}

// TestPipelineRunOwner: owner type api and owner id the user's id as text, or system.
func TestPipelineRunOwner(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t, envOptions{NoRunner: true})
	perms := []string{"p_pipeline_run", "p_data_read", "p_data_update"}
	e.user("alice", true)
	e.user("gone", false)
	withUser := e.key("alice_key", keySpec{perms: perms, user: "alice"})
	disabledUser := e.key("gone_key", keySpec{perms: perms, user: "gone"})
	aliceID := strconv.FormatInt(e.instanceID("_user", "alice"), 10)
	adminID := strconv.FormatInt(e.instanceID("_user", "admin"), 10)
	cases := []struct {
		name  string
		c     cred
		owner string
	}{
		{"key with a user is owned by the user id", withUser, aliceID},
		{"key without a user is owned by system", e.run, "system"},
		{"key whose user is disabled is owned by system", disabledUser, "system"},
		{"basic login is owned by the user id", adminCred, adminID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rr := decodeRun(t, e.post("/api/pipelines/upper/?schema=server", tc.c, nil))
			if got, want := e.queryString("SELECT owner_type FROM tasks WHERE handle = ?", rr.Handle), "api"; got != want {
				t.Fatalf("owner_type = %q, want %q", got, want)
			}
			if got, want := e.queryString("SELECT owner_id FROM tasks WHERE handle = ?", rr.Handle), tc.owner; got != want {
				t.Fatalf("owner_id = %q, want %q", got, want)
			}
			d := object(t, e.get("/api/tasks/"+rr.Handle+"/", tc.c), 200)
			if got, want := d["owner_type"], any("api"); got != want {
				t.Fatalf("detail owner_type = %v, want %v", got, want)
			}
			if got, want := d["owner_id"], any(tc.owner); got != want {
				t.Fatalf("detail owner_id = %v, want %v", got, want)
			}
		})
	}
}

// TestPipelineRunIdentifier: a digits-only segment is an id first, then a keyname;
// other segments are keynames; surrounding whitespace is trimmed.
func TestPipelineRunIdentifier(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t, envOptions{NoRunner: true})
	builtinID := strconv.FormatInt(e.instanceID("_pipeline", "bulk_delete_disabled"), 10)
	// A pipeline whose keyname is the id of another one, and one whose digit keyname is
	// no pipeline's id.
	e.load(`
- {classname: _pipeline, keyname: '` + builtinID + `', content: '[]'}
- {classname: _pipeline, keyname: '987654', content: '[]'}
`)
	if _, err := e.db.PipelineByID(context.Background(), 987654); err == nil {
		t.Fatalf("test setup: a pipeline has id 987654")
	}
	cases := []struct {
		name    string
		segment string
		want    string
	}{
		{"digits matching an id run that pipeline, not the keyname", builtinID, "bulk_delete_disabled"},
		{"digits matching no id fall back to the keyname", "987654", "987654"},
		{"a keyname runs that pipeline", "upper", "upper"},
		{"the id of upper runs upper", strconv.FormatInt(e.instanceID("_pipeline", "upper"), 10), "upper"},
		{"surrounding whitespace is trimmed", "%20upper%09", "upper"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rr := decodeRun(t, e.post("/api/pipelines/"+tc.segment+"/?schema=server", e.run, nil))
			if got := rr.Pipeline; got != tc.want {
				t.Fatalf("pipeline = %q, want %q", got, tc.want)
			}
			task, err := e.runner.Get(context.Background(), rr.Handle)
			if err != nil {
				t.Fatal(err)
			}
			if got := task.Pipeline; got != tc.want {
				t.Fatalf("task pipeline = %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("a disabled pipeline is found but its submission is refused", func(t *testing.T) {
		wantError(t, e.post("/api/pipelines/dormant/?schema=server", e.run, nil), 400, "pipeline dormant is disabled")
	})
}

// TestPipelineList covers GET /api/pipelines/: the gate, the method rule and the body.
func TestPipelineList(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t, envOptions{NoRunner: true})
	lister := e.key("lister", keySpec{perms: []string{"p_data_access"}, readOnly: true})
	outsider := e.key("outsider", keySpec{perms: []string{"p_pipeline_run", "p_data_read"}})

	t.Run("no credentials is 401", func(t *testing.T) {
		wantError(t, e.get("/api/pipelines/", noCred), 401, "authentication required")
	})
	t.Run("without p_data_access is 403", func(t *testing.T) {
		wantError(t, e.get("/api/pipelines/", outsider), 403, "permission denied")
	})
	t.Run("POST without p_data_access is 403 not 405", func(t *testing.T) {
		wantError(t, e.post("/api/pipelines/", outsider, nil), 403, "permission denied")
	})
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH", "PURGE"} {
		t.Run(m+" by an allowed caller is 405", func(t *testing.T) {
			wantError(t, e.do(m, "/api/pipelines/", lister, nil), 405, "method not allowed")
		})
	}
	t.Run("GET lists every pipeline with id, keyname and run_permission", func(t *testing.T) {
		var body struct {
			Count     json.Number                  `json:"count"`
			Pipelines []map[string]json.RawMessage `json:"pipelines"`
		}
		wantJSON(t, e.get("/api/pipelines/", lister), 200, &body)
		if got, want := body.Count.String(), strconv.Itoa(len(body.Pipelines)); got != want {
			t.Fatalf("count = %s, want len(pipelines) = %s", got, want)
		}
		rows, err := e.db.Reader().QueryContext(context.Background(), `SELECT id, keyname, COALESCE(data ->> 'run_permission', '')
			FROM instances WHERE classname = '_pipeline' ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var want []string
		for rows.Next() {
			var id int64
			var key, rp string
			if err := rows.Scan(&id, &key, &rp); err != nil {
				t.Fatal(err)
			}
			rpJSON := "null"
			if rp != "" {
				rpJSON = strconv.Quote(rp)
			}
			want = append(want, strconv.FormatInt(id, 10)+" "+strconv.Quote(key)+" "+rpJSON)
		}
		if got, want := len(want), 5; got != want {
			t.Fatalf("test setup: %d pipelines stored, want %d", got, want)
		}
		var got []string
		for _, p := range body.Pipelines {
			if len(p) != 3 {
				t.Fatalf("pipeline object %v has %d fields, want 3", p, len(p))
			}
			var id int64
			if err := json.Unmarshal(p["id"], &id); err != nil {
				t.Fatalf("id %s is not an integer: %v", p["id"], err)
			}
			var key string
			if err := json.Unmarshal(p["keyname"], &key); err != nil {
				t.Fatalf("keyname %s is not a string: %v", p["keyname"], err)
			}
			got = append(got, strconv.FormatInt(id, 10)+" "+strconv.Quote(key)+" "+string(p["run_permission"]))
		}
		if g, w := strings.Join(got, "\n"), strings.Join(want, "\n"); g != w {
			t.Fatalf("pipelines:\n%s\nwant:\n%s", g, w)
		}
		if !strings.Contains(strings.Join(got, "\n"), `"guarded" "p_special"`) {
			t.Fatalf("guarded's run_permission missing: %v", got)
		}
	})
}
