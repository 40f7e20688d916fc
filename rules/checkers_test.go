package rules

import (
	"fmt"
	"testing"
)

// TestCheckers runs every checker through set_condition and observes the
// condition through a gated rule and a negated gated rule.
func TestCheckers(t *testing.T) {
	in := Entry{
		"classname": "Person",
		"s":         "Hello World",
		"lower":     "hello",
		"i10":       int64(10),
		"s10":       "10",
		"s10sp":     " 10 ",
		"s9":        "9",
		"f10":       10.0,
		"s10f":      "10.0",
		"s1_5":      "1.5",
		"s1_25":     "1.25",
		"abc":       "abc",
		"abd":       "abd",
		"empty":     "",
		"space":     " ",
		"nil":       nil,
		"zero":      int64(0),
		"one":       int64(1),
		"list":      []any{"red", "green"},
		"nolist":    []any{},
		"tru":       true,
		"fals":      false,
		"yes":       " YES ",
		"on":        "On",
		"s1":        "1",
		"no":        "no",
		"off":       "OFF",
		"s0":        "0",
		"sfalse":    "False",
		"maybe":     "maybe",
		"two":       "2",
		"listyes":   []any{"yes"},
		"inf":       "inf",
	}
	tests := []struct {
		checker string // set_condition arguments after the condition name
		want    bool
	}{
		// field_match
		{"field_match, s, 'o W'", true},
		{"field_match, s, '^World'", false},
		{"field_match, s, '^Hello'", true},
		{"field_match, s, '(?i)WORLD$'", true},
		{"field_match, missing, '.*'", false},
		{"field_match, i10, '^1[0-9]$'", true},
		{"field_match, f10, '^10$'", true},
		{"field_match, tru, '^true$'", true},
		{"field_match, nil, '^$'", true},
		{"field_match, list, '^gr'", true},
		{"field_match, list, '^red$'", true},
		{"field_match, list, '^blue$'", false},
		{"field_match, nolist, '.*'", false},

		// eq: integers, floats, strings
		{"eq, s10, i10", true},
		{"eq, s10sp, i10", true},
		{"eq, f10, i10", true},
		{"eq, s10f, s10", true},
		{"eq, s9, s10", false},
		{"eq, abc, abc", true},
		{"eq, abc, abd", false},
		{"eq, lower, s", false},
		{"eq, empty, nil", true},
		{"eq, missing, missing", false},
		{"eq, s10, missing", false},
		{"eq, missing, s10", false},
		{"eq, inf, inf", true},
		// ne
		{"ne, s9, s10", true},
		{"ne, s10, i10", false},
		{"ne, abc, abd", true},
		{"ne, missing, s10", false},
		// lt: numeric order, not text order
		{"lt, s9, s10", true},
		{"lt, s10, s9", false},
		{"lt, s10, s10", false},
		{"lt, s1_25, s1_5", true},
		{"lt, s1_5, s1_25", false},
		{"lt, s9, s10f", true},
		{"lt, abc, abd", true},
		{"lt, s10, abc", true},
		{"lt, missing, s10", false},
		// le
		{"le, s10, i10", true},
		{"le, s9, s10", true},
		{"le, s10, s9", false},
		{"le, abd, abc", false},
		{"le, s10, missing", false},
		// gt
		{"gt, s10, s9", true},
		{"gt, s9, s10", false},
		{"gt, i10, s10f", false},
		{"gt, abd, abc", true},
		{"gt, missing, s9", false},
		// ge
		{"ge, i10, s10f", true},
		{"ge, s10, s9", true},
		{"ge, s9, s10", false},
		{"ge, abc, abd", false},
		{"ge, s9, missing", false},

		// exists
		{"exists, s", true},
		{"exists, empty", true},
		{"exists, nil", true},
		{"exists, missing", false},

		// empty
		{"empty, missing", true},
		{"empty, nil", true},
		{"empty, empty", true},
		{"empty, nolist", true},
		{"empty, space", false},
		{"empty, s", false},
		{"empty, zero", false},
		{"empty, fals", false},
		{"empty, list", false},

		// is_true
		{"is_true, tru", true},
		{"is_true, yes", true},
		{"is_true, on", true},
		{"is_true, s1", true},
		{"is_true, one", true},
		{"is_true, listyes", true},
		{"is_true, fals", false},
		{"is_true, no", false},
		{"is_true, maybe", false},
		{"is_true, two", false},
		{"is_true, missing", false},
		// is_false
		{"is_false, fals", true},
		{"is_false, no", true},
		{"is_false, off", true},
		{"is_false, s0", true},
		{"is_false, zero", true},
		{"is_false, sfalse", true},
		{"is_false, empty", true},
		{"is_false, space", true},
		{"is_false, nil", true},
		{"is_false, tru", false},
		{"is_false, yes", false},
		{"is_false, maybe", false},
		{"is_false, two", false},
		{"is_false, missing", false},
	}
	for _, tt := range tests {
		t.Run(tt.checker, func(t *testing.T) {
			content := fmt.Sprintf(`
- set_condition: [c, %s]
- field_set: [c, hit, 1]
- field_set: ['!c', miss, 1]
`, tt.checker)
			e := mustApply(t, content, in)
			_, hit := e["hit"]
			_, miss := e["miss"]
			if got, want := hit, tt.want; got != want {
				t.Fatalf("condition = %v, want %v", got, want)
			}
			if got, want := miss, !tt.want; got != want {
				t.Fatalf("negated condition ran = %v, want %v", got, want)
			}
		})
	}
}

