package model

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

// TestMustJSONMapMatchesEncodingJSON: data maps, written directly, are byte for byte
// what encoding/json writes (sorted keys, escapes, numbers, nested values), and values
// encoding/json refuses still panic.
func TestMustJSONMapMatchesEncodingJSON(t *testing.T) {
	strs := []string{"", "a", "Z9", "<b>&amp;</b>", "quote\"s", "back\\slash", "tab\there", "\u2028\u2029", "bad\xffutf8",
		"é日本", "bell\a\x00\x1f", "line\nfeed", "b", "B", "_x", "10.0.0.1"}
	rng := rand.New(rand.NewPCG(16, 6))
	var value func(depth int) any
	value = func(depth int) any {
		switch rng.IntN(9) {
		case 0:
			return nil
		case 1:
			return rng.IntN(2) == 0
		case 2:
			return rng.Int64N(1<<50) - 1<<49
		case 3:
			return []float64{0.5, -1.25e-7, 3e21, 1e300, 2}[rng.IntN(5)]
		case 4:
			if depth < 2 {
				l := make([]any, rng.IntN(4))
				for i := range l {
					l[i] = value(depth + 1)
				}
				return l
			}
		case 5:
			if depth < 2 {
				m := map[string]any{}
				for range rng.IntN(3) {
					m[strs[rng.IntN(len(strs))]] = value(depth + 1)
				}
				return m
			}
		case 6:
			return int(rng.IntN(1000))
		}
		return strs[rng.IntN(len(strs))] + strs[rng.IntN(len(strs))]
	}
	for i := 0; i < 5000; i++ {
		m := map[string]any{}
		for range rng.IntN(8) {
			m[strs[rng.IntN(len(strs))]+strs[rng.IntN(len(strs))]] = value(0)
		}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := MustJSON(m); got != string(want) {
			t.Fatalf("map %d:\n got %s\nwant %s", i, got, want)
		}
	}
	if got := MustJSON(map[string]any(nil)); got != "null" {
		t.Fatalf("nil map: %s", got)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("NaN was encoded")
		}
	}()
	MustJSON(map[string]any{"x": math.NaN()})
}

// TestSameJSONMatchesEncodings: SameJSON says two data maps are the same exactly when
// their encodings are, including values of different types that encode alike and
// strings whose invalid UTF-8 becomes the same \ufffd.
func TestSameJSONMatchesEncodings(t *testing.T) {
	vals := []any{nil, true, false, int64(1), int(1), 1.0, int64(2), "", "a", "\xff", "\xfe", "\ufffd", `\ufffd`, "a\xff", "a\ufffd", []any{"a"},
		[]any{"a", int64(1)}, []any{}, map[string]any{"x": "a"}, map[string]any{"x": "\xfe"}}
	keys := []string{"a", "b", "\xff", "\xfe", "\ufffd"}
	rng := rand.New(rand.NewPCG(16, 7))
	gen := func() map[string]any {
		m := map[string]any{}
		for range rng.IntN(3) {
			m[keys[rng.IntN(len(keys))]] = vals[rng.IntN(len(vals))]
		}
		return m
	}
	same := 0
	for i := 0; i < 20000; i++ {
		a, b := gen(), gen()
		if rng.IntN(3) == 0 {
			b = map[string]any{}
			for k, v := range a {
				b[k] = v
			}
		}
		want := MustJSON(a) == MustJSON(b)
		if got := SameJSON(a, b); got != want {
			t.Fatalf("SameJSON(%q, %q) = %v; encodings %s and %s", a, b, got, MustJSON(a), MustJSON(b))
		}
		if want {
			same++
		}
	}
	if same < 1000 {
		t.Fatalf("only %d equal pairs: the test does not exercise equality", same)
	}
}
