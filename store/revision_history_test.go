package store_test

// The object at a revision, as the console shows and restores it, is the object as it
// was, whatever was written since.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
)

// rvWhole is the whole record of an instance as a revision records it (secrets
// masked), as JSON; "null" for none.
func rvWhole(t *testing.T, db *store.DB, cls, key string) string {
	t.Helper()
	in, err := db.Instance(context.Background(), cls, key)
	if store.IsNotFound(err) {
		return "null"
	}
	if err != nil {
		t.Fatal(err)
	}
	s := mustSchema(t, db, cls)
	data := map[string]any{}
	for k, v := range in.Data {
		if f := s.Field(k); f != nil && f.Dataformat == "secret" {
			v = "********"
		}
		data[k] = v
	}
	b, _ := json.Marshal(map[string]any{"keyname": in.Keyname, "displayname": in.Displayname, "is_enabled": in.IsEnabled, "data": data})
	return string(b)
}

func rvDoc(d *store.RevisionDoc) string {
	if d == nil {
		return "null"
	}
	b, _ := json.Marshal(map[string]any{"keyname": *d.Keyname, "displayname": *d.Displayname, "is_enabled": *d.IsEnabled, "data": d.Data})
	return string(b)
}

func rvLastID(t *testing.T, db *store.DB, cls string) int64 {
	t.Helper()
	var id int64
	if err := db.Reader().QueryRowContext(context.Background(), "SELECT COALESCE(max(id), 0) FROM revisions WHERE classname = ?", cls).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// rvStates is the whole object before and after revision id, as JSON.
func rvStates(t *testing.T, db *store.DB, id int64) (string, string) {
	t.Helper()
	rev, err := db.RevisionByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	b, a, err := rev.States()
	if err != nil {
		t.Fatalf("revision %d: %v", id, err)
	}
	return rvDoc(b), rvDoc(a)
}

const rvSchema = `
- {classname: _schema, keyname: rvnote, a: {dataformat: string}, b: {dataformat: string}}
`

// A field removed from the schema has its values removed from every instance without
// an instance revision. The versions an older revision tells keep what the object
// held: after the field is added again, "Restore the version before this change" puts
// the value back, and the diff page shows the version with it.
func TestRevisionFieldDropKeepsOlderVersions(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, rvSchema, store.LoadOptions{})
	mustLoad(t, db, `{classname: rvnote, keyname: x, a: "1", b: keep}`, store.LoadOptions{})
	before := rvWhole(t, db, "rvnote", "x")
	mustLoad(t, db, `{classname: rvnote, keyname: x, a: "2", b: keep}`, store.LoadOptions{})
	after := rvWhole(t, db, "rvnote", "x")
	id := rvLastID(t, db, "rvnote")
	// The schema loses field b (its values go), and gets it back.
	mustLoad(t, db, `{classname: _schema, keyname: rvnote, b: {_action: delete}}`, store.LoadOptions{})
	mustLoad(t, db, `{classname: _schema, keyname: rvnote, b: {dataformat: string}}`, store.LoadOptions{})
	b, a := rvStates(t, db, id)
	if b != before || a != after {
		t.Errorf("revision %d tells wrong versions:\n got %s → %s\nwant %s → %s", id, b, a, before, after)
	}
}

// A write without revision rows (a start-up reload of built-ins, a NoRevisions
// load) between two revisions: the older revision's versions do not show the later
// value.
func TestRevisionWriteWithoutRevisionLeavesOlderVersions(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, rvSchema, store.LoadOptions{})
	mustLoad(t, db, `{classname: rvnote, keyname: x, a: "1", b: "1"}`, store.LoadOptions{})
	before := rvWhole(t, db, "rvnote", "x")
	mustLoad(t, db, `{classname: rvnote, keyname: x, a: "2", b: "1"}`, store.LoadOptions{})
	after := rvWhole(t, db, "rvnote", "x")
	id := rvLastID(t, db, "rvnote")
	mustLoad(t, db, `{classname: rvnote, keyname: x, a: "2", b: "9"}`, store.LoadOptions{System: true, NoRevisions: true})
	mustLoad(t, db, `{classname: rvnote, keyname: x, a: "3", b: "9"}`, store.LoadOptions{})
	b, a := rvStates(t, db, id)
	if b != before || a != after {
		t.Errorf("revision %d tells wrong versions:\n got %s → %s\nwant %s → %s", id, b, a, before, after)
	}
}

