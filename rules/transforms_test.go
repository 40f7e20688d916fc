package rules

import (
	"crypto/md5"
	"encoding/hex"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestTransforms(t *testing.T) {
	tests := []struct {
		name    string
		content string
		in      Entry
		want    Entry
	}{
		// field_noop
		{"noop", "- field_noop: ''", Entry{"a": "A"}, Entry{"a": "A"}},

		// field_set
		{"set string", "- field_set: ['', a, hello]", Entry{}, Entry{"a": "hello"}},
		{"set overwrites", "- field_set: ['', a, hello]", Entry{"a": int64(1)}, Entry{"a": "hello"}},
		{"set int", "- field_set: ['', a, 5]", Entry{}, Entry{"a": int64(5)}},
		// Not in canonical form: kept as written (an int field parses it to 31).
		{"set hex int keeps its text", "- field_set: ['', a, 0x1F]", Entry{}, Entry{"a": "0x1F"}},
		{"set quoted int", "- field_set: ['', a, '5']", Entry{}, Entry{"a": "5"}},
		{"set float", "- field_set: ['', a, 2.5]", Entry{}, Entry{"a": 2.5}},
		{"set bool", "- field_set: ['', a, true]", Entry{}, Entry{"a": true}},
		{"set yes is a string", "- field_set: ['', a, yes]", Entry{}, Entry{"a": "yes"}},
		{"set null", "- field_set: ['', a, null]", Entry{"a": "x"}, Entry{"a": nil}},
		{"set tilde", "- field_set: ['', a, ~]", Entry{}, Entry{"a": nil}},
		{"set empty string", "- field_set: ['', a, '']", Entry{}, Entry{"a": ""}},
		{"set list", "- field_set: ['', a, [x, 2, true, ~]]", Entry{}, Entry{"a": []any{"x", int64(2), true, nil}}},
		{"set _action", "- field_set: ['', _action, delete]", Entry{"keyname": "k"}, Entry{"keyname": "k", "_action": "delete"}},
		{"set classname unchanged", "- field_set: ['', classname, Person]", Entry{"classname": "Person"}, Entry{"classname": "Person"}},

		// field_copy
		{"copy", "- field_copy: ['', a, b]", Entry{"a": "x"}, Entry{"a": "x", "b": "x"}},
		{"copy short", "- field_copy: [a, b]", Entry{"a": int64(3)}, Entry{"a": int64(3), "b": int64(3)}},
		{"copy overwrites", "- field_copy: [a, b]", Entry{"a": "x", "b": "y"}, Entry{"a": "x", "b": "x"}},
		{"copy missing", "- field_copy: [a, b]", Entry{"b": "y"}, Entry{"b": ""}},
		{"copy nil", "- field_copy: [a, b]", Entry{"a": nil}, Entry{"a": nil, "b": nil}},
		{"copy list", "- field_copy: [a, b]", Entry{"a": []any{"x"}}, Entry{"a": []any{"x"}, "b": []any{"x"}}},
		{"copy classname", "- field_copy: [classname, b]", Entry{"classname": "P"}, Entry{"classname": "P", "b": "P"}},

		// field_rename
		{"rename", "- field_rename: ['', a, b]", Entry{"a": "x"}, Entry{"b": "x"}},
		{"rename short", "- field_rename: [a, b]", Entry{"a": "x", "b": "y"}, Entry{"b": "x"}},
		{"rename missing", "- field_rename: [a, b]", Entry{"b": "y"}, Entry{"b": ""}},
		{"rename to itself", "- field_rename: [a, a]", Entry{"a": "x"}, Entry{"a": "x"}},
		{"rename list", "- field_rename: [a, b]", Entry{"a": []any{"x", "y"}}, Entry{"b": []any{"x", "y"}}},

		// field_delete
		{"delete", "- field_delete: ['', a, b]", Entry{"a": "x", "b": "y", "c": "z"}, Entry{"c": "z"}},
		{"delete scalar", "- field_delete: a", Entry{"a": "x", "c": "z"}, Entry{"c": "z"}},
		{"delete missing", "- field_delete: ['', a, missing]", Entry{"a": "x"}, Entry{}},

		// field_keep
		{"keep", "- field_keep: ['', a, missing]",
			Entry{"classname": "P", "keyname": "k", "displayname": "d", "is_enabled": true, "_action": "x", "_id": int64(1), "a": "1", "b": "2", "c": nil},
			Entry{"classname": "P", "keyname": "k", "displayname": "d", "is_enabled": true, "_action": "x", "_id": int64(1), "a": "1"}},
		{"keep scalar", "- field_keep: b", Entry{"a": "1", "b": "2"}, Entry{"b": "2"}},

		// field_lower, field_upper, field_nospace
		{"lower", "- field_lower: ['', a, b, missing]", Entry{"a": "MiXeD", "b": "ÉCOLE", "c": "KEEP"}, Entry{"a": "mixed", "b": "école", "c": "KEEP"}},
		{"lower scalar", "- field_lower: a", Entry{"a": "ABC"}, Entry{"a": "abc"}},
		{"lower already", "- field_lower: a", Entry{"a": "abc"}, Entry{"a": "abc"}},
		{"lower list", "- field_lower: a", Entry{"a": []any{"A", "B", int64(1), nil}}, Entry{"a": []any{"a", "b", "1", ""}}},
		{"lower bool", "- field_lower: a", Entry{"a": true}, Entry{"a": "true"}},
		{"lower nil", "- field_lower: a", Entry{"a": nil}, Entry{"a": ""}},
		{"upper", "- field_upper: ['', a]", Entry{"a": "école x"}, Entry{"a": "ÉCOLE X"}},
		{"upper list", "- field_upper: a", Entry{"a": []any{"x", "y"}}, Entry{"a": []any{"X", "Y"}}},
		{"upper missing", "- field_upper: a", Entry{"b": "x"}, Entry{"b": "x"}},
		{"nospace", "- field_nospace: ['', a]", Entry{"a": " a b\tc\nd\u00a0e "}, Entry{"a": "abcde"}},
		{"nospace list", "- field_nospace: a", Entry{"a": []any{"1 2", " 3"}}, Entry{"a": []any{"12", "3"}}},
		{"nospace missing", "- field_nospace: a", Entry{}, Entry{}},
		{"nospace float", "- field_nospace: a", Entry{"a": 1.5}, Entry{"a": "1.5"}},

		// field_toint
		{"toint", "- field_toint: ['', a, b, c, d, e, f, g, missing]",
			Entry{"a": "42", "b": " -7 ", "c": "3.0", "d": 12.0, "e": int64(5), "f": true, "g": nil},
			Entry{"a": int64(42), "b": int64(-7), "c": int64(3), "d": int64(12), "e": int64(5), "f": int64(1), "g": nil}},
		{"toint list", "- field_toint: a", Entry{"a": []any{"1", 2.0, int64(3)}}, Entry{"a": []any{int64(1), int64(2), int64(3)}}},

		// field_tofloat
		{"tofloat", "- field_tofloat: ['', a, b, c, d, e, missing]",
			Entry{"a": "1.5", "b": " 2 ", "c": int64(3), "d": 4.25, "e": false},
			Entry{"a": 1.5, "b": 2.0, "c": 3.0, "d": 4.25, "e": 0.0}},
		{"tofloat exponent", "- field_tofloat: a", Entry{"a": "1e3"}, Entry{"a": 1000.0}},
		{"tofloat list", "- field_tofloat: a", Entry{"a": []any{"1", "2.5"}}, Entry{"a": []any{1.0, 2.5}}},

		// field_tostring
		{"tostring", "- field_tostring: ['', a, b, c, d, e, f, missing]",
			Entry{"a": int64(-5), "b": 1.5, "c": 1e21, "d": true, "e": nil, "f": "x"},
			Entry{"a": "-5", "b": "1.5", "c": "1000000000000000000000", "d": "true", "e": "", "f": "x"}},
		{"tostring list", "- field_tostring: a", Entry{"a": []any{int64(1), false, nil}}, Entry{"a": []any{"1", "false", ""}}},

		// field_regexp_sub
		{"regexp_sub", "- field_regexp_sub: ['', a, '\\s+', ' ']", Entry{"a": "a  b \t c"}, Entry{"a": "a b c"}},
		{"regexp_sub short", "- field_regexp_sub: [a, '^(\\w+)@(\\w+)$', '$2/$1']", Entry{"a": "bob@host"}, Entry{"a": "host/bob"}},
		{"regexp_sub named group", "- field_regexp_sub: [a, '(?P<d>\\d+)', '<${d}>']", Entry{"a": "a1b22"}, Entry{"a": "a<1>b<22>"}},
		{"regexp_sub no match", "- field_regexp_sub: [a, 'z', 'y']", Entry{"a": "abc"}, Entry{"a": "abc"}},
		{"regexp_sub list", "- field_regexp_sub: [a, '-', '']", Entry{"a": []any{"a-b", "c"}}, Entry{"a": []any{"ab", "c"}}},
		{"regexp_sub int", "- field_regexp_sub: [a, '0', 'x']", Entry{"a": int64(100)}, Entry{"a": "1xx"}},
		{"regexp_sub missing", "- field_regexp_sub: [a, '.*', 'x']", Entry{}, Entry{}},
		{"regexp_sub empty match", "- field_regexp_sub: [a, '^$', 'none']", Entry{"a": ""}, Entry{"a": "none"}},

		// field_append, field_prefix
		{"append", "- field_append: ['', a, '.com']", Entry{"a": "x"}, Entry{"a": "x.com"}},
		{"append int", "- field_append: ['', a, '%']", Entry{"a": int64(5)}, Entry{"a": "5%"}},
		{"append list", "- field_append: ['', a, '!']", Entry{"a": []any{"x", "y"}}, Entry{"a": []any{"x!", "y!"}}},
		{"append missing", "- field_append: ['', a, '!']", Entry{}, Entry{}},
		{"prefix", "- field_prefix: ['', a, 'id-']", Entry{"a": "7"}, Entry{"a": "id-7"}},
		{"prefix list", "- field_prefix: ['', a, '#']", Entry{"a": []any{"x", int64(2)}}, Entry{"a": []any{"#x", "#2"}}},
		{"prefix missing", "- field_prefix: ['', a, '#']", Entry{"b": "x"}, Entry{"b": "x"}},

		// field_merge
		{"merge", "- field_merge: ['', first, last, full, ' ']", Entry{"first": "Ada", "last": "Lovelace"}, Entry{"first": "Ada", "last": "Lovelace", "full": "Ada Lovelace"}},
		{"merge no separator", "- field_merge: ['', a, b, c]", Entry{"a": "x", "b": int64(1)}, Entry{"a": "x", "b": int64(1), "c": "x1"}},
		{"merge missing", "- field_merge: ['', a, b, c, '-']", Entry{"b": "y"}, Entry{"b": "y", "c": "-y"}},
		{"merge into source", "- field_merge: ['', a, b, a, '/']", Entry{"a": "x", "b": "y"}, Entry{"a": "x/y", "b": "y"}},

		// field_join
		{"join", "- field_join: ['', out, ', ', a, missing, b, c]", Entry{"a": "x", "b": int64(2), "c": nil}, Entry{"a": "x", "b": int64(2), "c": nil, "out": "x, 2"}},
		{"join list", "- field_join: ['', out, '|', a, b]", Entry{"a": []any{"x", "y"}, "b": "z"}, Entry{"a": []any{"x", "y"}, "b": "z", "out": "x|y|z"}},
		{"join all missing", "- field_join: ['', out, '|', a]", Entry{}, Entry{"out": ""}},

		// field_md5
		{"md5", "- field_md5: ['', h, a]", Entry{"a": "abc"}, Entry{"a": "abc", "h": "900150983cd24fb0d6963f7d28e17f72"}},
		{"md5 several", "- field_md5: ['', h, a, b]", Entry{"a": "x", "b": int64(1)}, Entry{"a": "x", "b": int64(1), "h": md5Hex("x:1")}},
		{"md5 missing", "- field_md5: ['', h, a, missing, b]", Entry{"a": "x", "b": "y"}, Entry{"a": "x", "b": "y", "h": md5Hex("x::y")}},

		// field_date_now, field_time_now, field_datetime_now
		{"date_now", "- field_date_now: ['', d, e]", Entry{}, Entry{"d": "2024-03-31", "e": "2024-03-31"}},
		{"time_now", "- field_time_now: t", Entry{}, Entry{"t": "13:45:30"}},
		{"datetime_now", "- field_datetime_now: ['', dt]", Entry{"dt": "old"}, Entry{"dt": "2024-03-31 13:45:30"}},

		// field_datetime
		{"datetime now", "- field_datetime: ['', d, 'now()']", Entry{}, Entry{"d": "2024-03-31 13:45:30"}},
		{"datetime months", "- field_datetime: ['', d, 'now() -3month']", Entry{}, Entry{"d": "2023-12-31 13:45:30"}},
		{"datetime month clamps", "- field_datetime: ['', d, 'now() -1month']", Entry{}, Entry{"d": "2024-02-29 13:45:30"}},
		{"datetime year clamps", "- field_datetime: ['', d, 'now() -1month +1year']", Entry{}, Entry{"d": "2025-02-28 13:45:30"}},
		{"datetime days hours", "- field_datetime: ['', d, 'now() +2day -1hour']", Entry{}, Entry{"d": "2024-04-02 12:45:30"}},
		{"datetime no spaces", "- field_datetime: ['', d, 'now()-1year+2days']", Entry{}, Entry{"d": "2023-04-02 13:45:30"}},
		{"datetime spaced plural", "- field_datetime: ['', d, ' NOW() - 2 Weeks ']", Entry{}, Entry{"d": "2024-03-17 13:45:30"}},
		{"datetime minutes seconds", "- field_datetime: ['', d, 'now() +15minutes -30second']", Entry{}, Entry{"d": "2024-03-31 14:00:00"}},
		{"datetime years", "- field_datetime: ['', d, 'now() +2years']", Entry{}, Entry{"d": "2026-03-31 13:45:30"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertEntry(t, mustApply(t, tt.content, tt.in), tt.want)
		})
	}
}

func TestTransformErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		in      Entry
		want    string
	}{
		{"toint text", "- field_noop:\n- field_toint: ['', a, n]", Entry{"a": "1", "n": "abc"}, `rule 2: field_toint: field "n": cannot convert "abc" to int`},
		{"toint fraction", "- field_toint: n", Entry{"n": "4.5"}, `rule 1: field_toint: field "n": cannot convert "4.5" to int`},
		{"toint float fraction", "- field_toint: n", Entry{"n": 4.5}, `rule 1: field_toint: field "n": cannot convert "4.5" to int`},
		{"toint too large", "- field_toint: n", Entry{"n": 1e19}, `rule 1: field_toint: field "n": cannot convert "10000000000000000000" to int`},
		{"toint empty", "- field_toint: n", Entry{"n": ""}, `rule 1: field_toint: field "n": cannot convert "" to int`},
		{"toint list item", "- field_toint: n", Entry{"n": []any{"1", "x"}}, `rule 1: field_toint: field "n": cannot convert "x" to int`},
		{"tofloat text", "- field_tofloat: f", Entry{"f": "1,5"}, `rule 1: field_tofloat: field "f": cannot convert "1,5" to float`},
		{"tofloat nan", "- field_tofloat: f", Entry{"f": "NaN"}, `rule 1: field_tofloat: field "f": cannot convert "NaN" to float`},
		{"tofloat overflow", "- field_tofloat: f", Entry{"f": "1e400"}, `rule 1: field_tofloat: field "f": cannot convert "1e400" to float`},
		{"classname set", "- field_set: ['', classname, Org]", Entry{"classname": "Person"}, `rule 1: field_set: field "classname" must not change: "Person" became "Org"`},
		{"classname upper", "- field_noop:\n- field_upper: ['', a, classname]", Entry{"classname": "Person"}, `rule 2: field_upper: field "classname" must not change: "Person" became "PERSON"`},
		{"classname deleted", "- field_delete: classname", Entry{"classname": "Person"}, `rule 1: field_delete: field "classname" must not change: it was removed (was "Person")`},
		{"classname renamed", "- field_rename: [classname, x]", Entry{"classname": "Person"}, `rule 1: field_rename: field "classname" must not change: it was removed (was "Person")`},
		{"classname created", "- field_set: ['', classname, Org]", Entry{}, `rule 1: field_set: field "classname" must not change: it was set to "Org"`},
		{"classname copied over", "- field_copy: [x, classname]", Entry{"classname": "Person", "x": "Org"}, `rule 1: field_copy: field "classname" must not change: "Person" became "Org"`},
		{"classname type", "- field_set: ['', classname, 1]", Entry{"classname": "1"}, `rule 1: field_set: field "classname" must not change: "1" became 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			discard, err := mustParse(t, tt.content).Apply(tt.in, testNow)
			if got, want := errString(err), tt.want; got != want {
				t.Fatalf("Apply error = %q, want %q", got, want)
			}
			if discard {
				t.Fatal("Apply discarded the entry")
			}
		})
	}
}

func TestClassnameAllowed(t *testing.T) {
	in := Entry{"classname": "person", "l": []any{"a"}}
	e := mustApply(t, `
- field_lower: classname
- field_keep: l
- field_set: ['', classname, person]
- field_copy: [classname, classname]
`, in)
	assertEntry(t, e, in)

	e = mustApply(t, "- field_rename: [classname, classname]\n- field_tostring: classname", Entry{"classname": []any{"a", "b"}})
	assertEntry(t, e, Entry{"classname": []any{"a", "b"}})
}

func TestMultiValuedNotModifiedInPlace(t *testing.T) {
	shared := []any{"A", "B"}
	e := mustApply(t, "- field_lower: a\n- field_append: ['', b, x]\n- field_toint: c", Entry{"a": shared, "b": shared, "c": []any{"1"}})
	if got, want := shared[0], any("A"); got != want {
		t.Fatalf("shared[0] = %#v, want %#v", got, want)
	}
	assertEntry(t, e, Entry{"a": []any{"a", "b"}, "b": []any{"Ax", "Bx"}, "c": []any{int64(1)}})
}

func TestSetListIsCopied(t *testing.T) {
	p := mustParse(t, "- field_set: ['', tags, [a, b]]")
	e1, e2 := Entry{}, Entry{}
	if _, err := p.Apply(e1, testNow); err != nil {
		t.Fatal(err)
	}
	e1["tags"].([]any)[0] = "changed"
	if _, err := p.Apply(e2, testNow); err != nil {
		t.Fatal(err)
	}
	assertEntry(t, e2, Entry{"tags": []any{"a", "b"}})
}

func TestUUID(t *testing.T) {
	e := mustApply(t, "- field_uuid: ['', a, b]", Entry{"a": "old"})
	a, b := e["a"].(string), e["b"].(string)
	for _, s := range []string{a, b} {
		u, err := uuid.Parse(s)
		if err != nil {
			t.Fatalf("uuid.Parse(%q): %v", s, err)
		}
		if got, want := u.Version(), uuid.Version(4); got != want {
			t.Fatalf("version of %q = %d, want %d", s, got, want)
		}
	}
	if a == b {
		t.Fatalf("field_uuid set the same UUID %q twice", a)
	}
}

func TestNowIsUTC(t *testing.T) {
	zone := time.FixedZone("UTC+10", 10*3600)
	now := time.Date(2024, time.January, 1, 8, 0, 0, 0, zone) // 2023-12-31 22:00 UTC
	p := mustParse(t, `
- field_date_now: d
- field_time_now: t
- field_datetime_now: dt
- field_datetime: ['', x, 'now() +1day']
`)
	e := Entry{}
	if _, err := p.Apply(e, now); err != nil {
		t.Fatal(err)
	}
	assertEntry(t, e, Entry{"d": "2023-12-31", "t": "22:00:00", "dt": "2023-12-31 22:00:00", "x": "2024-01-01 22:00:00"})
}

func TestDiscard(t *testing.T) {
	tests := []struct {
		name        string
		content     string
		in          Entry
		wantDiscard bool
		want        Entry
	}{
		{"always", "- field_set: ['', a, 1]\n- discard: ''\n- field_set: ['', b, 1]", Entry{}, true, Entry{"a": int64(1)}},
		{"null", "- discard:", Entry{}, true, Entry{}},
		{"list", "- discard: ['']", Entry{}, true, Entry{}},
		{"empty list", "- discard: []", Entry{}, true, Entry{}},
		{"gated true", "- set_condition: [test, field_match, name, '^test']\n- discard: [test]\n- field_set: ['', b, 1]", Entry{"name": "test1"}, true, Entry{"name": "test1"}},
		{"gated false", "- set_condition: [test, field_match, name, '^test']\n- discard: [test]\n- field_set: ['', b, 1]", Entry{"name": "prod"}, false, Entry{"name": "prod", "b": int64(1)}},
		{"scalar gate", "- set_condition: [test, exists, t]\n- discard: test", Entry{"t": ""}, true, Entry{"t": ""}},
		{"scalar gate false", "- set_condition: [test, exists, t]\n- discard: test", Entry{}, false, Entry{}},
		{"negated", "- set_condition: [keep, exists, k]\n- discard: '!keep'", Entry{}, true, Entry{}},
		{"before error", "- discard: ''\n- field_toint: a", Entry{"a": "x"}, true, Entry{"a": "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.in
			discard, err := mustParse(t, tt.content).Apply(e, testNow)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := discard, tt.wantDiscard; got != want {
				t.Fatalf("discard = %v, want %v", got, want)
			}
			assertEntry(t, e, tt.want)
		})
	}
}

func TestEvalDateExpr(t *testing.T) {
	tests := []struct {
		now  time.Time
		expr string
		want string
	}{
		{time.Date(2024, 1, 31, 0, 0, 0, 0, time.UTC), "now() +1month", "2024-02-29 00:00:00"},
		{time.Date(2023, 1, 31, 0, 0, 0, 0, time.UTC), "now() +1month", "2023-02-28 00:00:00"},
		{time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), "now() +1year", "2025-02-28 00:00:00"},
		{time.Date(2024, 12, 15, 0, 0, 0, 0, time.UTC), "now() +1month", "2025-01-15 00:00:00"},
		{time.Date(2024, 1, 15, 0, 0, 0, 0, time.UTC), "now() -13months", "2022-12-15 00:00:00"},
		{time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), "now() -1second", "2023-12-31 23:59:59"},
		{time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), "now()-1week-1day-1hour-1minute", "2023-12-23 22:59:00"},
	}
	for _, tt := range tests {
		offs, err := parseDateExpr(tt.expr)
		if err != nil {
			t.Fatalf("parseDateExpr(%q): %v", tt.expr, err)
		}
		if got, want := evalDateExpr(tt.now, offs).Format(dateTimeLayout), tt.want; got != want {
			t.Fatalf("%s at %v = %s, want %s", tt.expr, tt.now, got, want)
		}
	}
}

func TestTextOf(t *testing.T) {
	tests := []struct {
		v    any
		want string
	}{
		{"s", "s"},
		{nil, ""},
		{int64(-3), "-3"},
		{0.1, "0.1"},
		{1e21, "1000000000000000000000"},
		{false, "false"},
		{[]any{}, ""},
		{[]any{"a"}, "a"},
		{[]any{"a", int64(1), nil}, "a,1,"},
		{7, "7"},
		{int32(8), "8"},
		{uint64(9), "9"},
		{float32(0.5), "0.5"},
		{struct{}{}, "{}"},
	}
	for _, tt := range tests {
		if got, want := textOf(tt.v), tt.want; got != want {
			t.Fatalf("textOf(%#v) = %q, want %q", tt.v, got, want)
		}
	}
}

// TestRuleOutputIsBounded: rules that grow a value fail the entry once it passes
// MaxValueBytes, before memory follows the growth.
func TestRuleOutputIsBounded(t *testing.T) {
	doubling := strings.Repeat("- field_merge: ['', v, v, v]\n", 28)
	sources := "['', d, ','" + strings.Repeat(", v", 2000) + "]"
	tests := []struct {
		name, content string
		value         string
	}{
		{"28 doubling merges", doubling, "x"},
		{"regexp substitution repeating each character", "- field_regexp_sub: [v, '.', '" + strings.Repeat("$0", 200) + "']", strings.Repeat("y", 20000)},
		{"join of one value 2000 times", "- field_join: " + sources, strings.Repeat("z", 1000)},
	}
	for _, tt := range tests {
		t.Run(tt.name+" fails the entry", func(t *testing.T) {
			p, err := Parse(tt.content)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			before := ms.TotalAlloc
			_, err = p.Apply(Entry{"v": tt.value}, time.Now())
			runtime.ReadMemStats(&ms)
			if err == nil || !strings.Contains(err.Error(), "grew to") || !strings.Contains(err.Error(), "(at most 1048576)") {
				t.Fatalf("Apply: %v, want the size bound error", err)
			}
			if alloc := ms.TotalAlloc - before; alloc > 256<<20 { // 28 unbounded doublings of "x" allocate > 512 MiB
				t.Fatalf("Apply allocated %d MiB before failing", alloc>>20)
			}
		})
	}
	t.Run("a value just under the bound passes", func(t *testing.T) {
		p, _ := Parse("- field_append: [v, 'x']")
		if _, err := p.Apply(Entry{"v": strings.Repeat("a", MaxValueBytes-1)}, time.Now()); err != nil {
			t.Fatalf("Apply: %v", err)
		}
	})
}
