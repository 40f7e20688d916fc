package rules

import (
	"strings"
	"testing"
)

func TestParseEmpty(t *testing.T) {
	for _, content := range []string{"", "  \n", "# only a comment\n", "[]", "null", "~", "---\n[]\n", "---\n", "---\n---\n", "[]\n---\n"} {
		p := mustParse(t, content)
		if got, want := p.Len(), 0; got != want {
			t.Fatalf("Parse(%q).Len() = %d, want %d", content, got, want)
		}
		e := Entry{"a": "b"}
		discard, err := p.Apply(e, testNow)
		if err != nil || discard {
			t.Fatalf("Parse(%q).Apply = %v, %v; want false, nil", content, discard, err)
		}
		assertEntry(t, e, Entry{"a": "b"})
	}
}

func TestParseLen(t *testing.T) {
	content := `---
- field_lower: email
- set_condition: [c, exists, email]
- field_set: [c, x, 1]
- field_copy: [a, b]
- discard: c
`
	if got, want := mustParse(t, content).Len(), 5; got != want {
		t.Fatalf("Len() = %d, want %d", got, want)
	}
}

func TestNilPipeline(t *testing.T) {
	var p *Pipeline
	if got, want := p.Len(), 0; got != want {
		t.Fatalf("Len() = %d, want %d", got, want)
	}
	discard, err := p.Apply(Entry{}, testNow)
	if discard || err != nil {
		t.Fatalf("Apply = %v, %v; want false, nil", discard, err)
	}
}

