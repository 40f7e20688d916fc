package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
)

// The delta of an update names each changed part once on each side; a key set or
// removed is listed under absent on the side that does not hold it, even when the
// other side holds null; secrets are masked, and listed when they changed.
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
	if want := `{"absent":["gone"],"data":{"a":"2","new":["x"],"pw":"********"},"displayname":"E"}`; after != want {
		t.Errorf("after: got %s, want %s", after, want)
	}
	// An unchanged secret is not listed; nothing changed is an empty record.
	next.Data, next.Displayname = old.Data, old.Displayname
	if b, a := store.RevisionDelta(s, old, next); b != "{}" || a != "{}" {
		t.Errorf("no change: %s %s", b, a)
	}
}

// wholeDoc is the whole record of an instance as RevisionStates gives it, as JSON
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

// RevisionStates rebuilds the whole object at every revision of an object, the same
// as the whole records held: across delta rows, rows of the whole form mixed in
// (written before delta rows existed), the retention clean-up, and a delete and a
// create again; an object that left the keyname (renamed) is told, not guessed.
func TestRevisionStatesRebuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newTestDB(t)
	mustLoad(t, db, serverSchema, store.LoadOptions{})
	type step struct {
		id            int64
		before, after string // the whole records, as JSON
	}
	var steps []step
	state := "null"
	change := func(doc string) {
		t.Helper()
		mustLoad(t, db, doc, store.LoadOptions{})
		var id int64
		if err := db.Reader().QueryRowContext(ctx, "SELECT max(id) FROM revisions WHERE classname = 'server'").Scan(&id); err != nil {
			t.Fatal(err)
		}
		now := wholeDoc(t, db, "server", "s1")
		steps = append(steps, step{id, state, now})
		state = now
	}
	check := func(what string, from int) {
		t.Helper()
		for _, st := range steps[from:] {
			rev, err := db.RevisionByID(ctx, st.id)
			if err != nil {
				t.Fatal(err)
			}
			b, a, reason, err := db.RevisionStates(ctx, mustSchema(t, db, "server"), rev)
			if err != nil || reason != "" {
				t.Fatalf("%s: revision %d (%s): %q %v", what, st.id, rev.Action, reason, err)
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
		if rev, _ := db.RevisionByID(ctx, st.id); !rev.Delta || strings.Contains(rev.After, `"keyname"`) {
			t.Fatalf("update revision %d is not a delta row: %+v", st.id, rev)
		}
	}
	check("delta rows", 0)

	// A row of the whole form among them, as an older release wrote it.
	mid := steps[3]
	testkit.Exec(t, db, "UPDATE revisions SET delta = 0, before = ?, after = ? WHERE id = ?", mid.before, mid.after, mid.id)
	check("mixed rows", 0)

	// The clean-up keeps an object's newer revisions: the kept ones still rebuild.
	testkit.Exec(t, db, "UPDATE revisions SET created_at = '2000-01-01T00:00:00Z' WHERE id <= ?", steps[2].id)
	if n, _, err := db.PurgeRevisionsBatch(ctx, db.Now().AddDate(0, 0, -1), 0, 1000); err != nil || n == 0 {
		t.Fatalf("purge: %d %v", n, err)
	}
	if _, err := db.RevisionByID(ctx, steps[0].id); !store.IsNotFound(err) {
		t.Fatalf("the purged revision is still there: %v", err)
	}
	check("after the clean-up", 3)

	// Deleted and created again: the delete's whole record is where the older
	// revisions rebuild from.
	change(`{classname: server, keyname: s1, _action: delete}`)
	change(`{classname: server, keyname: s1, hostname: z}`)
	change(`{classname: server, keyname: s1, hostname: zz, port: 80}`)
	check("deleted and created again", 3)

	// Renamed: the older revisions' object left the keyname, which is said; the
	// rename's own row (whole) and the later changes under the new keyname rebuild.
	if _, err := rename(t, db, "server", "s1", "s2"); err != nil {
		t.Fatal(err)
	}
	rev, err := db.RevisionByID(ctx, steps[len(steps)-1].id)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, reason, err := db.RevisionStates(ctx, mustSchema(t, db, "server"), rev); err != nil || !strings.Contains(reason, "no longer exists under this keyname") {
		t.Fatalf("after a rename: %q %v", reason, err)
	}
	mustLoad(t, db, `{classname: server, keyname: s2, hostname: renamed, port: 80}`, store.LoadOptions{})
	var renameID, updID int64
	if err := db.Reader().QueryRowContext(ctx, "SELECT min(id), max(id) FROM revisions WHERE classname = 'server' AND keyname = 's2'").Scan(&renameID, &updID); err != nil {
		t.Fatal(err)
	}
	upd, _ := db.RevisionByID(ctx, updID)
	b, a, reason, err := db.RevisionStates(ctx, mustSchema(t, db, "server"), upd)
	if err != nil || reason != "" || *b.Keyname != "s2" || b.Data["hostname"] != "zz" || a.Data["hostname"] != "renamed" || len(a.Data) != 2 {
		t.Fatalf("after the rename: %+v %+v %q %v", b, a, reason, err)
	}
	// Another object created under the old keyname: the old object's revisions are
	// not rebuilt from it.
	mustLoad(t, db, `{classname: server, keyname: s1, hostname: other}`, store.LoadOptions{})
	if _, _, reason, err := db.RevisionStates(ctx, mustSchema(t, db, "server"), rev); err != nil || !strings.Contains(reason, "another object") {
		t.Fatalf("another object under the keyname: %q %v", reason, err)
	}
}

func mustSchema(t *testing.T, db *store.DB, cls string) *model.Schema {
	t.Helper()
	s, err := db.Schema(context.Background(), cls)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// deltaOracle is one side of a delta row as encoding/json writes it from maps: the
// documented form, built the plain way.
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

// The delta rows built into reused buffers are the bytes encoding/json writes for
// the documented form, over random updates: values of every kind (text needing
// escapes, invalid UTF-8, numbers, lists, maps, null), keys set, removed and kept,
// secrets; a row built later leaves the earlier rows' strings as they were.
func TestRevisionDeltaMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	s := &model.Schema{Keyname: "x"}
	s.AddField(&model.Field{Keyname: "a", Dataformat: "string"})
	s.AddField(&model.Field{Keyname: "pw", Dataformat: "secret"})
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
		b, a := w.Delta(s, old, next)
		rows = append(rows, row{b, a, deltaOracle(s, old, next), deltaOracle(s, next, old)})
		if pb, pa := store.RevisionDelta(s, old, next); pb != b || pa != a {
			t.Fatalf("RevisionDelta and a reused RevisionDeltas differ: %s %s / %s %s", pb, pa, b, a)
		}
	}
	for i, x := range rows {
		if x.before != x.wantB || x.after != x.wantA {
			t.Fatalf("row %d:\n got %s → %s\nwant %s → %s", i, x.before, x.after, x.wantB, x.wantA)
		}
	}
}

