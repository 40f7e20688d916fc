package tasks_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
	"dataservice/tasks"
)

// The tests of this file check that an event rule's pipeline action and a schedule's
// runs are held to the checks of a direct run, as their author and as the author is
// now: the principal itself (not whoever holds its name later), with the permissions
// it holds when the run is submitted.

// startRunner runs a task runner over db until the test ends.
func startRunner(t *testing.T, db *store.DB) *tasks.Runner {
	runner := newRunner(t, db, tasks.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); runner.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return runner
}

// loadRefused loads doc with auth and returns the text of its refusal; a load that
// succeeds fails the test.
func loadRefused(t *testing.T, db *store.DB, doc string, auth *model.Auth) string {
	t.Helper()
	r := testkit.Load(t, db, doc, store.LoadOptions{Auth: auth})
	if r.Errors == 0 {
		t.Fatalf("load accepted, want a refusal: %s", doc)
	}
	return fmt.Sprintf("%+v", r.Messages)
}

// userAuthOf is the authorisation context of a stored user.
func userAuthOf(t *testing.T, db *store.DB, login string) *model.Auth {
	t.Helper()
	auth, err := db.UserAuth(context.Background(), login)
	if err != nil {
		t.Fatal(err)
	}
	return auth
}

// TestPipelineActionNeedsRunPermission: a rule whose writer lacks p_pipeline_run is
// refused when written; a rule whose author loses it afterwards gets its pipeline
// event dead with the reason, and the pipeline never runs.
func TestPipelineActionNeedsRunPermission(t *testing.T) {
	t.Parallel()
	db := newEventDB(t, 8)
	mustLoad(t, db, `
- {classname: host, keyname: a, note: x}
- {classname: _user, keyname: carol, password: carol-pass-1}
- {classname: _role, keyname: evonly, permissions: [p_event_admin, p_data_access, p_data_read, p_data_update], users: [carol]}
`)
	addPipeline(t, db, "mark", "- field_set: [\"\", note, marked]\n", "")
	rule := "- {classname: _eventrule, keyname: byc, schemas: [host], actions: [update], pipeline: mark}\n"
	msg := loadRefused(t, db, rule, userAuthOf(t, db, "carol"))
	if want := `pipeline: the writer could not run pipeline "mark": permission denied: running a pipeline needs p_pipeline_run`; !strings.Contains(msg, want) {
		t.Fatalf("refusal %s, want %q", msg, want)
	}
	// With p_pipeline_run the rule is written; then carol loses it.
	mustLoad(t, db, "- {classname: _role, keyname: evonly, permissions: [p_event_admin, p_data_access, p_data_read, p_data_update, p_pipeline_run], users: [carol]}\n")
	testkit.MustLoad(t, db, rule, store.LoadOptions{Auth: userAuthOf(t, db, "carol")})
	mustLoad(t, db, "- {classname: _role, keyname: evonly, permissions: [p_event_admin, p_data_access, p_data_read, p_data_update], users: [carol]}\n")
	runner := startRunner(t, db)
	startDeliverer(t, db, runner, tasks.DeliveryOptions{})
	mustLoad(t, db, "- {classname: host, keyname: a, port: 22}\n")
	ev := eventsWith(t, db, "byc", store.EventDead, 1)[0]
	if want := "permission denied: running a pipeline needs p_pipeline_run"; ev.LastError != want {
		t.Fatalf("last error %q, want %q", ev.LastError, want)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM tasks"); n != 0 {
		t.Fatalf("%d tasks queued, want none", n)
	}
	if data := instanceRows(t, db, "host")["a"].Data; strings.Contains(data, "marked") {
		t.Fatalf("host a = %s: the pipeline ran", data)
	}
}

