package model

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// slowDecode is DecodeData's encoding/json path.
func slowDecode(t testing.TB, s string) map[string]any {
	m := map[string]any{}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	for k, v := range m {
		m[k] = FromJSON(v)
	}
	return m
}

func TestDecodeFlatMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{
		`{}`,
		`{"a":"x","b":12,"c":-3,"d":2.5,"e":true,"f":false,"g":null}`,
		`{"big":9223372036854775807,"huge":92233720368547758070,"exp":1e3,"neg":-0.25}`,
		`{"l":["a","b"],"n":[1,2.5,true,null],"empty":[]}`,
		`{"u":"héllo ✓"}`,
	} {
		fast, ok := decodeFlat(s)
		if !ok {
			t.Fatalf("decodeFlat refused %q", s)
		}
		if want := slowDecode(t, s); !reflect.DeepEqual(fast, want) {
			t.Fatalf("%q: decodeFlat %#v, encoding/json %#v", s, fast, want)
		}
	}
}

func TestDecodeFlatFallsBack(t *testing.T) {
	for _, s := range []string{
		`{"a":"with \"escape\""}`, `{"a":{"nested":1}}`, `{"a":[[1]]}`, `{"a":1,}`, `{"a" : 1}`,
		`{"a":1}trailing`, `{"a":tru}`, `[1]`, `{"a":"\u003c"}`, `{"a":"unterminated}`,
	} {
		if m, ok := decodeFlat(s); ok {
			t.Fatalf("decodeFlat accepted %q as %#v", s, m)
		}
	}
	m, err := DecodeData(`{"a":"with \"escape\"","n":{"x":1}}`)
	if err != nil || m["a"] != `with "escape"` || !reflect.DeepEqual(m["n"], map[string]any{"x": int64(1)}) {
		t.Fatalf("fallback decode: %#v %v", m, err)
	}
}

func FuzzDecodeFlat(f *testing.F) {
	f.Add(`{"a":"x","b":[1,2],"c":null}`)
	f.Add(`{"k":-1.5e3}`)
	f.Fuzz(func(t *testing.T, s string) {
		fast, ok := decodeFlat(s)
		if !ok {
			return
		}
		// Whatever the fast path accepts, encoding/json must read the same way.
		var probe map[string]any
		if json.Unmarshal([]byte(s), &probe) != nil {
			t.Fatalf("decodeFlat accepted invalid JSON %q", s)
		}
		if want := slowDecode(t, s); !reflect.DeepEqual(fast, want) {
			t.Fatalf("%q: decodeFlat %#v, encoding/json %#v", s, fast, want)
		}
	})
}
