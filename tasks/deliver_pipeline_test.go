package tasks_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/tasks"
)

// TestPipelineAction: an update a pipeline rule watches queues the pipeline on that
// instance only, as a task owned by the rule whose handle is the event's id; the
// task's own change records no event of that rule (no loop).
func TestPipelineAction(t *testing.T) {
	t.Parallel()
	db := newEventDB(t, 8)
	mustLoad(t, db, `
- {classname: host, keyname: a, note: x}
- {classname: host, keyname: b, note: x}
`)
	addPipeline(t, db, "mark", "- field_set: [\"\", note, marked]\n", "")
	mustLoad(t, db, "- {classname: _eventrule, keyname: onport, schemas: [host], actions: [update], pipeline: mark}\n")
	runner := newRunner(t, db, tasks.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		runner.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	startDeliverer(t, db, runner, tasks.DeliveryOptions{})

	mustLoad(t, db, "- {classname: host, keyname: a, port: 22}\n")
	ev := eventsWith(t, db, "onport", store.EventDelivered, 1)[0]
	if ev.Kind != store.EventPipeline || ev.Task != ev.ID {
		t.Fatalf("event kind %q task %q, want pipeline and the event's id %s", ev.Kind, ev.Task, ev.ID)
	}
	var task *tasks.Task
	waitFor(t, "the rule's task to finish", func() bool {
		task = getTask(t, runner, ev.Task)
		return task.Finished()
	})
	res := mustSucceed(t, task)
	if task.OwnerType != tasks.OwnerEventRule || task.OwnerID != "onport" || res.Scanned != 1 || res.Updated != 1 {
		t.Fatalf("task owner %s/%s scanned %d updated %d; want eventrule/onport, 1, 1", task.OwnerType, task.OwnerID,
			res.Scanned, res.Updated)
	}
	rows := instanceRows(t, db, "host")
	if !strings.Contains(rows["a"].Data, `"note":"marked"`) || strings.Contains(rows["b"].Data, "marked") {
		t.Fatalf("host a %s, b %s; want only a marked", rows["a"].Data, rows["b"].Data)
	}
	// The task's update of a was committed before it finished: had it fired the
	// rule, its event would be listed now.
	if list := events(t, db, "onport"); len(list) != 1 {
		t.Fatalf("rule onport has %d events, want 1 (the task's change must not fire it)", len(list))
	}
}

// TestDeliveryRecheck: an event whose rule's author may no longer read the schema, or
// whose rule was disabled since, is dead with that reason and never sent.
func TestDeliveryRecheck(t *testing.T) {
	t.Parallel()
	db := newEventDB(t, 8)
	rc := newReceiver(t, always(http.StatusOK))
	mustLoad(t, db, `
- {classname: _user, keyname: alice, password: alice-pass-1}
- {classname: _role, keyname: hooks, permissions: [p_event_admin, p_data_access, p_data_read], users: [alice]}
- {classname: _user, keyname: bob, password: bob-pass-1}
- {classname: _role, keyname: hooks2, permissions: [p_event_admin, p_data_access, p_data_read], users: [bob]}
`)
	ctx := context.Background()
	for _, login := range []string{"alice", "bob"} {
		auth, err := db.UserAuth(ctx, login)
		if err != nil {
			t.Fatal(err)
		}
		testkit.MustLoad(t, db, "- {classname: _eventrule, keyname: by"+login+", schemas: [host], webhook_url: \""+
			rc.URL+"\", secret: k}\n", store.LoadOptions{Auth: auth})
	}
	// Both rules record the write; then alice loses the read permission and bob's
	// rule is disabled, before the deliverer starts.
	mustLoad(t, db, "- {classname: host, keyname: a}\n")
	mustLoad(t, db, `
- {classname: _role, keyname: hooks, permissions: [p_event_admin, p_data_access], users: [alice]}
- {classname: _eventrule, keyname: bybob, _action: disable}
`)
	startDeliverer(t, db, nil, tasks.DeliveryOptions{})
	if ev := eventsWith(t, db, "byalice", store.EventDead, 1)[0]; !strings.Contains(ev.LastError, "may no longer watch host") {
		t.Errorf("alice's rule: last error %q", ev.LastError)
	}
	if ev := eventsWith(t, db, "bybob", store.EventDead, 1)[0]; !strings.Contains(ev.LastError, "is disabled") {
		t.Errorf("bob's rule: last error %q", ev.LastError)
	}
	if got := len(rc.got()); got != 0 {
		t.Fatalf("receiver got %d requests, want none", got)
	}
}

// TestPipelineActionWaitsForRoomInTheQueue: with the task queue full, a pipeline event's
// attempts fail and are retried; once there is room, the task is queued and the event
// delivered.
func TestPipelineActionWaitsForRoomInTheQueue(t *testing.T) {
	t.Parallel()
	db := newEventDB(t, 100)
	ctx := context.Background()
	if err := db.SetConfig(ctx, map[string]string{store.ConfigQueueMax: "1"}); err != nil {
		t.Fatal(err)
	}
	mustLoad(t, db, "- {classname: host, keyname: a}\n")
	addPipeline(t, db, "mark", "- field_set: [\"\", note, marked]\n", "")
	mustLoad(t, db, "- {classname: _eventrule, keyname: onport, schemas: [host], actions: [update], pipeline: mark}\n")
	runner := newRunner(t, db, tasks.Options{}) // not running: queued tasks stay queued
	filler := submit(t, runner, tasks.Params{Pipeline: "mark", Schemas: []string{"host"}})
	startDeliverer(t, db, runner, tasks.DeliveryOptions{})
	mustLoad(t, db, "- {classname: host, keyname: a, port: 22}\n")
	waitFor(t, "a failed attempt for the full queue", func() bool {
		list := events(t, db, "onport")
		return len(list) == 1 && list[0].Attempts >= 2 && list[0].Status == store.EventPending
	})
	if ev := events(t, db, "onport")[0]; !strings.HasPrefix(ev.LastError, "task queue is full") {
		t.Fatalf("last error %q, want the full queue", ev.LastError)
	}
	if _, err := runner.Cancel(ctx, filler); err != nil {
		t.Fatal(err)
	}
	ev := eventsWith(t, db, "onport", store.EventDelivered, 1)[0]
	if task := getTask(t, runner, ev.Task); task.Status != tasks.StatusQueued || task.OwnerID != "onport" {
		t.Fatalf("task %s: status %s owner %s, want queued and onport", ev.Task, task.Status, task.OwnerID)
	}
}