const rvRandSchema = `
- {classname: _schema, keyname: rvtarget, city: {dataformat: string}}
- classname: _schema
  keyname: rvobj
  s: {dataformat: string}
  n: {dataformat: int}
  f: {dataformat: float}
  l: {dataformat: string, cardinal_max: 0}
  ok: {dataformat: boolean}
  pw: {dataformat: secret}
  ref: {dataformat: schema, dataformat_ext: rvtarget}
  self: {dataformat: schema, dataformat_ext: rvobj}
`

// Random sequences of the writes an operator makes (data, display name, enable,
// disable, field removal, big ints and floats, lists, secrets, references renamed,
// delete and create again, rename of the object itself): every revision of the
// object tells the whole records it had.
func TestRevisionRandomHistoriesExact(t *testing.T) {
	t.Parallel()
	for seed := int64(1); seed <= 10; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewSource(seed))
			db := newTestDB(t)
			mustLoad(t, db, rvRandSchema, store.LoadOptions{})
			targets := []string{"t1", "t2"}
			for _, k := range targets {
				mustLoad(t, db, fmt.Sprintf(`{classname: rvtarget, keyname: %s, city: c}`, k), store.LoadOptions{})
			}
			key := "o1"
			type step struct {
				id            int64
				key           string
				before, after string
			}
			var steps []step
			state := "null"
			write := func(doc string) {
				t.Helper()
				prev := rvLastID(t, db, "rvobj")
				res := testkit.Load(t, db, doc, store.LoadOptions{})
				if res.Errors != 0 {
					t.Logf("refused %s: %v", doc, res.Messages)
					return
				}
				id := rvLastID(t, db, "rvobj")
				now := rvWhole(t, db, "rvobj", key)
				if id != prev {
					steps = append(steps, step{id, key, state, now})
				}
				state = now
			}
			vals := func(self bool) string {
				var parts []string
				if rng.Intn(3) > 0 {
					parts = append(parts, fmt.Sprintf("s: %q", []string{"a", "b", "", "x y"}[rng.Intn(4)]))
				}
				if rng.Intn(2) == 0 {
					parts = append(parts, fmt.Sprintf("n: %d", []int64{0, -1, 9007199254740993, 9223372036854775807, 42}[rng.Intn(5)]))
				}
				if rng.Intn(2) == 0 {
					parts = append(parts, fmt.Sprintf("f: %s", []string{"1.5", "0.1", "1e21", "3", "-2.25"}[rng.Intn(5)]))
				}
				if rng.Intn(2) == 0 {
					parts = append(parts, fmt.Sprintf("l: %s", []string{"[]", "[a]", "[a, b]", "[b, a, a]"}[rng.Intn(4)]))
				}
				if rng.Intn(2) == 0 {
					parts = append(parts, fmt.Sprintf("ok: %v", rng.Intn(2) == 0))
				}
				if rng.Intn(3) == 0 {
					parts = append(parts, fmt.Sprintf("pw: sec%d", rng.Intn(3)))
				}
				if rng.Intn(2) == 0 {
					parts = append(parts, "ref: "+targets[rng.Intn(len(targets))])
				}
				if self && rng.Intn(4) == 0 {
					parts = append(parts, "self: "+key)
				}
				if rng.Intn(3) == 0 {
					parts = append(parts, fmt.Sprintf("displayname: %q", []string{"", "D", "E"}[rng.Intn(3)]))
				}
				return strings.Join(parts, ", ")
			}
			write(fmt.Sprintf(`{classname: rvobj, keyname: %s, %s}`, key, vals(false)))
			for i := 0; i < 40; i++ {
				switch r := rng.Intn(20); {
				case r < 10:
					write(fmt.Sprintf(`{classname: rvobj, keyname: %s, %s}`, key, vals(true)))
				case r < 12:
					write(fmt.Sprintf(`{classname: rvobj, keyname: %s, _action: %s}`, key, []string{"enable", "disable"}[rng.Intn(2)]))
				case r < 14:
					// A referenced object renamed: the reference is rewritten.
					i := rng.Intn(len(targets))
					to := fmt.Sprintf("%s_%d", targets[i], rng.Intn(1000))
					if _, err := testkit.Rename(t, db, "user:r", "rvtarget", targets[i], to); err != nil {
						t.Fatal(err)
					}
					targets[i] = to
					id := rvLastID(t, db, "rvobj")
					now := rvWhole(t, db, "rvobj", key)
					if now != state && (len(steps) == 0 || steps[len(steps)-1].id != id) {
						steps = append(steps, step{id, key, state, now})
					}
					state = now
				case r < 15:
					write(fmt.Sprintf(`{classname: rvobj, keyname: %s, _action: delete}`, key))
					write(fmt.Sprintf(`{classname: rvobj, keyname: %s, %s}`, key, vals(false)))
				case r < 16:
					to := fmt.Sprintf("o%d", rng.Intn(1000)+2)
					if _, err := testkit.Rename(t, db, "user:r", "rvobj", key, to); err != nil {
						t.Fatal(err)
					}
					key = to
					state = rvWhole(t, db, "rvobj", key)
					// The self reference is rewritten in the same transaction: the
					// rename's rows are checked below like the others.
					var ids []int64
					rows, err := db.Reader().QueryContext(context.Background(), "SELECT id FROM revisions WHERE classname = 'rvobj' AND keyname = ? ORDER BY id", key)
					if err != nil {
						t.Fatal(err)
					}
					for rows.Next() {
						var id int64
						rows.Scan(&id)
						ids = append(ids, id)
					}
					rows.Close()
					_ = ids
				default:
					// Re-load the whole state with fewer fields (field removal).
					write(fmt.Sprintf(`{classname: rvobj, keyname: %s, s: gone}`, key))
				}
			}
			checked := 0
			defer func() { t.Logf("%d revisions checked of %d", checked, len(steps)) }()
			for _, st := range steps {
				b, a := rvStates(t, db, st.id)
				checked++
				if b != st.before || a != st.after {
					rev, _ := db.RevisionByID(context.Background(), st.id)
					t.Errorf("revision %d (%s, delta %v) of %s:\n got %s\n  → %s\nwant %s\n  → %s", st.id, rev.Action, rev.Delta, st.key, b, a, st.before, st.after)
				}
			}
		})
	}
}