// TestScheduleNeedsRunPermission: a schedule whose writer lacks p_pipeline_run is
// refused when written; a schedule whose author loses it afterwards has its runs
// counted failed with the reason, and none is submitted.
func TestScheduleNeedsRunPermission(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	mustLoad(t, db, `
- {classname: host, keyname: a, note: x}
- {classname: _user, keyname: dave, password: dave-pass-1}
- {classname: _role, keyname: plonly, permissions: [p_pipeline_admin, p_data_access, p_data_read, p_data_update], users: [dave]}
`)
	addPipeline(t, db, "mark", "- field_set: [\"\", note, marked]\n", "")
	sched := "- {classname: _schedule, keyname: s1, pipeline: mark, schemas: [host], cron: '@every 1s'}\n"
	msg := loadRefused(t, db, sched, userAuthOf(t, db, "dave"))
	if want := `pipeline: the writer could not run pipeline "mark": permission denied: running a pipeline needs p_pipeline_run`; !strings.Contains(msg, want) {
		t.Fatalf("refusal %s, want %q", msg, want)
	}
	mustLoad(t, db, "- {classname: _role, keyname: plonly, permissions: [p_pipeline_admin, p_data_access, p_data_read, p_data_update, p_pipeline_run], users: [dave]}\n")
	testkit.MustLoad(t, db, sched, store.LoadOptions{Auth: userAuthOf(t, db, "dave")})
	mustLoad(t, db, "- {classname: _role, keyname: plonly, permissions: [p_pipeline_admin, p_data_access, p_data_read, p_data_update], users: [dave]}\n")
	r := newRunner(t, db, tasks.Options{})
	var c schedCounts
	s := newScheduler(t, r, &c)
	tick(t, s, schedBase)
	tick(t, s, schedBase.Add(1500*time.Millisecond))
	if n := scheduledTasks(t, db, "s1"); n != 0 {
		t.Fatalf("%d runs submitted for an author without p_pipeline_run", n)
	}
	if got := c.get(tasks.RunFailed); got != 1 {
		t.Fatalf("failed runs: %d, want 1", got)
	}
	if got, want := lastRun(t, db, "s1"),
		"failed: permission denied: running a pipeline needs p_pipeline_run"; got != want {
		t.Fatalf("last run: %q, want %q", got, want)
	}
}

// TestRuleOfRevokedKeyIsNotItsNamesakes: a key revoked and created again under the
// same name (another key, held by someone else) is not the author of the old key's
// rule: the rule's event is dead, and the pipeline never runs as the new key.
func TestRuleOfRevokedKeyIsNotItsNamesakes(t *testing.T) {
	t.Parallel()
	db := newEventDB(t, 8)
	mustLoad(t, db, `
- {classname: host, keyname: a, note: x}
- {classname: _apikey, keyname: ci, secret: ci-secret-old-1, is_readonly: false, permissions: [p_event_admin, p_data_access, p_data_read, p_data_update, p_pipeline_run]}
`)
	addPipeline(t, db, "mark", "- field_set: [\"\", note, marked]\n", "")
	old, _, err := db.KeyAuth(context.Background(), "ci")
	if err != nil {
		t.Fatal(err)
	}
	testkit.MustLoad(t, db, "- {classname: _eventrule, keyname: byci, schemas: [host], actions: [update], pipeline: mark}\n", store.LoadOptions{Auth: old})
	mustLoad(t, db, "- {classname: _apikey, keyname: ci, _action: delete}\n")
	mustLoad(t, db, "- {classname: _apikey, keyname: ci, secret: ci-secret-new-2, is_readonly: false, permissions: [p_data_access, p_data_read, p_data_update, p_pipeline_run]}\n")
	runner := startRunner(t, db)
	startDeliverer(t, db, runner, tasks.DeliveryOptions{})
	mustLoad(t, db, "- {classname: host, keyname: a, port: 22}\n")
	ev := eventsWith(t, db, "byci", store.EventDead, 1)[0]
	if want := "API key ci is no longer valid"; !strings.Contains(ev.LastError, want) {
		t.Fatalf("last error %q, want it to contain %q", ev.LastError, want)
	}
	if data := instanceRows(t, db, "host")["a"].Data; strings.Contains(data, "marked") {
		t.Fatalf("host a = %s: the revoked key's rule ran as its namesake", data)
	}
}

