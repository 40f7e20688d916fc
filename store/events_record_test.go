package store_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
)

// eventClock is a test database's clock, moved by the test.
type eventClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *eventClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *eventClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// eventsDoc is the schemas the event tests write: note is watched, other is not.
const eventsDoc = `
- classname: _schema
  keyname: note
  text: {dataformat: string}
  token: {dataformat: secret}
  tags: {dataformat: string, cardinal_max: 0}
- {classname: _schema, keyname: other, text: {dataformat: string}}
- {classname: _pipeline, keyname: p, content: "[]"}
- {classname: _pipeline, keyname: p1, content: "[]"}
- {classname: _pipeline, keyname: p2, content: "[]"}
`

// openEventsDB is a migrated database (its address, for a second handle) with the
// test schemas, on the test's clock.
func openEventsDB(t *testing.T) (*store.DB, *eventClock, string) {
	t.Helper()
	clk := &eventClock{t: testkit.Now}
	addr := testkit.MigratedFile(t)
	db := testkit.Open(t, addr, testkit.Options{Clock: clk.now})
	mustLoad(t, db, eventsDoc, store.LoadOptions{System: true})
	return db, clk, addr
}

// eventRule loads an enabled event rule.
func eventRule(t *testing.T, db *store.DB, doc string) {
	t.Helper()
	mustLoad(t, db, doc, store.LoadOptions{System: true})
}

// events lists every event with its body, oldest first.
func events(t *testing.T, db *store.DB) []*store.Event {
	t.Helper()
	es, err := db.ListEvents(context.Background(), "", "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := 0, len(es)-1; i < j; i, j = i+1, j-1 {
		es[i], es[j] = es[j], es[i]
	}
	for i, e := range es {
		if es[i], err = db.Event(context.Background(), e.ID); err != nil {
			t.Fatal(err)
		}
	}
	return es
}

// body decodes an event's delivery body.
func body(t *testing.T, e *store.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Body, &m); err != nil {
		t.Fatalf("body %s: %v", e.Body, err)
	}
	return m
}

// applyNote applies one write of note key as the system (next nil: w.Action alone).
func applyNote(t *testing.T, db *store.DB, action model.Action, key string, next *store.Instance) {
	t.Helper()
	ctx := context.Background()
	s, err := db.Schema(ctx, "note")
	if err != nil {
		t.Fatal(err)
	}
	old, err := db.Instance(ctx, "note", key)
	if err != nil && !store.IsNotFound(err) {
		t.Fatal(err)
	}
	if _, err := db.Apply(ctx, store.Write{Schema: s, Old: old, New: next, Action: action}, store.ApplyOptions{}); err != nil {
		t.Fatalf("%s %s: %v", action, key, err)
	}
}

