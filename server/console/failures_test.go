package console_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/tasks"
)

// TestFailedTaskShown: a task that fails shows its error first on its page, and the
// dashboard of its owner lists it with the error and a link; a user who sees no tasks
// gets no failures section.
func TestFailedTaskShown(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t, 0, nil)
	e.load(pipelinePeople)
	ops := e.browser()
	ops.signIn("ops", "ops-pass-1")
	lacks(t, ops.get("/"), `id="failures"`)
	// Queued while the runner is stopped, then the pipeline is disabled: the run fails
	// when it starts.
	h := started(t, ops.runForm("tag", false, "host"))
	// A schedule's run, submitted as a scheduler submits it (owner type schedule).
	ctx := context.Background()
	auth, err := e.db.UserAuth(ctx, "admin")
	if err != nil {
		t.Fatal(err)
	}
	hs, err := e.runner.Submit(ctx, tasks.Params{Pipeline: "tag", Schemas: []string{"host"}, Auth: auth, OwnerType: "schedule", OwnerID: "nightly"})
	if err != nil {
		t.Fatal(err)
	}
	e.load(`- {classname: _pipeline, keyname: tag, _action: disable}`)
	e.loop.Start()
	var task *tasks.Task
	testkit.WaitFor(t, 20*time.Second, "the runs to finish", func() bool {
		task, _ = e.runner.Get(ctx, h)
		other, _ := e.runner.Get(ctx, hs)
		return task.Finished() && other.Finished()
	})
	if task.Status != tasks.StatusFailed || task.Error == nil {
		t.Fatalf("status %s, error %v: want a failed task", task.Status, task.Error)
	}
	p := ops.get("/data/private/task/" + h + "/")
	want(t, p, http.StatusOK, `<div class="alert" role="alert" id="task-error"><strong>This task failed.</strong> <span class="pre" id="task-error-text">`+*task.Error)
	p = ops.get("/")
	want(t, p, http.StatusOK, `id="failures"`, `id="failed-tasks"`, `<a href="/data/private/task/`+h+`/">`+h[:8]+`</a>`, *task.Error)

	admin := e.browser()
	admin.signIn("admin", adminPassword)
	p = admin.get("/data/private/task/" + hs + "/")
	want(t, p, http.StatusOK, `id="task-error"`, `<td id="task-source">schedule <a href="/data/private/_schedule/nightly/">nightly</a></td>`)
	want(t, ops.get("/data/private/task/"+h+"/"), http.StatusOK)
	lacks(t, ops.get("/data/private/task/"+h+"/"), `id="task-source"`)

	viewer := e.browser()
	viewer.signIn("viewer", "viewer-pass-1")
	lacks(t, viewer.get("/"), `id="failures"`, h[:8])
}
