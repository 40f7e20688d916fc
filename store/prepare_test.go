package store

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"dataservice/store/model"
)

// TestPrepareDiffersOnlyWhenEncodingsDiffer: when validation reports that a value
// encodes differently (which lets an update skip comparing the whole data), the new
// data's encoding does differ from the stored one's, over random old and new values
// that include values normalizing to the stored ones and invalid UTF-8.
func TestPrepareDiffersOnlyWhenEncodingsDiffer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "prepare.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Load(ctx, []*model.Entry{model.NewEntry(map[string]any{"classname": "_schema", "keyname": "thing",
		"s": map[string]any{"dataformat": "string"}, "n": map[string]any{"dataformat": "int"},
		"m": map[string]any{"dataformat": "string", "cardinal_max": 0}, "b": map[string]any{"dataformat": "boolean"}})}, LoadOptions{})
	if err != nil || res.Errors != 0 {
		t.Fatalf("load: %v %v", err, res)
	}
	tx, err := db.BeginRead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	s, err := tx.Schema(ctx, "thing")
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"s", "n", "m", "b", "gone", "\xff"}
	vals := []any{nil, "", "a", " a ", "\xff", "\ufffd", int64(1), "1", 1.0, true, "true", "yes",
		[]any{"a"}, []any{"a", "b"}, "a,b", []any{}}
	rng := rand.New(rand.NewPCG(3, 16))
	gen := func() map[string]any {
		m := map[string]any{}
		for range rng.IntN(4) {
			m[keys[rng.IntN(len(keys))]] = vals[rng.IntN(len(vals))]
		}
		return m
	}
	differed, checked := 0, 0
	for i := 0; i < 20000; i++ {
		old := &Instance{Data: gen()}
		next := &Instance{Data: gen()}
		if rng.IntN(3) == 0 {
			for k, v := range old.Data {
				next.Data[k] = v
			}
		}
		differs, err := tx.prepare(ctx, s, next, old)
		if err != nil {
			continue
		}
		checked++
		if differs {
			differed++
			if model.MustJSON(old.Data) == model.MustJSON(next.Data) {
				t.Fatalf("differs, but both encode as %s", model.MustJSON(next.Data))
			}
		}
	}
	if checked < 2000 || differed < 1000 {
		t.Fatalf("only %d valid pairs, %d reported different: the test does not exercise prepare", checked, differed)
	}
}
