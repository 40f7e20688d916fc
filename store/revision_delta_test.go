package store_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
)

// The before of an update's row names each changed part once, with its old value; a key
// the update set is listed under absent, even when the new object holds null there;
// secrets are masked, and listed when they changed. The after is the whole new object,
// the bytes of a row of the whole form.
func TestRevisionDeltaForm(t *testing.T) {
	t.Parallel()
	s := &model.Schema{Keyname: "x"}
	s.AddField(&model.Field{Keyname: "a", Dataformat: "string"})
	s.AddField(&model.Field{Keyname: "pw", Dataformat: "secret"})
	old := &store.Instance{Keyname: "k", Displayname: "D", IsEnabled: true,
		Data: map[string]any{"a": "1", "gone": nil, "same": "s", "pw": "clear-old"}}
	next := &store.Instance{Keyname: "k", Displayname: "E", IsEnabled: true,
		Data: map[string]any{"a": "2", "new": []any{"x"}, "same": "s", "pw": "clear-new"}}
	before, after := store.RevisionDelta(s, old, next)
	if want := `{"absent":["new"],"data":{"a":"1","gone":null,"pw":"********"},"displayname":"D"}`; before != want {
		t.Errorf("before: got %s, want %s", before, want)
	}
	if want := `{"data":{"a":"2","new":["x"],"pw":"********","same":"s"},"displayname":"E","is_enabled":true,"keyname":"k"}`; after != want {
		t.Errorf("after: got %s, want %s", after, want)
	}
	// An unchanged secret is not listed; nothing changed is an empty before.
	next.Data, next.Displayname = old.Data, old.Displayname
	if b, a := store.RevisionDelta(s, old, next); b != "{}" || !strings.HasPrefix(a, `{"data":{"a":"1","gone":null,"pw":"********"`) {
		t.Errorf("no change: %s %s", b, a)
	}
}

// wholeDoc is the whole record of an instance as Revision.States gives it, as JSON
// (nil: no object).
func wholeDoc(t *testing.T, db *store.DB, cls, key string) string {
	t.Helper()
	in, err := db.Instance(context.Background(), cls, key)
	if store.IsNotFound(err) {
		return "null"
	}
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"keyname": in.Keyname, "displayname": in.Displayname, "is_enabled": in.IsEnabled, "data": in.Data})
	return string(b)
}

func docJSON(d *store.RevisionDoc) string {
	if d == nil {
		return "null"
	}
	m := map[string]any{"keyname": *d.Keyname, "displayname": *d.Displayname, "is_enabled": *d.IsEnabled, "data": d.Data}
	b, _ := json.Marshal(m)
	return string(b)
}

