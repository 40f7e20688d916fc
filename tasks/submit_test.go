package tasks_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
	"dataservice/tasks"
)

func TestSubmitRejects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t)
	addPipeline(t, db, "marker", markerPipeline, "")
	addPipeline(t, db, "guarded", markerPipeline, "p_special")
	addPipeline(t, db, "broken", markerPipeline, "")
	addPipeline(t, db, "off", markerPipeline, "")
	testkit.ExecAll(t, db, `UPDATE instances SET is_enabled = 0 WHERE classname = '_pipeline' AND keyname = 'off'`)
	// Stored content is validated on load, so invalid content can only come from an
	// older release or a direct edit of the file.
	testkit.ExecAll(t, db, `UPDATE instances SET data = '{"content":"- field_frobnicate: [x]"}'
		WHERE classname = '_pipeline' AND keyname = 'broken'`)
	mustLoad(t, db, `
- classname: _permission
  keyname: p_special
- classname: _user
  keyname: reader
- classname: _user
  keyname: writer
- classname: _role
  keyname: role_reader
  permissions: [p_pipeline_run, p_data_read]
  users: [reader]
- classname: _role
  keyname: role_writer
  permissions: [p_pipeline_run, p_data_read, p_data_update]
  users: [writer]
`)
	reader, err := db.UserAuth(ctx, "reader")
	if err != nil {
		t.Fatal(err)
	}
	writer, err := db.UserAuth(ctx, "writer")
	if err != nil {
		t.Fatal(err)
	}
	nobody := &model.Auth{Kind: "user", Name: "nobody", Perms: []string{"p_pipeline_run"}}
	many := make([]string, tasks.MaxSchemas+1)
	for i := range many {
		many[i] = "host"
	}
	r := newRunner(t, db, tasks.Options{})

	for _, tc := range []struct {
		name string
		p    tasks.Params
		code string
		msg  string
	}{
		{"unknown pipeline is not found", tasks.Params{Pipeline: "nosuch", Schemas: []string{"host"}},
			model.ENotFound, "pipeline not found"},
		{"invalid content is rejected naming the rule", tasks.Params{Pipeline: "broken", Schemas: []string{"host"}},
			model.EInvalid, `pipeline broken: invalid content: rule 1: unknown rule "field_frobnicate"`},
		{"a disabled pipeline is rejected", tasks.Params{Pipeline: "off", Schemas: []string{"host"}},
			model.EInvalid, "pipeline off is disabled"},
		{"no schema is rejected", tasks.Params{Pipeline: "marker"},
			model.EInvalid, "no schema given"},
		{"unknown schema is rejected", tasks.Params{Pipeline: "marker", Schemas: []string{"host", "nosuch"}},
			model.EInvalid, `unknown schema "nosuch"`},
		{"built-in _apikey is not runnable", tasks.Params{Pipeline: "marker", Schemas: []string{"_apikey"}},
			model.EInvalid, `schema "_apikey" cannot be run (built-in class)`},
		{"built-in _pipeline is not runnable", tasks.Params{Pipeline: "marker", Schemas: []string{"_pipeline"}},
			model.EInvalid, `schema "_pipeline" cannot be run (built-in class)`},
		{"more than 64 schemas are rejected", tasks.Params{Pipeline: "marker", Schemas: many},
			model.EInvalid, "too many schemas: 65 (at most 64)"},
		{"missing run_permission is rejected", tasks.Params{Pipeline: "guarded", Schemas: []string{"host"}, Auth: writer},
			model.EInvalid, "permission denied: pipeline guarded needs p_special"},
		{"missing read permission is rejected", tasks.Params{Pipeline: "marker", Schemas: []string{"host"}, Auth: nobody, DryRun: true},
			model.EInvalid, "permission denied: reading host needs p_data_read"},
		{"missing update permission is rejected", tasks.Params{Pipeline: "marker", Schemas: []string{"host"}, Auth: reader},
			model.EInvalid, "permission denied: updating host needs p_data_update"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.p.Auth == nil {
				tc.p.Auth = model.SystemAuth()
			}
			h, err := r.Submit(ctx, tc.p)
			var se *model.Error
			if !errors.As(err, &se) {
				t.Fatalf("Submit = %q, %v; want a *model.Error", h, err)
			}
			if got, want := se.Code+": "+se.Message, tc.code+": "+tc.msg; got != want {
				t.Fatalf("error %q, want %q", got, want)
			}
			if got, want := h, ""; got != want {
				t.Errorf("handle %q, want none", got)
			}
		})
	}
	if got, want := queryInt(t, db, "SELECT count(*) FROM tasks"), 0; got != want {
		t.Fatalf("rejected submissions queued %d tasks", got)
	}

	t.Run("runnable submissions are queued", func(t *testing.T) {
		for _, p := range []tasks.Params{
			{Pipeline: "marker", Schemas: []string{"_user"}},
			{Pipeline: "marker", Schemas: many[:tasks.MaxSchemas]},
			{Pipeline: "marker", Schemas: []string{"host"}, Auth: reader, DryRun: true},
			{Pipeline: "marker", Schemas: []string{"host"}, Auth: writer},
			{Pipeline: "guarded", Schemas: []string{"host"}},
		} {
			if p.Auth == nil {
				p.Auth = model.SystemAuth()
			}
			h, err := r.Submit(ctx, p)
			if err != nil {
				t.Fatalf("Submit %s on %d schema(s): %v", p.Pipeline, len(p.Schemas), err)
			}
			task := getTask(t, r, h)
			if got, want := task.Status+" "+task.Pipeline, "queued "+p.Pipeline; got != want {
				t.Errorf("task %s: %q, want %q", h, got, want)
			}
		}
	})
}

func TestSubmitQueueFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t)
	addPipeline(t, db, "marker", markerPipeline, "")
	if err := db.SetConfig(ctx, map[string]string{"QUEUE_MAX": "3"}); err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, db, tasks.Options{})
	p := tasks.Params{Pipeline: "marker", Schemas: []string{"host"}}
	var handles []string
	for i := 0; i < 3; i++ {
		handles = append(handles, submit(t, r, p))
	}
	t.Run("a submission beyond QUEUE_MAX unfinished tasks is rejected", func(t *testing.T) {
		p.Auth = model.SystemAuth()
		_, err := r.Submit(ctx, p)
		var se *model.Error
		if !errors.As(err, &se) {
			t.Fatalf("Submit: %v, want a *model.Error", err)
		}
		if got, want := se.Code+": "+se.Message, "invalid: task queue is full (3 unfinished tasks, QUEUE_MAX 3)"; got != want {
			t.Fatalf("error %q, want %q", got, want)
		}
		if got, want := queryInt(t, db, "SELECT count(*) FROM tasks"), 3; got != want {
			t.Fatalf("tasks: %d, want %d", got, want)
		}
	})
	t.Run("a finished task frees its place", func(t *testing.T) {
		if _, err := r.Cancel(ctx, handles[0]); err != nil {
			t.Fatal(err)
		}
		h := submit(t, r, p)
		if !strings.Contains(h, "-") {
			t.Fatalf("handle %q is not a UUID", h)
		}
	})
}

func TestSubmitWithoutAuthIsRejected(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	addPipeline(t, db, "marker", markerPipeline, "")
	r := newRunner(t, db, tasks.Options{})
	_, err := r.Submit(context.Background(), tasks.Params{Pipeline: "marker", Schemas: []string{"host"}})
	if got, want := store.ErrorMessage(err), "no authorisation context"; got != want {
		t.Fatalf("Submit without Auth: %q, want %q", got, want)
	}
}

func TestSubmitTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t)
	addPipeline(t, db, "marker", markerPipeline, "")
	r := newRunner(t, db, tasks.Options{})
	p := tasks.Params{Pipeline: "marker", Schemas: []string{"host"}, Auth: model.SystemAuth()}
	t.Run("a rolled-back transaction queues nothing", func(t *testing.T) {
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.SubmitTx(ctx, tx, p); err != nil {
			t.Fatal(err)
		}
		tx.Rollback()
		if got, want := queryInt(t, db, "SELECT count(*) FROM tasks"), 0; got != want {
			t.Fatalf("tasks: %d, want %d", got, want)
		}
	})
	t.Run("a committed transaction queues the task with its other writes", func(t *testing.T) {
		var handle string
		err := db.WithTx(ctx, func(tx *store.Tx) error {
			var err error
			if handle, err = r.SubmitTx(ctx, tx, p); err != nil {
				return err
			}
			return tx.SetRegistry(ctx, "SUBMIT_TX_TEST", handle)
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := testkit.QueryString(t, db, "SELECT value FROM registry WHERE key = 'SUBMIT_TX_TEST'"), handle; got != want {
			t.Fatalf("registry: %q, want %q", got, want)
		}
		if got, want := getTask(t, r, handle).Status, tasks.StatusQueued; got != want {
			t.Fatalf("status: %s, want %s", got, want)
		}
	})
}

// TestSubmitQueuePerOwner: one submitting credential cannot fill the queue; another
// credential still submits. Keys without a user are told apart by key, not "system".
func TestSubmitQueuePerOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newDB(t)
	addPipeline(t, db, "marker", markerPipeline, "")
	if err := db.SetConfig(ctx, map[string]string{"QUEUE_MAX": "10", "QUEUE_MAX_PER_OWNER": "2"}); err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, db, tasks.Options{})
	keyA := &model.Auth{Kind: "apikey", Name: "key_a", All: true}
	keyB := &model.Auth{Kind: "apikey", Name: "key_b", All: true}
	p := tasks.Params{Pipeline: "marker", Schemas: []string{"host"}, Auth: keyA, OwnerType: "api", OwnerID: "system"}
	for i := 0; i < 2; i++ {
		if _, err := r.Submit(ctx, p); err != nil {
			t.Fatalf("submission %d of key_a: %v", i+1, err)
		}
	}
	_, err := r.Submit(ctx, p)
	if got, want := store.ErrorCode(err)+": "+store.ErrorMessage(err),
		"invalid: task queue is full for this owner (2 unfinished tasks, QUEUE_MAX_PER_OWNER 2)"; got != want {
		t.Fatalf("third submission of key_a: %q, want %q", got, want)
	}
	p.Auth = keyB
	if _, err := r.Submit(ctx, p); err != nil {
		t.Fatalf("key_b (same owner id system) was refused: %v", err)
	}
	if got, want := queryInt(t, db, "SELECT count(*) FROM tasks"), 3; got != want {
		t.Fatalf("tasks: %d, want %d", got, want)
	}
}