func TestCompareValues(t *testing.T) {
	tests := []struct {
		a, b any
		want int
	}{
		{int64(2), int64(10), -1},
		{"2", "10", -1},
		{"10", int64(2), 1},
		{2.5, int64(2), 1},
		{"2.5", "2.50", 0},
		{"1e3", int64(1000), 0},
		{int64(5), 5.0, 0},
		{"b", "a", 1},
		{"a", int64(1), 1},
		{true, "true", 0},
		{"nan", "nan", 0},
		{"NaN", "1", 1}, // NaN does not read as a number: compared as text
		{nil, "", 0},
		{[]any{"1", "2"}, "1,2", 0},
		{int64(-9223372036854775808), -9223372036854775808.0, 0},
	}
	for _, tt := range tests {
		if got, want := compareValues(tt.a, tt.b), tt.want; got != want {
			t.Fatalf("compareValues(%#v, %#v) = %d, want %d", tt.a, tt.b, got, want)
		}
	}
}

func TestConditionsPerEntry(t *testing.T) {
	p := mustParse(t, `
- set_condition: [admin, field_match, email, '@admin$']
- field_set: [admin, role, admin]
- field_set: ['!admin', role, user]
- set_condition: [never_set, field_match, email, '^$']
- field_set: [never_set, never, 1]
- field_set: ['!never_set', always, 1]
`)
	first := Entry{"email": "root@admin"}
	if _, err := p.Apply(first, testNow); err != nil {
		t.Fatal(err)
	}
	assertEntry(t, first, Entry{"email": "root@admin", "role": "admin", "always": int64(1)})

	// The condition set by the first entry must not leak into the second.
	second := Entry{"email": "bob@example"}
	if _, err := p.Apply(second, testNow); err != nil {
		t.Fatal(err)
	}
	assertEntry(t, second, Entry{"email": "bob@example", "role": "user", "always": int64(1)})
}

func TestConditionReevaluated(t *testing.T) {
	// A condition is a snapshot: it is recomputed only by set_condition.
	e := mustApply(t, `
- set_condition: [c, exists, x]
- field_set: ['', x, 1]
- field_set: [c, before, 1]
- set_condition: [c, exists, x]
- field_set: [c, after, 1]
`, Entry{})
	assertEntry(t, e, Entry{"x": int64(1), "after": int64(1)})
}

func TestGateForms(t *testing.T) {
	in := Entry{"flag": "yes"}
	tests := []struct {
		name    string
		content string
		want    Entry
	}{
		{"named", "- field_set: [t, out, 1]", Entry{"flag": "yes", "out": int64(1)}},
		{"quoted negation", "- field_set: ['!t', out, 1]", Entry{"flag": "yes"}},
		{"double-quoted negation", `- field_set: ["!f", out, 1]`, Entry{"flag": "yes", "out": int64(1)}},
		{"quoted negation copy", "- field_copy: ['!f', flag, out]", Entry{"flag": "yes", "out": "yes"}},
		{"quoted negation regexp_sub", "- field_regexp_sub: ['!t', flag, 'y', 'Y']", Entry{"flag": "yes"}},
		{"named regexp_sub", "- field_regexp_sub: [t, flag, 'y', 'Y']", Entry{"flag": "Yes"}},
		{"discard negated does not fire", "- discard: '!t'\n- field_set: ['', out, 1]", Entry{"flag": "yes", "out": int64(1)}},
		{"discard gated does not fire", "- discard: f\n- field_set: ['', out, 1]", Entry{"flag": "yes", "out": int64(1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			content := "- set_condition: [t, is_true, flag]\n- set_condition: [f, is_false, flag]\n" + tt.content
			assertEntry(t, mustApply(t, content, in), tt.want)
		})
	}
}

func TestManyConditions(t *testing.T) {
	// More conditions than Apply keeps on the stack.
	content := ""
	for i := range condStack + 10 {
		content += fmt.Sprintf("- set_condition: [c%d, exists, f%d]\n", i, i%2)
	}
	content += fmt.Sprintf("- field_set: [c%d, odd, 1]\n- field_set: [c%d, even, 1]\n", condStack+9, condStack+8)
	e := mustApply(t, content, Entry{"f0": ""})
	assertEntry(t, e, Entry{"f0": "", "even": int64(1)})
}

func TestSameValue(t *testing.T) {
	tests := []struct {
		a, b any
		want bool
	}{
		{"a", "a", true},
		{"a", "b", false},
		{"1", int64(1), false},
		{int64(1), int64(1), true},
		{nil, nil, true},
		{nil, "", false},
		{"", nil, false},
		{[]any{"a", int64(1)}, []any{"a", int64(1)}, true},
		{[]any{"a"}, []any{"a", "b"}, false},
		{[]any{"a"}, []any{"b"}, false},
		{[]any{"a"}, "a", false},
		{"a", []any{"a"}, false},
		{[]string{"a"}, []string{"a"}, true},
		{map[string]any{"a": 1}, map[string]any{"a": 2}, false},
	}
	for _, tt := range tests {
		if got, want := sameValue(tt.a, tt.b), tt.want; got != want {
			t.Fatalf("sameValue(%#v, %#v) = %v, want %v", tt.a, tt.b, got, want)
		}
	}
}