// The whole object before and after every revision of an object comes from its row
// alone, the same as the whole records held: across delta rows, rows of the whole form
// mixed in (written before delta rows existed), a write without revision rows (a
// NoRevisions load), a field dropped from the schema and added again (its values go
// without revisions), the retention clean-up, a delete and a create again, and a
// rename of the object.
func TestRevisionStatesSelfContained(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newTestDB(t)
	mustLoad(t, db, serverSchema, store.LoadOptions{})
	type step struct {
		id            int64
		before, after string // the whole records, as JSON
	}
	var steps []step
	key := "s1"
	state := "null"
	lastID := func() int64 {
		var id int64
		if err := db.Reader().QueryRowContext(ctx, "SELECT max(id) FROM revisions WHERE classname = 'server'").Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	change := func(doc string) {
		t.Helper()
		mustLoad(t, db, doc, store.LoadOptions{})
		now := wholeDoc(t, db, "server", key)
		steps = append(steps, step{lastID(), state, now})
		state = now
	}
	check := func(what string, from int) {
		t.Helper()
		for _, st := range steps[from:] {
			rev, err := db.RevisionByID(ctx, st.id)
			if err != nil {
				t.Fatal(err)
			}
			b, a, err := rev.States()
			if err != nil {
				t.Fatalf("%s: revision %d (%s): %v", what, st.id, rev.Action, err)
			}
			if got := docJSON(b) + " → " + docJSON(a); got != st.before+" → "+st.after {
				t.Errorf("%s: revision %d (%s, delta %v):\n got %s\nwant %s → %s", what, st.id, rev.Action, rev.Delta, got, st.before, st.after)
			}
		}
	}
	change(`{classname: server, keyname: s1, hostname: a, port: 22}`)
	change(`{classname: server, keyname: s1, hostname: b, port: 22}`)
	change(`{classname: server, keyname: s1, _action: disable}`)
	change(`{classname: server, keyname: s1, hostname: b, port: 23, tags: [x, y]}`)
	change(`{classname: server, keyname: s1, _action: enable}`)
	change(`{classname: server, keyname: s1, displayname: S one, hostname: c, port: 23, tags: [x, y]}`)
	change(`{classname: server, keyname: s1, displayname: S one, hostname: c, port: 23, tags: []}`)
	for _, st := range steps[1:] {
		rev, _ := db.RevisionByID(ctx, st.id)
		if !rev.Delta || strings.Contains(rev.Before, `"keyname"`) || !strings.Contains(rev.After, `"keyname":"s1"`) {
			t.Fatalf("update revision %d is not a delta row: %+v", st.id, rev)
		}
	}
	check("delta rows", 0)

	// A row of the whole form among them, as an older release wrote it.
	mid := steps[3]
	testkit.Exec(t, db, "UPDATE revisions SET delta = 0, before = ?, after = ? WHERE id = ?", mid.before, mid.after, mid.id)
	check("mixed rows", 0)

	// Writes without revision rows: a NoRevisions load, and the field tags dropped from
	// the schema (its values with it) and added again. The rows say what they said.
	mustLoad(t, db, `{classname: server, keyname: s1, displayname: S one, hostname: quiet, port: 99, tags: [q]}`, store.LoadOptions{System: true, NoRevisions: true})
	check("after a write without revisions", 0)
	mustLoad(t, db, `{classname: _schema, keyname: server, tags: {_action: delete}}`, store.LoadOptions{})
	check("after a field dropped", 0)
	mustLoad(t, db, `{classname: _schema, keyname: server, tags: {dataformat: string, cardinal_max: 0}}`, store.LoadOptions{})
	state = wholeDoc(t, db, "server", key)
	change(`{classname: server, keyname: s1, displayname: S one, hostname: d, port: 99, tags: [back]}`)
	check("after the field added again", 0)

	// The clean-up deletes the oldest rows: the kept ones are as they were.
	testkit.Exec(t, db, "UPDATE revisions SET created_at = '2000-01-01T00:00:00Z' WHERE id <= ?", steps[2].id)
	if n, _, err := db.PurgeRevisionsBatch(ctx, db.Now().AddDate(0, 0, -1), 0, 1000); err != nil || n == 0 {
		t.Fatalf("purge: %d %v", n, err)
	}
	if _, err := db.RevisionByID(ctx, steps[0].id); !store.IsNotFound(err) {
		t.Fatalf("the purged revision is still there: %v", err)
	}
	check("after the clean-up", 3)

	// Deleted and created again, then renamed: every row still tells its versions.
	change(`{classname: server, keyname: s1, _action: delete}`)
	change(`{classname: server, keyname: s1, hostname: z}`)
	change(`{classname: server, keyname: s1, hostname: zz, port: 80}`)
	if _, err := rename(t, db, "server", "s1", "s2"); err != nil {
		t.Fatal(err)
	}
	key = "s2"
	state = wholeDoc(t, db, "server", key)
	change(`{classname: server, keyname: s2, hostname: renamed, port: 80}`)
	mustLoad(t, db, `{classname: server, keyname: s1, hostname: other}`, store.LoadOptions{})
	check("deleted, created again and renamed", 3)
}

func mustSchema(t *testing.T, db *store.DB, cls string) *model.Schema {
	t.Helper()
	s, err := db.Schema(context.Background(), cls)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// deltaOracle is the before of a delta row as encoding/json writes it from maps: the
// documented form, built the plain way (other: the new object).
func deltaOracle(s *model.Schema, side, other *store.Instance) string {
	doc := map[string]any{}
	data := map[string]any{}
	var absent []string
	for k, v := range side.Data {
		if ov, ok := other.Data[k]; ok && model.MustJSON(map[string]any{"": ov}) == model.MustJSON(map[string]any{"": v}) {
			continue
		}
		if f := s.Field(k); f != nil && f.Dataformat == "secret" {
			v = "********"
		}
		data[k] = v
	}
	for k := range other.Data {
		if _, ok := side.Data[k]; !ok {
			absent = append(absent, k)
		}
	}
	slices.Sort(absent)
	if len(absent) > 0 {
		doc["absent"] = absent
	}
	if len(data) > 0 {
		doc["data"] = data
	}
	if side.Displayname != other.Displayname {
		doc["displayname"] = side.Displayname
	}
	if side.IsEnabled != other.IsEnabled {
		doc["is_enabled"] = side.IsEnabled
	}
	if side.Keyname != other.Keyname {
		doc["keyname"] = side.Keyname
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// wholeOracle is the whole record of in as encoding/json writes it from maps, secrets
// masked: a row of the whole form.
func wholeOracle(s *model.Schema, in *store.Instance) string {
	data := map[string]any{}
	for k, v := range in.Data {
		if f := s.Field(k); f != nil && f.Dataformat == "secret" {
			v = "********"
		}
		data[k] = v
	}
	b, err := json.Marshal(map[string]any{"keyname": in.Keyname, "displayname": in.Displayname, "is_enabled": in.IsEnabled, "data": data})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// The delta rows built into reused buffers are the bytes encoding/json writes for
// the documented form (the before) and for the whole object (the after), over random
// updates: values of every kind (text needing
// escapes, invalid UTF-8, numbers, lists, maps, null), keys set, removed and kept,
// secrets; a row built later leaves the earlier rows' strings as they were.
func TestRevisionDeltaMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	s := &model.Schema{Keyname: "x"}
	s.AddField(&model.Field{Keyname: "a", Dataformat: "string"})
	s.AddField(&model.Field{Keyname: "pw", Dataformat: "secret"})
	plain := &model.Schema{Keyname: "y"}
	plain.AddField(&model.Field{Keyname: "a", Dataformat: "string"})
	r := rand.New(rand.NewPCG(26, 1))
	values := []any{nil, "", "x", "y", "<a&b>", "é\u2028", "bad\xffutf8", "bad\xfeutf8", int64(-3), int64(7),
		1.5, 1e21, true, false, []any{}, []any{"x", int64(1)}, map[string]any{"k": "v"}}
	keys := []string{"a", "b", "pw", "zz", "Z", "k\xff", "k\xfe", "é", "_n"}
	data := func() map[string]any {
		m := map[string]any{}
		for _, k := range keys {
			if r.IntN(3) > 0 {
				m[k] = values[r.IntN(len(values))]
			}
		}
		return m
	}
	names := []string{"k", "k2", "<k>"}
	var w store.RevisionDeltas
	type row struct{ before, after, wantB, wantA string }
	var rows []row
	for range 2000 {
		old := &store.Instance{Keyname: names[r.IntN(2)], Displayname: names[r.IntN(3)], IsEnabled: r.IntN(2) == 0, Data: data()}
		next := &store.Instance{Keyname: names[r.IntN(2)], Displayname: names[r.IntN(3)], IsEnabled: r.IntN(2) == 0, Data: data()}
		if r.IntN(4) == 0 {
			next.Data = model.CloneMap(old.Data) // mostly unchanged
			next.Data[keys[r.IntN(len(keys))]] = values[r.IntN(len(values))]
		}
		// Half the rows of a schema without secrets, given the new data encoded (as a
		// write gives it).
		sch, enc := s, ""
		if r.IntN(2) == 0 {
			sch, enc = plain, model.MustJSON(next.Data)
		}
		b, a := w.Delta(sch, old, next, enc)
		rows = append(rows, row{b, a, deltaOracle(sch, old, next), wholeOracle(sch, next)})
		if pb, pa := store.RevisionDelta(sch, old, next); pb != b || pa != a {
			t.Fatalf("RevisionDelta and a reused RevisionDeltas differ: %s %s / %s %s", pb, pa, b, a)
		}
	}
	for i, x := range rows {
		if x.before != x.wantB || x.after != x.wantA {
			t.Fatalf("row %d:\n got %s → %s\nwant %s → %s", i, x.before, x.after, x.wantB, x.wantA)
		}
	}
}
