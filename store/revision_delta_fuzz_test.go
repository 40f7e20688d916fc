package store_test

import (
	"encoding/json"
	"math/rand"
	"testing"

	"dataservice/store"
	"dataservice/store/model"
)

// rvNorm is v as JSON decodes it (the form both sides are compared in).
func rvNorm(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(x)
	return string(b)
}

// The delta of random updates (keys and strings with escapes, invalid UTF-8, U+2028,
// HTML characters; nulls, nested lists, numbers) is valid JSON; its after is the whole
// new state, and undoing the before from it gives the old one.
func TestRevisionDeltaRoundTripsRandomData(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(7))
	pieces := []string{"a", "<", ">", "&", "\"", "\\", "\n", "\x7f", "\x01", "\u2028", "\u2029", "é", "\xff", "日本", " ", "absent", "data"}
	str := func() string {
		s := ""
		for i := rng.Intn(4); i >= 0; i-- {
			s += pieces[rng.Intn(len(pieces))]
		}
		return s
	}
	var val func(depth int) any
	val = func(depth int) any {
		switch rng.Intn(8) {
		case 0:
			return nil
		case 1:
			return int64(rng.Intn(5)) - 2
		case 2:
			return []float64{0.1, 1.5, 1e21, -2.25}[rng.Intn(4)]
		case 3:
			return rng.Intn(2) == 0
		case 4:
			if depth < 2 {
				l := []any{}
				for i := rng.Intn(3); i > 0; i-- {
					l = append(l, val(depth+1))
				}
				return l
			}
		case 5:
			if depth < 2 {
				m := map[string]any{}
				for i := rng.Intn(3); i > 0; i-- {
					m[str()] = val(depth + 1)
				}
				return m
			}
		}
		return str()
	}
	s := &model.Schema{Keyname: "x"}
	s.AddField(&model.Field{Keyname: "a", Dataformat: "string"})
	for i := 0; i < 3000; i++ {
		old := &store.Instance{Keyname: "k", Displayname: str(), IsEnabled: rng.Intn(2) == 0, Data: map[string]any{}}
		for j := rng.Intn(25); j > 0; j-- {
			old.Data[str()] = val(0)
		}
		next := &store.Instance{Keyname: "k", Displayname: old.Displayname, IsEnabled: old.IsEnabled, Data: map[string]any{}}
		for k, v := range old.Data {
			if rng.Intn(3) > 0 {
				next.Data[k] = v
			}
		}
		for j := rng.Intn(4); j > 0; j-- {
			next.Data[str()] = val(0)
		}
		if rng.Intn(3) == 0 {
			next.Displayname = str()
		}
		if rng.Intn(4) == 0 {
			next.IsEnabled = !next.IsEnabled
		}
		before, after := store.RevisionDelta(s, old, next)
		b, errB := store.ParseRevisionDoc(before)
		a, errA := store.ParseRevisionDoc(after)
		if errB != nil || errA != nil {
			t.Fatalf("unreadable delta: %v %v\n%q\n%q", errB, errA, before, after)
		}
		kn := func(k string) string {
			b, _ := json.Marshal(k)
			var x string
			json.Unmarshal(b, &x)
			return x
		}
		apply := func(state map[string]any, d *store.RevisionDoc) map[string]any {
			out := map[string]any{}
			for k, v := range state {
				out[kn(k)] = v
			}
			for k, v := range d.Data {
				out[kn(k)] = v
			}
			for _, k := range d.Absent {
				delete(out, kn(k))
			}
			return out
		}
		if got, want := rvNorm(t, apply(next.Data, b)), rvNorm(t, old.Data); got != want {
			t.Fatalf("undo gives %s, want %s\nbefore %s\nafter %s", got, want, before, after)
		}
		if got, want := rvNorm(t, apply(map[string]any{}, a)), rvNorm(t, next.Data); got != want {
			t.Fatalf("the after holds %s, want %s\nbefore %s\nafter %s", got, want, before, after)
		}
		// Revision.States gives the same two objects.
		sb, sa, err := store.Revision{Delta: true, Before: before, After: after}.States()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := rvNorm(t, sb.Data)+" "+rvNorm(t, *sb.Displayname), rvNorm(t, apply(next.Data, b))+" "+rvNorm(t, old.Displayname); got != want {
			t.Fatalf("States before %s, want %s", got, want)
		}
		if got, want := rvNorm(t, sa.Data)+" "+rvNorm(t, *sa.Displayname), rvNorm(t, next.Data)+" "+rvNorm(t, next.Displayname); got != want {
			t.Fatalf("States after %s, want %s", got, want)
		}
	}
}
