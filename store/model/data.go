package model

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// FromJSON converts values decoded by encoding/json with UseNumber (or plain float64
// numbers) to the store's value types: integers as int64, other numbers as float64.
func FromJSON(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case float64:
		if x == float64(int64(x)) && x < 1<<53 && x > -(1<<53) {
			return int64(x)
		}
		return x
	case []any:
		for i := range x {
			x[i] = FromJSON(x[i])
		}
		return x
	case map[string]any:
		for k := range x {
			x[k] = FromJSON(x[k])
		}
		return x
	}
	return v
}

// EncodeData encodes a data map as instances are written (the bytes of json.Marshal;
// benchmark floors use it to encode the same way).
func EncodeData(m map[string]any) string { return MustJSON(m) }

// DecodeData decodes a stored data column as instances are read (benchmark floors use
// it to decode the same bytes the same way).
func DecodeData(s string) (map[string]any, error) {
	m := map[string]any{}
	if s == "" {
		return m, nil
	}
	if fm, ok := decodeFlat(s); ok {
		return fm, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("decode instance data: %w", err)
	}
	for k, v := range m {
		m[k] = FromJSON(v)
	}
	return m, nil
}

// MustJSON encodes v as encoding/json does (a data map directly, the fast way); it
// panics on a value JSON cannot hold, which validated values never are.
func MustJSON(v any) string {
	if m, ok := v.(map[string]any); ok && m != nil {
		// Instance data, encoded for every write and comparison: written directly.
		if b, err := appendJSONMap(make([]byte, 0, 256), m); err == nil {
			return string(b)
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic("store: value not encodable as JSON: " + err.Error())
	}
	return string(b)
}

// AppendJSON appends v encoded as MustJSON encodes a value of a data map (the bytes
// of json.Marshal), for a caller that builds a document from parts into a buffer it
// reuses; the error is json.Marshal's, for a value JSON cannot hold.
func AppendJSON(buf []byte, v any) ([]byte, error) { return appendJSON(buf, v) }

// AppendJSONString appends s as a JSON string, escaped as json.Marshal escapes it.
func AppendJSONString(buf []byte, s string) []byte { return appendJSONString(buf, s) }

// appendJSONMap appends m as encoding/json writes it: keys sorted, values by appendJSON.
func appendJSONMap(buf []byte, m map[string]any) ([]byte, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	buf = append(buf, '{')
	for i, k := range keys {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendJSONString(buf, k)
		buf = append(buf, ':')
		var err error
		if buf, err = appendJSON(buf, m[k]); err != nil {
			return nil, err
		}
	}
	return append(buf, '}'), nil
}

// CloneMap returns a shallow copy of m.
func CloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// sortedDoc orders a map's keys alphabetically.
func sortedDoc(m map[string]any) *Doc {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	d := &Doc{}
	for _, k := range keys {
		d.Set(k, m[k])
	}
	return d
}

// SameJSON reports whether a and b have the same JSON encoding (MustJSON(a) ==
// MustJSON(b)), comparing values directly where that is exact.
//
// A key that is valid UTF-8 encodes as no other key does (an invalid one is escaped
// as \ufffd), so a valid key missing from the other map, or holding a value that
// encodes differently there, makes the encodings differ. The larger map is ranged
// over: when its keys are all in the smaller one, the key sets are equal.
func SameJSON(a, b map[string]any) bool {
	if a == nil || b == nil {
		return MustJSON(a) == MustJSON(b)
	}
	if len(a) < len(b) {
		a, b = b, a
	}
	for k, av := range a {
		if !utf8.ValidString(k) {
			// Keys that are not valid UTF-8 may encode alike: compare the encodings.
			return MustJSON(a) == MustJSON(b)
		}
		if bv, ok := b[k]; !ok || !SameJSONValue(av, bv) {
			return false
		}
	}
	return true
}

// SameJSONValue reports whether a and b encode alike (appendJSON). Two different
// strings encode alike only when invalid UTF-8 in both becomes the same \ufffd: a
// valid string's encoding holds no \ufffd escape, and differs from every other
// string's.
func SameJSONValue(a, b any) bool {
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok && (x == y || utf8.ValidString(x) || utf8.ValidString(y)) {
			return x == y
		}
	case int64:
		if y, ok := b.(int64); ok {
			return x == y
		}
	case bool:
		if y, ok := b.(bool); ok {
			return x == y
		}
	case nil:
		if b == nil {
			return true
		}
	}
	ea, errA := appendJSON(nil, a)
	eb, errB := appendJSON(nil, b)
	if errA != nil || errB != nil {
		panic("store: value not encodable as JSON")
	}
	return string(ea) == string(eb)
}