func TestApplyNilEntry(t *testing.T) {
	_, err := mustParse(t, "- field_set: ['', a, b]").Apply(nil, testNow)
	if got, want := errString(err), "rules: nil entry"; got != want {
		t.Fatalf("Apply(nil) error = %q, want %q", got, want)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string // the exact error, or its prefix when it ends with "..."
	}{
		{"mapping", "a: b", "content is not a list of rules"},
		{"scalar", "42", "content is not a list of rules"},
		{"string", "'- field_lower: a'", "content is not a list of rules"},
		{"yaml syntax", "- [a", "invalid YAML: yaml: ..."},
		{"two documents", "- field_noop:\n---\n- field_noop:\n", "content must be a single YAML document"},
		{"empty then list", "---\n---\n- field_noop:\n", "content must be a single YAML document"},
		{"bad second document", "- field_noop:\n---\n[", "invalid YAML: yaml: ..."},
		{"alias document", "--- &a []\n--- *a\n", "content must be a single YAML document"},
		{"unknown alias", "*a", "invalid YAML: ..."},
		{"unknown rule", "- field_noop:\n- field_noop: ''\n- field_foo: x", `rule 3: unknown rule "field_foo"`},
		{"unknown rule set_conditions", "- set_conditions: [a, exists, b]", `rule 1: unknown rule "set_conditions"`},
		{"not a mapping", "- field_noop", "rule 1: rule is not a one-key mapping..."},
		{"list rule", "- [field_lower, a]", "rule 1: rule is not a one-key mapping..."},
		{"two keys", "- {field_lower: a, field_upper: b}", "rule 1: rule is not a one-key mapping..."},
		{"empty mapping", "- {}", "rule 1: rule is not a one-key mapping..."},
		{"rule name not a string", "- 5: a", "rule 1: rule name is not a string"},
		{"arguments mapping", "- field_lower: {a: b}", "rule 1: field_lower: arguments must be a list or a scalar"},

		{"copy too many", "- field_lower: a\n- field_copy: ['', a, b, c]", "rule 2: field_copy takes 2 arguments, got 3"},
		{"copy too few", "- field_copy: ['']", "rule 1: field_copy takes 2 arguments, got 0"},
		{"copy scalar", "- field_copy: a", "rule 1: field_copy takes 2 arguments, got 1"},
		{"copy condition and one argument", "- field_copy: ['', a]", "rule 1: field_copy takes 2 arguments, got 1"},
		{"rename too many", "- field_rename: ['', a, b, c]", "rule 1: field_rename takes 2 arguments, got 3"},
		{"regexp_sub too few", "- field_regexp_sub: [a, b]", "rule 1: field_regexp_sub takes 3 arguments, got 1"},
		{"set scalar", "- field_set: a", "rule 1: field_set takes 2 arguments, got 1"},
		{"set too many", "- field_set: ['', a, b, c]", "rule 1: field_set takes 2 arguments, got 3"},
		{"lower no fields", "- field_lower: ['']", "rule 1: field_lower takes at least 1 argument, got 0"},
		{"lower null", "- field_lower:", "rule 1: field_lower takes at least 1 argument, got 0"},
		{"lower empty list", "- field_lower: []", "rule 1: field_lower takes at least 1 argument, got 0"},
		{"merge too few", "- field_merge: ['', a, b]", "rule 1: field_merge takes 3 or 4 arguments, got 2"},
		{"merge too many", "- field_merge: ['', a, b, c, d, e]", "rule 1: field_merge takes 3 or 4 arguments, got 5"},
		{"join too few", "- field_join: ['', a, ',']", "rule 1: field_join takes at least 3 arguments, got 2"},
		{"md5 too few", "- field_md5: ['', a]", "rule 1: field_md5 takes at least 2 arguments, got 1"},
		{"datetime without condition", "- field_datetime: [d, 'now()']", "rule 1: field_datetime takes 2 arguments, got 1"},
		{"datetime too few", "- field_datetime: ['', a]", "rule 1: field_datetime takes 2 arguments, got 1"},
		{"discard with argument", "- discard: ['', x]", "rule 1: discard takes no arguments, got 1"},
		{"noop with argument", "- field_noop: ['', x]", "rule 1: field_noop takes no arguments, got 1"},

		{"int field name", "- field_lower: ['', 5]", `rule 1: field_lower: argument 1: !!int "5" is not a field name (a non-empty string)`},
		{"empty field name", "- field_lower: ['', a, '']", `rule 1: field_lower: argument 2: !!str "" is not a field name (a non-empty string)`},
		{"list field name", "- field_delete: ['', [a]]", "rule 1: field_delete: argument 1: a list is not a field name (a non-empty string)"},
		{"scalar int field name", "- field_lower: 5", `rule 1: field_lower: argument 1: !!int "5" is not a field name (a non-empty string)`},
		{"null field name", "- field_copy: [a, ~]", `rule 1: field_copy: argument 2: !!null "~" is not a field name (a non-empty string)`},
		{"list text", "- field_append: ['', a, [b]]", "rule 1: field_append: argument 2: a list is not a scalar"},
		{"nested list value", "- field_set: ['', a, [[b]]]", "rule 1: field_set: argument 2: a list value may only hold scalars"},
		{"mapping value", "- field_set: ['', a, {b: c}]", "rule 1: field_set: argument 2: a mapping is not a value"},

		{"int condition", "- field_lower: [5, a]", `rule 1: field_lower: the condition must be a string, got !!int "5"`},
		{"list condition", "- field_lower: [[c], a]", "rule 1: field_lower: the condition must be a string"},
		{"bare bang condition", "- field_lower: ['!', a]", `rule 1: field_lower: invalid condition "!"`},
		{"double bang condition", "- field_lower: ['!!c', a]", `rule 1: field_lower: invalid condition "!!c"`},
		{"scalar discard int", "- discard: 5", `rule 1: discard: the condition must be a string, got !!int "5"`},

		// YAML tags: an unquoted `!NAME` gate is a tag, which YAML drops from the value.
		{"tag gate flow comma", "- set_condition: [is_prod, exists, env]\n- field_delete: [!is_prod, env]", `rule 2: line 2: YAML tag "!is_prod," is not allowed: quote the condition, e.g. '!is_prod'`},
		{"tag gate with space", "- set_condition: [is_prod, exists, env]\n- field_delete: [!is_prod , env]", `rule 2: line 2: YAML tag "!is_prod" is not allowed: quote the condition, e.g. '!is_prod'`},
		{"tag gate block list", "- set_condition: [is_prod, exists, env]\n- field_delete:\n  - !is_prod\n  - env", `rule 2: line 3: YAML tag "!is_prod" is not allowed: quote the condition, e.g. '!is_prod'`},
		{"tag gate of discard", "- set_condition: [c, exists, a]\n- discard: !c", `rule 2: line 2: YAML tag "!c" is not allowed: quote the condition, e.g. '!c'`},
		{"tag with value", "- field_lower: [!c x, a]", `rule 1: line 1: YAML tag "!c" is not allowed: quote the condition, e.g. '!c'`},
		{"tag of a set_condition name", "- set_condition: [!c , exists, a]", `rule 1: line 1: YAML tag "!c" is not allowed: quote the condition, e.g. '!c'`},
		{"tag of a rule name", "- !x field_noop: ''", `rule 1: line 1: YAML tag "!x" is not allowed: quote the condition, e.g. '!x'`},
		{"tag of a rule", "- !x {field_noop: ''}", `rule 1: line 1: YAML tag "!x" is not allowed: quote the condition, e.g. '!x'`},
		{"standard tag", "- field_noop:\n- field_set: ['', a, !!str 5]", `rule 2: line 2: YAML tag "!!str" is not allowed: remove it (quote a value that must stay text)`},
		{"tag of the list", "!x\n- field_noop: ''", `line 1: YAML tag "!x" is not allowed: quote the condition, e.g. '!x'`},

		// A gate names a condition the pipeline sets.
		{"unknown condition", "- set_condition: [is_prod, exists, env]\n- field_delete: [is_prdo, env]", `rule 2: field_delete: unknown condition "is_prdo": no set_condition of the pipeline sets it`},
		{"unknown negated condition", "- field_noop:\n- field_delete: ['!is_prod', env]", `rule 2: field_delete: unknown condition "is_prod": no set_condition of the pipeline sets it`},
		{"unknown condition of discard", "- discard: gone", `rule 1: discard: unknown condition "gone": no set_condition of the pipeline sets it`},
		{"unknown condition of set_condition's own gate", "- set_condition: [a, exists, x]\n- field_copy: [b, x, y]", `rule 2: field_copy: unknown condition "b": no set_condition of the pipeline sets it`},

		{"bad regex", "- field_lower: a\n- field_upper: a\n- field_noop:\n- field_regexp_sub: ['', a, '(', x]", "rule 4: field_regexp_sub: invalid regex: error parsing regexp: missing closing ): `(`"},
		{"bad regex old form", "- field_regexp_sub: [a, '[z-a]', x]", "rule 1: field_regexp_sub: invalid regex: error parsing regexp: invalid character class range: `z-a`"},
		{"bad regex field_match", "- set_condition: [c, field_match, a, '*']", "rule 1: set_condition: field_match: invalid regex: error parsing regexp: missing argument to repetition operator: `*`"},

		{"datetime no now", "- field_datetime: ['', d, yesterday]", `rule 1: field_datetime: invalid expression "yesterday": it must start with "now()"`},
		{"datetime now without parens", "- field_datetime: ['', d, 'now -1day']", `rule 1: field_datetime: invalid expression "now -1day": it must start with "now()"`},
		{"datetime unknown unit", "- field_datetime: ['', d, 'now() -2 fortnight']", `rule 1: field_datetime: invalid expression "now() -2 fortnight": unknown unit "fortnight" (want year, month, week, day, hour, minute or second)`},
		{"datetime no sign", "- field_datetime: ['', d, 'now() 3day']", `rule 1: field_datetime: invalid expression "now() 3day": expected + or - at "3day"`},
		{"datetime no number", "- field_datetime: ['', d, 'now() -day']", `rule 1: field_datetime: invalid expression "now() -day": expected a number at "day"`},
		{"datetime no unit", "- field_datetime: ['', d, 'now() -3']", `rule 1: field_datetime: invalid expression "now() -3": expected a unit after 3`},
		{"datetime too large", "- field_datetime: ['', d, 'now() +99999999999999999999day']", `rule 1: field_datetime: invalid expression "now() +99999999999999999999day": offset 99999999999999999999 is too large (at most 1000000)`},
		{"datetime trailing junk", "- field_datetime: ['', d, 'now() -1day!']", `rule 1: field_datetime: invalid expression "now() -1day!": expected + or - at "!"`},

		{"alias rule value", "- field_set: &a ['', x, y]\n- field_set: *a", "rule 2: aliases are not allowed"},
		{"alias argument", "- field_set: ['', x, &v y]\n- field_set: ['', z, *v]", "rule 2: aliases are not allowed"},
		{"alias rule", "- &r {field_noop: ''}\n- *r", "rule 2: aliases are not allowed"},
		{"merge key", "- &r {field_noop: ''}\n- <<: *r", "rule 2: aliases are not allowed"},
		{"alias rule name", "- &n field_noop: ''\n- *n : ''", "rule 2: aliases are not allowed"},

		{"set_condition scalar", "- set_condition: c", "rule 1: set_condition needs a list [NAME, CHECKER, ARGS...]"},
		{"set_condition short", "- set_condition: [c]", "rule 1: set_condition needs a list [NAME, CHECKER, ARGS...]"},
		{"set_condition empty name", "- set_condition: ['', exists, a]", "rule 1: set_condition: the condition name must be a non-empty string"},
		{"set_condition negated name", "- set_condition: ['!c', exists, a]", `rule 1: set_condition: invalid condition name "!c": it must not start with '!'`},
		{"set_condition checker not a string", "- set_condition: [c, [eq], a, b]", "rule 1: set_condition: the checker name must be a string"},
		{"unknown checker", "- set_condition: [c, contains, a, b]", `rule 1: set_condition: unknown checker "contains"`},
		{"checker arity", "- set_condition: [c, eq, a]", "rule 1: set_condition: eq takes 2 arguments, got 1"},
		{"checker arity exists", "- set_condition: [c, exists, a, b]", "rule 1: set_condition: exists takes 1 argument, got 2"},
		{"checker field name", "- set_condition: [c, empty, 3]", `rule 1: set_condition: empty: argument 1: !!int "3" is not a field name (a non-empty string)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse(tt.content)
			if err == nil {
				t.Fatalf("Parse(%q) = %d rules, want error %q", tt.content, p.Len(), tt.want)
			}
			if p != nil {
				t.Fatalf("Parse(%q) returned a pipeline with its error", tt.content)
			}
			got := err.Error()
			if prefix, ok := strings.CutSuffix(tt.want, "..."); ok {
				if !strings.HasPrefix(got, prefix) {
					t.Fatalf("Parse(%q) error = %q, want prefix %q", tt.content, got, prefix)
				}
				return
			}
			if got != tt.want {
				t.Fatalf("Parse(%q) error = %q, want %q", tt.content, got, tt.want)
			}
		})
	}
}

// TestParseForms checks that the scalar, short and full forms of a rule
// compile to the same behaviour.
func TestParseForms(t *testing.T) {
	in := Entry{"a": "Hello World", "b": "x"}
	tests := []struct {
		name    string
		content string
		want    Entry
	}{
		{"scalar", "- field_lower: a", Entry{"a": "hello world", "b": "x"}},
		{"full", "- field_lower: ['', a]", Entry{"a": "hello world", "b": "x"}},
		{"null condition", "- field_lower: [~, a]", Entry{"a": "hello world", "b": "x"}},
		{"block list", "- field_lower:\n  - ''\n  - a\n  - b", Entry{"a": "hello world", "b": "x"}},
		{"copy short", "- field_copy: [a, c]", Entry{"a": "Hello World", "b": "x", "c": "Hello World"}},
		{"copy full", "- field_copy: ['', a, c]", Entry{"a": "Hello World", "b": "x", "c": "Hello World"}},
		{"rename short", "- field_rename: [a, c]", Entry{"b": "x", "c": "Hello World"}},
		{"rename full", "- field_rename: ['', a, c]", Entry{"b": "x", "c": "Hello World"}},
		{"regexp_sub short", "- field_regexp_sub: [a, 'o', '0']", Entry{"a": "Hell0 W0rld", "b": "x"}},
		{"regexp_sub full", "- field_regexp_sub: ['', a, 'o', '0']", Entry{"a": "Hell0 W0rld", "b": "x"}},
		{"discard null", "- field_noop:\n- field_noop: []\n- field_noop: ''\n- field_noop: ['']", Entry{"a": "Hello World", "b": "x"}},
		{"document start", "---\n- field_upper: b\n...\n", Entry{"a": "Hello World", "b": "X"}},
		{"trailing empty document", "- field_upper: b\n---\n# end\n", Entry{"a": "Hello World", "b": "X"}},
		{"unquoted numbers are text", "- field_append: ['', b, 5]\n- field_prefix: ['', b, true]", Entry{"a": "Hello World", "b": "truex5"}},
		{"null text", "- field_append: ['', b, ~]", Entry{"a": "Hello World", "b": "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertEntry(t, mustApply(t, tt.content, in), tt.want)
		})
	}
}