// TestScheduleOfDeletedUserIsNotItsNamesakes: a user deleted and created again with the
// same login is another user: the old user's schedule does not run as the new one.
func TestScheduleOfDeletedUserIsNotItsNamesakes(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	users := `
- {classname: _user, keyname: erin, password: erin-pass-1}
- {classname: _role, keyname: runners, permissions: [p_pipeline_admin, p_pipeline_run, p_data_access, p_data_read, p_data_update], users: [erin]}
`
	mustLoad(t, db, "- {classname: host, keyname: a, note: x}\n"+users)
	addPipeline(t, db, "mark", "- field_set: [\"\", note, marked]\n", "")
	testkit.MustLoad(t, db, "- {classname: _schedule, keyname: s1, pipeline: mark, schemas: [host], cron: '@every 1s'}\n",
		store.LoadOptions{Auth: userAuthOf(t, db, "erin")})
	mustLoad(t, db, "- {classname: _user, keyname: erin, _action: delete}\n")
	mustLoad(t, db, users)
	r := newRunner(t, db, tasks.Options{})
	var c schedCounts
	s := newScheduler(t, r, &c)
	tick(t, s, schedBase)
	tick(t, s, schedBase.Add(1500*time.Millisecond))
	if n := scheduledTasks(t, db, "s1"); n != 0 {
		t.Fatalf("%d runs submitted as the new user erin", n)
	}
	if got, want := lastRun(t, db, "s1"),
		"failed: user erin no longer exists"; got != want {
		t.Fatalf("last run: %q, want %q", got, want)
	}
}

