package rules

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Entry is one record: the keys "classname", "keyname", "displayname",
// "is_enabled", "_action" and field values.
//
// Values are string, int64, float64, bool, nil, or []any of those (a
// multi-valued field). Rules never modify a []any in place: a transformed
// multi-valued field gets a new slice, so slices may be shared between
// entries.
type Entry map[string]any

// Pipeline is parsed content: a compiled list of rules.
type Pipeline struct {
	rules  []rule
	nconds int // number of distinct condition names
}

// ruleKind tells Apply what a compiled rule does.
type ruleKind uint8

const (
	kindAction    ruleKind = iota // run action
	kindCondition                 // set condition cond to check(e)
	kindDiscard                   // drop the entry
	kindNoop                      // do nothing
)

// action is a compiled transformation. It returns an error when the entry
// cannot be transformed (for instance a value that does not convert).
type action func(e Entry, now time.Time) error

// check is a compiled condition checker.
type check func(e Entry) bool

// rule is one compiled rule.
type rule struct {
	pos  int    // 1-based position in the content
	task string // rule name, for error messages
	kind ruleKind

	gate    int  // index of the gating condition, -1 when always run
	negated bool // run when the gating condition is false

	act   action // kindAction
	cond  int    // kindCondition: index of the condition written
	check check  // kindCondition

	// touchesClass is set when the rule names the "classname" field, so
	// Apply must verify afterwards that classname did not change.
	touchesClass bool
	// grows is set for rules whose output Apply bounds (spec.grows).
	grows bool
}

// classnameKey is the field that rules may not change.
const classnameKey = "classname"

// condStack is the number of conditions Apply keeps on the stack; pipelines
// with more distinct conditions allocate.
const condStack = 64

// Len is the number of rules.
func (p *Pipeline) Len() int {
	if p == nil {
		return 0
	}
	return len(p.rules)
}

// Apply runs the rules over e in place. It returns discard=true as soon as a
// discard rule fires; the rules after it are not run. now is the clock used
// by the date and time rules.
//
// Conditions start false for every call. A per-entry failure, such as a
// value that does not convert or a rule that changes "classname", stops the
// run and returns an error naming the rule position and field; e may then
// be partially transformed and the caller is expected to drop it.
func (p *Pipeline) Apply(e Entry, now time.Time) (discard bool, err error) {
	if p == nil || len(p.rules) == 0 {
		return false, nil
	}
	if e == nil {
		return false, errors.New("rules: nil entry")
	}
	var buf [condStack]bool
	var conds []bool
	if p.nconds <= len(buf) {
		conds = buf[:p.nconds]
	} else {
		conds = make([]bool, p.nconds)
	}
	origClass, hadClass := e[classnameKey]
	for i := range p.rules {
		r := &p.rules[i]
		if r.gate >= 0 && conds[r.gate] == r.negated {
			continue
		}
		switch r.kind {
		case kindCondition:
			conds[r.cond] = r.check(e)
			continue
		case kindDiscard:
			return true, nil
		case kindNoop:
			continue
		}
		if err := r.act(e, now); err != nil {
			return false, &RuleError{Pos: r.pos, Task: r.task, Err: err}
		}
		if r.grows {
			if err := checkSizes(e); err != nil {
				return false, &RuleError{Pos: r.pos, Task: r.task, Err: err}
			}
		}
		if r.touchesClass {
			if err := checkClassname(e, origClass, hadClass); err != nil {
				return false, fmt.Errorf("rule %d: %s: %w", r.pos, r.task, err)
			}
		}
	}
	return false, nil
}

// MaxValueBytes bounds a value a rule produces (a multi-valued field: its items'
// total): past it the entry fails, so rules that double a value cannot exhaust memory.
const MaxValueBytes = 1 << 20

// checkSizes refuses an entry holding a value larger than MaxValueBytes.
func checkSizes(e Entry) error {
	for k, v := range e {
		n := 0
		switch x := v.(type) {
		case string:
			n = len(x)
		case []any:
			for _, it := range x {
				if s, ok := it.(string); ok {
					n += len(s)
				}
			}
		}
		if n > MaxValueBytes {
			return fmt.Errorf("field %q: the value grew to %d bytes (at most %d)", k, n, MaxValueBytes)
		}
	}
	return nil
}

// RuleError is a rule's failure on one entry.
type RuleError struct {
	Pos  int
	Task string
	Err  error
}

func (e *RuleError) Error() string { return fmt.Sprintf("rule %d: %s: %v", e.Pos, e.Task, e.Err) }

func (e *RuleError) Unwrap() error { return e.Err }

// Redacted is the message without any value the rule quoted: callers show it for
// entries whose fields may hold secrets (a rule may have copied one anywhere).
func (e *RuleError) Redacted() string {
	msg := e.Error()
	var ve *ValueError
	if errors.As(e.Err, &ve) {
		full := ve.Error()
		if i := strings.LastIndex(msg, full); i >= 0 {
			msg = msg[:i] + "cannot convert the value to " + ve.Want + " (value not shown)" + msg[i+len(full):]
		}
	}
	return msg
}

// ValueError is a value a rule cannot convert; its message quotes the value.
type ValueError struct {
	Value string
	Want  string
}

func (e *ValueError) Error() string { return fmt.Sprintf("cannot convert %q to %s", e.Value, e.Want) }

// checkClassname reports an error when e's classname differs from orig.
func checkClassname(e Entry, orig any, had bool) error {
	cur, has := e[classnameKey]
	switch {
	case had && !has:
		return fmt.Errorf("field %q must not change: it was removed (was %#v)", classnameKey, orig)
	case !had && has:
		return fmt.Errorf("field %q must not change: it was set to %#v", classnameKey, cur)
	case had && !sameValue(orig, cur):
		return fmt.Errorf("field %q must not change: %#v became %#v", classnameKey, orig, cur)
	}
	return nil
}

// sameValue reports whether a and b are the same field value. Unlike ==, it
// does not panic on multi-valued fields.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case string, int64, float64, bool:
		return a == b // a is comparable, so this cannot panic
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(a, b)
	}
}

// textOf is the text of a value as used by string rules: int64, float64 and
// bool are formatted with strconv, nil is "" and a multi-valued field is its
// items' text joined by ",".
func textOf(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case []any:
		switch len(x) {
		case 0:
			return ""
		case 1:
			return textOf(x[0])
		}
		var b strings.Builder
		for i, it := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(textOf(it))
		}
		return b.String()
	case int:
		return strconv.Itoa(x)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case float32:
		return strconv.FormatFloat(float64(x), 'f', -1, 32)
	default:
		return fmt.Sprint(v)
	}
}
