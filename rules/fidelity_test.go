package rules

import (
	"strings"
	"testing"
)

// Values in a pipeline's content keep their source text unless it is the canonical
// text of the number or boolean YAML reads (a string field then gets what the
// pipeline says; typed fields parse the text).
func TestValuesKeepSourceText(t *testing.T) {
	tests := []struct {
		value string
		want  any
	}{
		{"1e3", "1e3"},
		{"1.5e3", "1.5e3"},
		{"0.1e1", "0.1e1"},
		{"0o17", "0o17"},
		{"0x1F", "0x1F"},
		{"0815", "0815"},
		{"1.50", "1.50"},
		{"1_000", "1_000"},
		{"True", "True"},
		{"'5'", "5"},
		{"5", int64(5)},
		{"-5", int64(-5)},
		{"1.5", 1.5},
		{"true", true},
		{"[1e3, 7]", []any{"1e3", int64(7)}},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			assertEntry(t, mustApply(t, "- field_set: ['', a, "+tt.value+"]", Entry{}), Entry{"a": tt.want})
		})
	}
	t.Run("append and prefix use the text too", func(t *testing.T) {
		e := mustApply(t, "- field_append: ['', a, 1e3]\n- field_prefix: ['', a, 0o17]", Entry{"a": "x"})
		assertEntry(t, e, Entry{"a": "0o17x1e3"})
	})
}

// field_add (the reference's 3.15 rule) sets each field to the empty string.
func TestFieldAdd(t *testing.T) {
	tests := []struct {
		name    string
		content string
		in      Entry
		want    Entry
	}{
		{"scalar form", "- field_add: test", Entry{"a": "A"}, Entry{"a": "A", "test": ""}},
		{"list form", "- field_add: ['', x, y]", Entry{}, Entry{"x": "", "y": ""}},
		{"replaces a value", "- field_add: ['', a]", Entry{"a": "A"}, Entry{"a": ""}},
		{"gated", "- set_condition: [c, exists, nope]\n- field_add: [c, x]", Entry{}, Entry{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertEntry(t, mustApply(t, tt.content, tt.in), tt.want)
		})
	}
	if _, err := Parse("- field_add: ['']"); err == nil || !strings.Contains(err.Error(), "field_add") {
		t.Fatalf("field_add without a field: error %v, want one naming field_add", err)
	}
}

// field_upper and field_lower use full Unicode case mapping.
func TestCaseMapping(t *testing.T) {
	tests := []struct {
		rule, in, want string
	}{
		{"field_upper", "Straße", "STRASSE"},
		{"field_upper", "ﬁle", "FILE"},
		{"field_upper", "ǆemal", "ǄEMAL"},
		{"field_upper", "hello", "HELLO"},
		{"field_lower", "ΟΔΟΣ", "οδος"},
		{"field_lower", "HELLO", "hello"},
		{"field_lower", "ÀÉÎ", "àéî"},
	}
	for _, tt := range tests {
		t.Run(tt.rule+" "+tt.in, func(t *testing.T) {
			e := mustApply(t, "- "+tt.rule+": a", Entry{"a": tt.in, "l": []any{tt.in, "x"}})
			assertEntry(t, e, Entry{"a": tt.want, "l": []any{tt.in, "x"}})
			e = mustApply(t, "- "+tt.rule+": l", Entry{"l": []any{tt.in}})
			assertEntry(t, e, Entry{"l": []any{tt.want}})
		})
	}
}

// `- discard: c` (a scalar) is a gate, exactly like `- discard: [c]`.
func TestDiscardScalarIsAGate(t *testing.T) {
	tests := []struct {
		name, rule string
		flag       string
		discarded  bool
	}{
		{"scalar gate true", "- discard: c", "yes", true},
		{"scalar gate false", "- discard: c", "no", false},
		{"list gate true", "- discard: [c]", "yes", true},
		{"list gate false", "- discard: [c]", "no", false},
		{"scalar negated", "- discard: '!c'", "no", true},
		{"empty string always", "- discard: ''", "no", true},
		{"no value always", "- discard:", "no", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			content := "- set_condition: [c, is_true, flag]\n" + tt.rule + "\n- field_set: ['', after, x]"
			e := Entry{"flag": tt.flag}
			discard, err := mustParse(t, content).Apply(e, testNow)
			if err != nil {
				t.Fatal(err)
			}
			if discard != tt.discarded {
				t.Fatalf("discarded = %v, want %v", discard, tt.discarded)
			}
			if _, ran := e["after"]; ran == discard {
				t.Fatalf("rules after discard ran = %v, discarded = %v", ran, discard)
			}
		})
	}
	if _, err := Parse("- discard: [c, extra]"); err == nil {
		t.Fatal("discard with an argument after its gate was accepted")
	}
}

// field_keep keeps the identity keys and every key starting with "_" (scratch space,
// _action included) besides the fields it names.
func TestFieldKeepKeepsUnderscoreKeys(t *testing.T) {
	e := mustApply(t, "- field_keep: ['', a]", Entry{"classname": "c", "keyname": "k", "displayname": "d",
		"is_enabled": true, "_action": "delete", "_tmp": "x", "a": "A", "b": "B"})
	assertEntry(t, e, Entry{"classname": "c", "keyname": "k", "displayname": "d", "is_enabled": true,
		"_action": "delete", "_tmp": "x", "a": "A"})
}