// A watched write records one event in its own transaction, with the delivery body:
// every changed field with old and new values (displayname and is_enabled as fields,
// a rename as keyname), secrets never, the revision row's id and the actor.
func TestEventRecordedWithItsWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _, _ := openEventsDB(t)
	eventRule(t, db, `- {classname: _eventrule, keyname: hook, schemas: [note], webhook_url: "http://127.0.0.1:9/in", secret: test-signing-secret}`)
	told := make(chan int, 10)
	store.SetOnEvents(db, func(n int) { told <- n })

	mustLoad(t, db, `- {classname: note, keyname: a, displayname: A, text: hello, token: s3cret, tags: [x, y]}`,
		store.LoadOptions{Author: "user:alice"})
	es := events(t, db)
	if len(es) != 1 {
		t.Fatalf("%d events after one create, want 1", len(es))
	}
	e := es[0]
	if e.Rule != "hook" || e.Kind != store.EventWebhook || e.Classname != "note" || e.Keyname != "a" ||
		e.Action != "create" || e.Status != store.EventPending || e.Attempts != 0 || !reflect.DeepEqual(e.Chain, []string{"hook"}) {
		t.Fatalf("event %+v", e)
	}
	if n := <-told; n != 1 {
		t.Fatalf("OnEvents told %d, want 1", n)
	}
	revID := queryInt(t, db, "SELECT max(id) FROM revisions WHERE classname = 'note'")
	want := map[string]any{
		"id": e.ID, "time": testkit.Now.Format(time.RFC3339), "schema": "note", "keyname": "a", "action": "create",
		"changes": map[string]any{
			"displayname": map[string]any{"old": nil, "new": "A"},
			"is_enabled":  map[string]any{"old": nil, "new": true},
			"text":        map[string]any{"old": nil, "new": "hello"},
			"tags":        map[string]any{"old": nil, "new": []any{"x", "y"}},
		},
		"revision": float64(revID), "actor": "user:alice",
	}
	if got := body(t, e); !reflect.DeepEqual(got, want) {
		t.Fatalf("body\n got %v\nwant %v", got, want)
	}

	// An update names what changed only (the secret's change is not shown at all).
	mustLoad(t, db, `- {classname: note, keyname: a, displayname: A, text: bye, token: other, tags: [x, y]}`, store.LoadOptions{})
	s, _ := db.Schema(ctx, "note")
	in := testkit.Instance(t, db, "note", "a")
	next := *in
	next.Keyname = "b"
	applyNote(t, db, model.ActionUpdate, "a", &next)                                  // a rename
	applyNote(t, db, model.ActionDisable, "b", nil)                                   // disable
	applyNote(t, db, model.ActionDelete, "b", nil)                                    // delete
	mustLoad(t, db, `- {classname: other, keyname: o, text: t}`, store.LoadOptions{}) // unwatched
	es = events(t, db)
	got := []string{}
	for _, e := range es {
		got = append(got, e.Action+" "+e.Keyname+" "+string(mustJSON(t, body(t, e)["changes"])))
	}
	wantChanges := []string{
		`create a {"displayname":{"new":"A","old":null},"is_enabled":{"new":true,"old":null},"tags":{"new":["x","y"],"old":null},"text":{"new":"hello","old":null}}`,
		`update a {"text":{"new":"bye","old":"hello"}}`,
		`rename b {"keyname":{"new":"b","old":"a"}}`,
		`disable b {"is_enabled":{"new":false,"old":true}}`,
		`delete b {"displayname":{"new":null,"old":"A"},"is_enabled":{"new":null,"old":false},"tags":{"new":null,"old":["x","y"]},"text":{"new":null,"old":"bye"}}`,
	}
	if !reflect.DeepEqual(got, wantChanges) {
		t.Fatalf("events\n got %q\nwant %q", got, wantChanges)
	}
	for i := 1; i < len(es); i++ {
		if es[i].Seq <= es[i-1].Seq {
			t.Fatalf("seq not in commit order: %d after %d", es[i].Seq, es[i-1].Seq)
		}
	}
	if s.Field("token") == nil {
		t.Fatal("the test schema lost its secret field")
	}

	// A rolled-back write records nothing; a dry run neither.
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Apply(ctx, store.Write{Schema: s, New: &store.Instance{Keyname: "c", IsEnabled: true},
		Action: model.ActionCreate}, store.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM events"); n != 5 {
		t.Fatalf("%d events visible during the transaction, want 5", n)
	}
	tx.Rollback()
	if _, err := db.Apply(ctx, store.Write{Schema: s, New: &store.Instance{Keyname: "d", IsEnabled: true},
		Action: model.ActionCreate}, store.ApplyOptions{DryRun: true}); err != nil {
		t.Fatal(err)
	}
	testkit.Load(t, db, `- {classname: note, keyname: e}`, store.LoadOptions{DryRun: true})
	if n := len(events(t, db)); n != 5 {
		t.Fatalf("%d events after a rollback and dry runs, want 5", n)
	}
	select {
	case n := <-told:
		for len(told) > 0 {
			n += <-told
		}
		if n != 4 {
			t.Fatalf("OnEvents told %d more, want 4", n)
		}
	default:
		t.Fatal("OnEvents not told of the later writes")
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A write nobody watches costs no statement: it writes what it wrote before any rule
// existed, and the transaction learns its rules once (one read), not per write. A
// watched write adds exactly the event's insert.
func TestUnwatchedWriteRunsNoEventStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _, _ := openEventsDB(t)
	perWrite := func(cls string, n int) (writes []int, reads int) {
		t.Helper()
		s, err := db.Schema(ctx, cls)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		for i := range n {
			before, _ := store.TxEventStats(tx)
			in := &store.Instance{Keyname: cls + string(rune('a'+i)), IsEnabled: true, Data: map[string]any{"text": "x"}}
			if _, err := tx.Apply(ctx, store.Write{Schema: s, New: in, Action: model.ActionCreate}, store.ApplyOptions{}); err != nil {
				t.Fatal(err)
			}
			after, _ := store.TxEventStats(tx)
			writes = append(writes, after-before)
		}
		_, reads = store.TxEventStats(tx)
		return writes, reads
	}
	bare, _ := perWrite("other", 5)
	eventRule(t, db, `- {classname: _eventrule, keyname: hook, schemas: [note], webhook_url: "http://127.0.0.1:9/in", secret: test-signing-secret}`)
	// A committed write fills the rule cache (a rolled-back one leaves it alone).
	perWrite("other", 1)
	mustLoad(t, db, `- {classname: other, keyname: warm}`, store.LoadOptions{})
	unwatched, reads := perWrite("other", 5)
	if !reflect.DeepEqual(unwatched, bare) {
		t.Fatalf("writes per unwatched write %v, without any rule %v", unwatched, bare)
	}
	if reads != 1 {
		t.Fatalf("%d statements to learn the rules in a transaction of 5 writes, want 1 (the generation)", reads)
	}
	watched, _ := perWrite("note", 5)
	for i := range watched {
		if watched[i] != bare[i]+1 {
			t.Fatalf("writes per watched write %v, want one more than %v", watched, bare)
		}
	}
	if n := len(events(t, db)); n != 0 {
		t.Fatalf("%d events after rolled-back writes", n)
	}
}

