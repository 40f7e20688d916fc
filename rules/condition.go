package rules

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"dataservice/internal/clip"
)

// MaxConditionBytes bounds the text of an event condition: one checker and its
// arguments, so a few kilobytes are plenty, and a rule matched on every watched write
// stays cheap to parse and to hold.
const MaxConditionBytes = 4096

// changedChecker is the checker only event conditions have: [changed, FIELD] holds
// when FIELD's value differs between the old and the new state.
const changedChecker = "changed"

// Condition is a compiled event condition: one checker of the rule language, written
// as in set_condition without the condition's name ([field_match, env, prod]), or
// [changed, FIELD]. A nil *Condition (no condition) always matches. It is immutable:
// Match may be called from several goroutines at once.
type Condition struct {
	check   check  // a set_condition checker, evaluated on one state
	changed string // the field [changed, FIELD] compares, when check is nil
	fields  []string
}

// ParseCondition compiles the text of an event condition, a YAML flow list such as
// `[field_match, env, prod]` or `[changed, owner]`. Empty text (or null, or an empty
// list) is no condition: nil and no error. Errors say what is wrong without the
// condition's name ("condition: unknown checker ...").
func ParseCondition(text string) (*Condition, error) {
	if len(text) > MaxConditionBytes {
		return nil, fmt.Errorf("condition: %d bytes is more than the %d a condition may have", len(text), MaxConditionBytes)
	}
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	seq, err := decodeCondition(text)
	if err != nil {
		return nil, fmt.Errorf("condition: %w", err)
	}
	if seq == nil || len(seq.Content) == 0 {
		return nil, nil
	}
	chk := seq.Content[0]
	if chk.Kind != yaml.ScalarNode || chk.ShortTag() != tagStr {
		return nil, errors.New("condition: the first item must be the checker's name (e.g. [field_match, env, prod] or [changed, owner])")
	}
	items := seq.Content[1:]
	a := &args{items: items}
	if chk.Value == changedChecker {
		if err := checkArity("condition: changed", 1, 1, len(items)); err != nil {
			return nil, err
		}
		f, err := a.name(0)
		if err != nil {
			return nil, fmt.Errorf("condition: changed: %w", err)
		}
		return &Condition{changed: f, fields: []string{f}}, nil
	}
	cs, ok := checkers[chk.Value]
	if !ok {
		return nil, fmt.Errorf("condition: unknown checker %s (expected changed, %s)", clip.Quote(chk.Value), checkerNames())
	}
	if err := checkArity("condition: "+chk.Value, cs.n, cs.n, len(items)); err != nil {
		return nil, err
	}
	fn, err := cs.build(a)
	if err != nil {
		return nil, fmt.Errorf("condition: %s: %w", chk.Value, err)
	}
	c := &Condition{check: fn}
	// The arguments that are field names: every one of the comparisons and of the
	// one-field checkers, the first of field_match (its second is the expression).
	n := len(items)
	if chk.Value == "field_match" {
		n = 1
	}
	for i := range n {
		if name, err := a.name(i); err == nil {
			c.fields = append(c.fields, name)
		}
	}
	return c, nil
}

// decodeCondition decodes a condition's text into its list node (nil for null or an
// empty document), refusing tags and aliases as pipeline content does.
func decodeCondition(text string) (*yaml.Node, error) {
	seq, err := decodeYAML(text)
	if err != nil {
		if errors.Is(err, errNotList) {
			return nil, errors.New("not a list: write the checker and its arguments as a list, e.g. [field_match, env, prod]")
		}
		return nil, err
	}
	if seq == nil {
		return nil, nil
	}
	if err := noAliases(seq); err != nil {
		return nil, err
	}
	if err := noTags(seq); err != nil {
		return nil, err
	}
	for i, n := range seq.Content {
		if n.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("item %d is %s, not a scalar", i+1, describe(n))
		}
	}
	return seq, nil
}

// checkerNames lists the set_condition checkers, sorted, for error messages.
func checkerNames() string {
	names := make([]string, 0, len(checkers))
	for n := range checkers {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Fields lists the field names the condition reads (nil for no condition), so a
// caller can refuse a condition over fields it must not look at (secrets).
func (c *Condition) Fields() []string {
	if c == nil {
		return nil
	}
	return append([]string(nil), c.fields...)
}

// Match reports whether the condition holds for a change from oldFields to
// newFields. A create has no old state (nil) and a delete no new state (nil): the
// checkers read the new state, or the old one for a delete; [changed, FIELD] holds
// when FIELD's value differs between the two (a missing field differs from a present
// one, so every field present on a create or a delete has changed). No condition
// (nil) always matches.
func (c *Condition) Match(newFields, oldFields map[string]any) bool {
	if c == nil {
		return true
	}
	if c.check == nil {
		nv, nok := newFields[c.changed]
		ov, ook := oldFields[c.changed]
		return nok != ook || !equalValues(nv, ov)
	}
	state := newFields
	if state == nil {
		state = oldFields
	}
	return c.check(Entry(state))
}

// equalValues reports whether two stored field values are the same value: numbers
// compare by value whatever their Go type (a stored JSON number may come back as
// int64 or float64), lists item by item.
func equalValues(a, b any) bool {
	if x, ok := numberOf(a); ok {
		y, ok := numberOf(b)
		return ok && x == y
	}
	if x, ok := a.([]any); ok {
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalValues(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return sameValue(a, b)
}

// numberOf reads a numeric Go value as a float64.
func numberOf(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	case float64:
		return x, !math.IsNaN(x)
	}
	return 0, false
}

// ConditionText is the stored text of a condition given as a list (a load's
// `condition: [field_match, env, prod]` or a JSON array): a YAML flow list of its
// items, each as text, which ParseCondition reads back as the same checker. An item
// that is not a scalar is refused.
func ConditionText(items []any) (string, error) {
	seq := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for i, it := range items {
		switch it.(type) {
		case []any, map[string]any:
			return "", fmt.Errorf("condition: item %d is not a scalar", i+1)
		}
		// Tagged as text: YAML quotes what would read back as a number, a boolean or null.
		seq.Content = append(seq.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: tagStr, Value: textOf(it)})
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	if err := enc.Encode(seq); err != nil {
		return "", fmt.Errorf("condition: %w", err)
	}
	if err := enc.Close(); err != nil {
		return "", fmt.Errorf("condition: %w", err)
	}
	return strings.TrimSpace(buf.String()), nil
}