// The rebuild of the object at a delta row undoes at most the bound's newer revisions
// of the object: with exactly that many it rebuilds; with one more it says why it
// cannot, rather than reading an unbounded history. A newer row of the whole form ends
// the walk before the bound.
func TestRevisionStatesRebuildBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newTestDB(t)
	store.SetMaxRebuildRevisions(db, 3)
	mustLoad(t, db, serverSchema, store.LoadOptions{})
	var ids []int64
	for port := 1; port <= 6; port++ {
		mustLoad(t, db, fmt.Sprintf(`{classname: server, keyname: s1, hostname: a, port: %d}`, port), store.LoadOptions{})
		var id int64
		if err := db.Reader().QueryRowContext(ctx, "SELECT max(id) FROM revisions WHERE classname = 'server'").Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	sch := mustSchema(t, db, "server")
	states := func(i int) (*store.RevisionDoc, *store.RevisionDoc, string) {
		t.Helper()
		rev, err := db.RevisionByID(ctx, ids[i])
		if err != nil {
			t.Fatal(err)
		}
		if !rev.Delta {
			t.Fatalf("revision %d is not a delta row", ids[i])
		}
		b, a, reason, err := db.RevisionStates(ctx, sch, rev)
		if err != nil {
			t.Fatal(err)
		}
		return b, a, reason
	}
	// ids[2] has 3 newer revisions (the bound): rebuilt whole.
	b, a, reason := states(2)
	if reason != "" || b.Data["port"] != json.Number("2") || a.Data["port"] != json.Number("3") || a.Data["hostname"] != "a" {
		t.Fatalf("at the bound: %+v %+v %q", b, a, reason)
	}
	// ids[1] has 4: refused, with the reason.
	if b, a, reason := states(1); b != nil || a != nil || !strings.Contains(reason, "changed more than 3 times since this revision") {
		t.Fatalf("past the bound: %+v %+v %q", b, a, reason)
	}
	// Deleted: the delete's whole record is 3 rows after ids[3] and 5 after ids[1],
	// which would still undo more than the bound; ids[3] rebuilds from the delete.
	mustLoad(t, db, `{classname: server, keyname: s1, _action: delete}`, store.LoadOptions{})
	if _, _, reason := states(1); !strings.Contains(reason, "more than 3") {
		t.Fatalf("past the bound before a delete: %q", reason)
	}
	if b, a, reason := states(3); reason != "" || b.Data["port"] != json.Number("3") || a.Data["port"] != json.Number("4") {
		t.Fatalf("before a delete: %+v %+v %q", b, a, reason)
	}
	// ids[2]: the bound's delta rows, then the delete, read in the same bounded query.
	if b, a, reason := states(2); reason != "" || b.Data["port"] != json.Number("2") || a.Data["port"] != json.Number("3") {
		t.Fatalf("the bound's rows before a delete: %+v %+v %q", b, a, reason)
	}
}