// A rule fires on its actions only; a rule with a webhook and a pipeline records one
// event of each kind; a disabled rule records nothing; a rule another handle (process)
// writes is seen by the next write here.
func TestEventRuleActionsKindsAndCache(t *testing.T) {
	t.Parallel()
	db, _, addr := openEventsDB(t)
	other := testkit.Open(t, addr, testkit.Options{})
	eventRule(t, db, `
- {classname: _eventrule, keyname: upd, schemas: [note], actions: [update, delete], webhook_url: "http://127.0.0.1:9/in", secret: test-signing-secret, pipeline: p}
- {classname: _eventrule, keyname: off, schemas: [note], webhook_url: "http://127.0.0.1:9/in", secret: test-signing-secret, is_enabled: false}
`)
	mustLoad(t, db, `- {classname: note, keyname: a, text: one}`, store.LoadOptions{})
	if n := len(events(t, db)); n != 0 {
		t.Fatalf("%d events on create, want none (rules watch update and delete; one disabled)", n)
	}
	mustLoad(t, db, `- {classname: note, keyname: a, text: two}`, store.LoadOptions{})
	es := events(t, db)
	if len(es) != 2 || es[0].Kind != store.EventWebhook || es[1].Kind != store.EventPipeline || es[0].Rule != "upd" ||
		es[0].Seq >= es[1].Seq || string(es[0].Body) == string(es[1].Body) {
		t.Fatalf("events %+v, want a webhook and a pipeline event of upd", es)
	}
	// Another process enables the disabled rule: the next write here sees it.
	eventRule(t, other, `- {classname: _eventrule, keyname: off, schemas: [note], webhook_url: "http://127.0.0.1:9/in", secret: test-signing-secret, is_enabled: true}`)
	mustLoad(t, db, `- {classname: note, keyname: b, text: one}`, store.LoadOptions{})
	es = events(t, db)
	if len(es) != 3 || es[2].Rule != "off" || es[2].Action != "create" {
		t.Fatalf("after another handle enabled off: %d events, last %+v", len(es), es[len(es)-1])
	}
	// And deleting it there stops it here.
	eventRule(t, other, `- {classname: _eventrule, keyname: off, _action: delete}`)
	mustLoad(t, db, `- {classname: note, keyname: c, text: one}`, store.LoadOptions{})
	if n := len(events(t, db)); n != 3 {
		t.Fatalf("%d events after the rule's deletion elsewhere, want 3", n)
	}
	// A rule written in a transaction fires for that transaction's later writes, and
	// for nothing once the transaction rolled back.
	ctx := context.Background()
	rs, _ := db.Schema(ctx, store.EventRuleClass)
	ns, _ := db.Schema(ctx, "note")
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []store.Write{
		{Schema: rs, Action: model.ActionCreate, New: &store.Instance{Keyname: "temp", IsEnabled: true,
			Data: map[string]any{"schemas": []any{"note"}, "pipeline": "p"}}},
		{Schema: ns, Action: model.ActionCreate, New: &store.Instance{Keyname: "t1", IsEnabled: true}},
	} {
		if _, err := tx.Apply(ctx, w, store.ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := queryIntTx(t, tx, "SELECT count(*) FROM events WHERE rule = 'temp'"); n != 1 {
		t.Fatalf("%d events of a rule written earlier in the transaction, want 1", n)
	}
	tx.Rollback()
	mustLoad(t, db, `- {classname: note, keyname: t2}`, store.LoadOptions{})
	if n := len(events(t, db)); n != 3 {
		t.Fatalf("%d events after a rolled-back rule, want 3", n)
	}
}

// queryIntTx reads one integer inside tx.
func queryIntTx(t *testing.T, tx *store.Tx, q string) int {
	t.Helper()
	var n int
	if err := store.QueryRowInTx(context.Background(), tx, q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Start-up and migration writes (revisions off) record nothing.
func TestMigrationWritesRecordNoEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _, _ := openEventsDB(t)
	eventRule(t, db, `- {classname: _eventrule, keyname: hook, schemas: [note], webhook_url: "http://127.0.0.1:9/in", secret: test-signing-secret}`)
	s, _ := db.Schema(ctx, "note")
	err := testkit.Migrator(t, db).Migrate(ctx, func(m *store.Migration) error {
		_, err := m.Apply(ctx, store.Write{Schema: s, New: &store.Instance{Keyname: "m", IsEnabled: true}, Action: model.ActionCreate})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(events(t, db)); n != 0 {
		t.Fatalf("%d events after a migration write", n)
	}
}

// Loops: a rule in the transaction's chain does not fire; a chain of MaxEventDepth
// rules records nothing at all; an event's chain is the transaction's plus its rule.
func TestEventChainAndDepth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	first, _, addr := openEventsDB(t)
	eventRule(t, first, `
- {classname: _eventrule, keyname: r1, schemas: [note], pipeline: p1}
- {classname: _eventrule, keyname: r2, schemas: [note], pipeline: p2}
`)
	var rec testkit.Recorder
	db := testkit.Open(t, addr, testkit.Options{Logger: rec.Logger(t)})
	s, _ := db.Schema(ctx, "note")
	write := func(key string, chain ...string) {
		t.Helper()
		err := db.WithTxAs(ctx, store.Revisions{Author: "task:t1", Chain: chain}, func(tx *store.Tx) error {
			_, err := tx.Apply(ctx, store.Write{Schema: s, New: &store.Instance{Keyname: key, IsEnabled: true},
				Action: model.ActionCreate}, store.ApplyOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	write("a", "r1")
	es := events(t, db)
	if len(es) != 1 || es[0].Rule != "r2" || !reflect.DeepEqual(es[0].Chain, []string{"r1", "r2"}) ||
		body(t, es[0])["actor"] != "task:t1" {
		t.Fatalf("events %+v, want r2's alone with chain r1, r2", es)
	}
	write("b", "x", "y")
	if es = events(t, db); len(es) != 3 || !reflect.DeepEqual(es[2].Chain, []string{"x", "y", "r2"}) {
		t.Fatalf("a chain of 2 other rules: %d events", len(es))
	}
	if logged := rec.Find(slog.LevelWarn, "event rule chain too deep"); len(logged) != 0 {
		t.Fatalf("logged %v before any chain was too deep", logged)
	}
	err := db.WithTxAs(ctx, store.Revisions{Author: "task:t2", Chain: []string{"x", "y", "z"}}, func(tx *store.Tx) error {
		for _, key := range []string{"c", "d"} { // MaxEventDepth rules led here
			if _, err := tx.Apply(ctx, store.Write{Schema: s, New: &store.Instance{Keyname: key, IsEnabled: true},
				Action: model.ActionCreate}, store.ApplyOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(events(t, db)); n != 3 {
		t.Fatalf("%d events after a chain of %d rules, want none more", n, store.MaxEventDepth)
	}
	logged := rec.Find(slog.LevelWarn, "event rule chain too deep")
	if len(logged) != 1 || logged[0].Attrs["suppressed"] != "4" {
		t.Fatalf("logged %v, want one warning for the transaction's 4 events left out", logged)
	}
}

// A condition reads the new state (the old for a delete); [changed, FIELD] compares
// the old and new states.
func TestEventConditions(t *testing.T) {
	t.Parallel()
	db, _, _ := openEventsDB(t)
	eventRule(t, db, `
- {classname: _eventrule, keyname: go, schemas: [note], webhook_url: "http://127.0.0.1:9/in", secret: test-signing-secret, condition: [field_match, text, go]}
- {classname: _eventrule, keyname: moved, schemas: [note], actions: [update], webhook_url: "http://127.0.0.1:9/in", secret: test-signing-secret, condition: [changed, text]}
- {classname: _eventrule, keyname: named, schemas: [note], actions: [create, update], pipeline: p, condition: [field_match, keyname, '^b$']}
- {classname: _eventrule, keyname: shown, schemas: [note], actions: [update], pipeline: p, condition: [changed, displayname]}
`)
	for _, doc := range []string{
		`{classname: note, keyname: a, text: stop}`,               // create: none (moved and shown watch updates)
		`{classname: note, keyname: a, text: go}`,                 // go and moved
		`{classname: note, keyname: a, text: go, displayname: A}`, // go and shown: text did not change
		`{classname: note, keyname: a, text: stop}`,               // moved only (the displayname stays)
		`{classname: note, keyname: b, text: go}`,                 // go, and named (the keyname)
		`{classname: note, keyname: b, _action: delete}`,          // go: the old state holds
		`{classname: note, keyname: a, _action: delete}`,          // neither: a's old text is stop
	} {
		mustLoad(t, db, "- "+doc, store.LoadOptions{})
	}
	var got []string
	for _, e := range events(t, db) {
		got = append(got, e.Rule+" "+e.Action+" "+e.Keyname)
	}
	want := []string{"go update a", "moved update a", "go update a", "shown update a", "moved update a",
		"go create b", "named create b", "go delete b"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events\n got %q\nwant %q", got, want)
	}
}

// A cascading rename records the rename of the instance and the updates of the
// instances whose references it rewrote, each for the rules watching their schema.
func TestEventsOfACascadingRename(t *testing.T) {
	t.Parallel()
	db, _, _ := openEventsDB(t)
	mustLoad(t, db, `
- {classname: _schema, keyname: link, target: {dataformat: schema, dataformat_ext: note}}
- {classname: note, keyname: a}
- {classname: link, keyname: l1, target: a}
- {classname: _eventrule, keyname: links, schemas: [link], webhook_url: "http://127.0.0.1:9/in", secret: test-signing-secret}
- {classname: _eventrule, keyname: notes, schemas: [note], actions: [rename], webhook_url: "http://127.0.0.1:9/in", secret: test-signing-secret}
`, store.LoadOptions{System: true})
	in := testkit.Instance(t, db, "note", "a")
	next := *in
	next.Keyname = "b"
	applyNote(t, db, model.ActionUpdate, "a", &next)
	var got []string
	for _, e := range events(t, db) {
		got = append(got, e.Rule+" "+e.Action+" "+e.Keyname+" "+string(mustJSON(t, body(t, e)["changes"])))
	}
	want := []string{
		`notes rename b {"keyname":{"new":"b","old":"a"}}`,
		`links update l1 {"target":{"new":"b","old":"a"}}`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events\n got %q\nwant %q", got, want)
	}
}