var _ = model.ActionUpdate

// Telling the versions at a revision reads that row alone: its memory does not grow
// with the number of newer changes (48 changes of a 1 MiB text here), only with the
// object's size.
func TestRevisionStatesMemoryIndependentOfHistory(t *testing.T) {
	db := newTestDB(t)
	mustLoad(t, db, `{classname: _schema, keyname: rvbig, body: {dataformat: text}}`, store.LoadOptions{})
	const size, changes = 1 << 20, 48
	text := func(i int) string { return strings.Repeat(string(rune('a'+i%26)), size) }
	write := func(i int) {
		t.Helper()
		entry := model.NewEntry(map[string]any{"classname": "rvbig", "keyname": "x", "body": text(i)})
		res := testkit.LoadEntries(t, db, []*model.Entry{entry}, store.LoadOptions{})
		if res.Errors != 0 {
			t.Fatalf("load: %v", res.Messages)
		}
	}
	write(0)
	write(1)
	oldest := rvLastID(t, db, "rvbig")
	for i := 2; i < changes+2; i++ {
		write(i)
	}
	rev, err := db.RevisionByID(context.Background(), oldest)
	if err != nil || !rev.Delta {
		t.Fatalf("revision %d: %+v %v", oldest, rev.Delta, err)
	}
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var m runtime.MemStats
		for i := 0; i < 200000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	b, a, err := rev.States()
	close(stop)
	<-done
	if err != nil || b == nil || a == nil {
		t.Fatalf("%v", err)
	}
	grew := int64(peak.Load()) - int64(base.HeapInuse)
	t.Logf("heap in use grew by %d MiB reading the versions across %d changes of a %d MiB value", grew>>20, changes, size>>20)
	if grew > 16*size {
		t.Errorf("reading one revision's versions held %d MiB (history of %d changes of a %d MiB value): memory grows with the history's length", grew>>20, changes, size>>20)
	}
}
