package rules

import (
	"strings"
	"testing"
)

func TestConditionMatch(t *testing.T) {
	prod := map[string]any{"env": "prod", "owner": "ann", "n": int64(3), "tags": []any{"a", "b"}}
	dev := map[string]any{"env": "dev", "owner": "ann", "n": float64(3), "tags": []any{"a", "b"}}
	cases := []struct {
		name, text string
		new, old   map[string]any
		want       bool
	}{
		{"no condition matches", "", prod, nil, true},
		{"null is no condition", "null", prod, nil, true},
		{"field_match on the new state", "[field_match, env, '^prod$']", prod, dev, true},
		{"field_match fails on the new state", "[field_match, env, '^prod$']", dev, prod, false},
		{"delete reads the old state", "[field_match, env, '^prod$']", nil, prod, true},
		{"exists", "[exists, owner]", prod, nil, true},
		{"empty", "[empty, missing]", prod, nil, true},
		{"changed when the value differs", "[changed, env]", prod, dev, true},
		{"not changed when equal", "[changed, owner]", prod, dev, false},
		{"a number is the same whatever its type", "[changed, n]", prod, dev, false},
		{"a list the same item by item", "[changed, tags]", prod, dev, false},
		{"a list item changed", "[changed, tags]", map[string]any{"tags": []any{"a"}}, dev, true},
		{"a field added has changed", "[changed, extra]", map[string]any{"extra": "x"}, dev, true},
		{"a create changes every present field", "[changed, env]", prod, nil, true},
		{"a create does not change an absent field", "[changed, absent]", prod, nil, false},
		{"a delete changes every present field", "[changed, env]", nil, prod, true},
		{"block list form", "- is_true\n- flag\n", map[string]any{"flag": "yes"}, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cond, err := ParseCondition(c.text)
			if err != nil {
				t.Fatalf("ParseCondition(%q): %v", c.text, err)
			}
			if got := cond.Match(c.new, c.old); got != c.want {
				t.Fatalf("Match = %v, want %v", got, c.want)
			}
		})
	}
}

func TestConditionRefusals(t *testing.T) {
	cases := []struct{ text, want string }{
		{"field_match", "not a list"},
		{"{a: b}", "not a list"},
		{"[nope, a]", `unknown checker "nope" (expected changed, empty, eq,`},
		{"[changed]", "condition: changed takes 1 argument, got 0"},
		{"[changed, a, b]", "condition: changed takes 1 argument, got 2"},
		{"[field_match, env]", "condition: field_match takes 2 arguments, got 1"},
		{"[field_match, env, '(']", "invalid regex"},
		{"[exists, 5]", "not a field name"},
		{"[exists, [a]]", "item 2 is a list, not a scalar"},
		{"[!is_true, a]", "YAML tag"},
		{"[&x exists, *x]", "aliases are not allowed"},
		{"[5, a]", "the first item must be the checker's name"},
		{"[a, b", "invalid YAML"},
		{"[exists, " + strings.Repeat("a", MaxConditionBytes) + "]", "more than the 4096"},
	}
	for _, c := range cases {
		_, err := ParseCondition(c.text)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseCondition(%.40q) = %v, want an error containing %q", c.text, err, c.want)
			continue
		}
		if !strings.HasPrefix(err.Error(), "condition: ") {
			t.Errorf("ParseCondition(%.40q) = %v, want it to start with \"condition: \"", c.text, err)
		}
	}
}

func TestConditionText(t *testing.T) {
	text, err := ConditionText([]any{"field_match", "env", "^prod$"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "[field_match, env, ^prod$]"; text != want {
		t.Fatalf("ConditionText = %q, want %q", text, want)
	}
	// Items that would read back as other scalars stay text.
	text, err = ConditionText([]any{"field_match", "n", int64(5)})
	if err != nil {
		t.Fatal(err)
	}
	cond, err := ParseCondition(text)
	if err != nil {
		t.Fatalf("ParseCondition(%q): %v", text, err)
	}
	if !cond.Match(map[string]any{"n": "5"}, nil) || cond.Match(map[string]any{"n": "4"}, nil) {
		t.Fatalf("%q does not read back as field_match n 5", text)
	}
	if got := cond.Fields(); len(got) != 1 || got[0] != "n" {
		t.Fatalf("Fields = %v, want [n]", got)
	}
	if _, err := ConditionText([]any{"exists", []any{"a"}}); err == nil {
		t.Fatal("a nested list was accepted")
	}
}

func TestConditionFields(t *testing.T) {
	for text, want := range map[string]string{
		"[eq, a, b]":           "a,b",
		"[changed, c]":         "c",
		"[field_match, d, x+]": "d",
		"":                     "",
	} {
		cond, err := ParseCondition(text)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(cond.Fields(), ","); got != want {
			t.Errorf("Fields(%q) = %q, want %q", text, got, want)
		}
	}
}