// TestEnablingArmsAsTheEnabler: enabling a rule another principal wrote is a write
// by the enabler: it is checked as the enabler's (a p_event_admin holder without
// p_data_update cannot arm a system-authored rule whose pipeline updates the schema:
// refused, the rule stays disabled and its author the system), and once enabled the
// enabler is its author (name and id), so the rule acts with the enabler's permissions.
func TestEnablingArmsAsTheEnabler(t *testing.T) {
	t.Parallel()
	db := newEventDB(t, 8)
	mustLoad(t, db, `
- {classname: host, keyname: a, note: x}
- {classname: _user, keyname: fay, password: fay-pass-1}
- {classname: _user, keyname: gus, password: gus-pass-1}
- {classname: _role, keyname: evadmin, permissions: [p_event_admin, p_pipeline_run, p_data_access, p_data_read], users: [fay]}
- {classname: _role, keyname: evwriter, permissions: [p_event_admin, p_pipeline_run, p_data_access, p_data_read, p_data_update], users: [gus]}
- {classname: _pipeline, keyname: mark, content: "- field_set: [\"\", note, marked]"}
- {classname: _eventrule, keyname: sys, schemas: [host], actions: [update], pipeline: mark, is_enabled: false}
`)
	rule := func() *store.Instance {
		in, err := db.Instance(context.Background(), "_eventrule", "sys")
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	fay := userAuthOf(t, db, "fay")
	r := testkit.Load(t, db, "- {classname: _eventrule, keyname: sys, _action: enable}\n", store.LoadOptions{Auth: fay})
	if r.Errors != 1 || !strings.Contains(r.Messages[0].Message, "updating host needs p_data_update") {
		t.Fatalf("fay's enable: %+v, want refused: updating host needs p_data_update", r)
	}
	if in := rule(); in.IsEnabled || in.Data[store.AuthorField] != "system" {
		t.Fatalf("after fay's refused enable: enabled %v, author %v", in.IsEnabled, in.Data[store.AuthorField])
	}
	gus := userAuthOf(t, db, "gus")
	testkit.MustLoad(t, db, "- {classname: _eventrule, keyname: sys, _action: enable}\n", store.LoadOptions{Auth: gus})
	in := rule()
	if id, _ := model.ScalarText(in.Data[store.AuthorIDField]); !in.IsEnabled || in.Data[store.AuthorField] != "user:gus" || id != fmt.Sprint(gus.UserID) {
		t.Fatalf("after gus's enable: enabled %v, author %v, author_id %v (gus's id %d)", in.IsEnabled, in.Data[store.AuthorField], id, gus.UserID)
	}
	runner := startRunner(t, db)
	startDeliverer(t, db, runner, tasks.DeliveryOptions{})
	mustLoad(t, db, "- {classname: host, keyname: a, port: 22}\n")
	ev := eventsWith(t, db, "sys", store.EventDelivered, 1)[0]
	if ev.Task == "" {
		t.Fatalf("the pipeline event of gus's rule queued no task: %+v", ev)
	}
}

// TestDeliveryRecheckOfAWatchedBuiltinClass: delivery re-checks what validation
// demanded of the rule's writer: watching a built-in class needs its write permission,
// so an author who keeps the read permission of _user but loses p_user_import gets the
// event dead, never sent.
func TestDeliveryRecheckOfAWatchedBuiltinClass(t *testing.T) {
	t.Parallel()
	db := newEventDB(t, 8)
	rc := newReceiver(t, always(http.StatusOK))
	mustLoad(t, db, `
- {classname: _user, keyname: gil, password: gil-pass-1}
- {classname: _role, keyname: watchers, permissions: [p_event_admin, p_user_import, p_data_access, p_data_read], users: [gil]}
`)
	testkit.MustLoad(t, db, "- {classname: _eventrule, keyname: users, schemas: [_user], webhook_url: \""+rc.URL+"\", secret: k}\n",
		store.LoadOptions{Auth: userAuthOf(t, db, "gil")})
	mustLoad(t, db, "- {classname: _role, keyname: watchers, permissions: [p_event_admin, p_data_access, p_data_read], users: [gil]}\n")
	if !model.CanRead(userAuthOf(t, db, "gil"), schemaOf(t, db, "_user")) {
		t.Fatal("gil may no longer read _user: the test needs the read permission kept")
	}
	mustLoad(t, db, "- {classname: _user, keyname: hal, password: hal-pass-1}\n")
	startDeliverer(t, db, nil, tasks.DeliveryOptions{})
	if ev := eventsWith(t, db, "users", store.EventDead, 1)[0]; ev.LastError != "the rule's author user:gil may no longer watch _user (needs p_user_import)" {
		t.Fatalf("last error %q", ev.LastError)
	}
	if got := len(rc.got()); got != 0 {
		t.Fatalf("receiver got %d requests, want none", got)
	}
}

// schemaOf reads a schema.
func schemaOf(t *testing.T, db *store.DB, name string) *model.Schema {
	t.Helper()
	s, err := db.Schema(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTaskOfDeletedUserIsNotItsNamesakes: a user's task that starts after the user was
// deleted and created again with the same login fails: the new user is another one,
// and the task does not run with its permissions. A task losing p_pipeline_run before
// it starts fails too, as every run needs it.
func TestTaskOfDeletedUserIsNotItsNamesakes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, change, want string }{
		{"made again", "- {classname: _user, keyname: ivy, _action: delete}\n" + ivy, "user ivy no longer exists"},
		{"p_pipeline_run lost", "- {classname: _role, keyname: ivyrole, permissions: [p_data_access, p_data_read, p_data_update], users: [ivy]}\n",
			"permission denied: running a pipeline needs p_pipeline_run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := newDB(t)
			addPipeline(t, db, "marker", markerPipeline, "")
			insertRows(t, db, "host", markerRows(3))
			mustLoad(t, db, ivy)
			r := newRunner(t, db, tasks.Options{})
			h := submit(t, r, tasks.Params{Pipeline: "marker", Schemas: []string{"host"}, Auth: userAuthOf(t, db, "ivy")})
			mustLoad(t, db, tc.change)
			task := runOne(t, r, h)
			if task.Status != tasks.StatusFailed || task.Error == nil || *task.Error != tc.want {
				t.Fatalf("task: %s %v, want failed with %q", task.Status, task.Error, tc.want)
			}
			if got := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'host' AND CAST(data AS TEXT) LIKE '%X%'"); got != 0 {
				t.Fatalf("instances changed: %d, want 0", got)
			}
		})
	}
}

// ivy is a user who may run pipelines over host.
const ivy = `
- {classname: _user, keyname: ivy, password: ivy-pass-1}
- {classname: _role, keyname: ivyrole, permissions: [p_pipeline_run, p_data_access, p_data_read, p_data_update], users: [ivy]}
`
