package rules

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"dataservice/internal/clip"
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
	// outs are the fields the rule writes or removes, each once; shrinks is set for
	// field_keep, which removes fields it does not name. Apply bounds the entry's
	// size through them.
	outs    []string
	shrinks bool
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
	size := -1 // the entry's bytes (entryBytes) while they are followed, else -1
	var oldBuf [8]int
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
		var err error
		if r.shrinks {
			// Nothing to bound: the size is counted again at the next rule that adds,
			// a cost in proportion to field_keep's own.
			err, size = r.act(e, now), -1
		} else {
			err = actBounded(r, e, now, &size, &oldBuf)
		}
		if err != nil {
			return false, &RuleError{Pos: r.pos, Task: r.task, Err: err}
		}
		if r.touchesClass {
			if err := checkClassname(e, origClass, hadClass); err != nil {
				return false, fmt.Errorf("rule %d: %s: %w", r.pos, r.task, err)
			}
		}
	}
	return false, nil
}

// Bounds of what rules make of one entry, so that no pipeline can exhaust memory,
// whether it doubles a value (field_merge of a field with itself) or makes many
// fields (thousands of field_join into scratch fields). Past a bound the entry fails
// at the rule that crossed it. A rule that makes the entry smaller, or leaves it as
// it is, never fails on them: an entry that came in larger still gets through rules
// that do not add to it.
const (
	// MaxValueBytes bounds one value (a multi-valued field: its items' total).
	MaxValueBytes = 1 << 20
	// MaxEntryBytes bounds the whole entry: its field names and values, scratch
	// fields included.
	MaxEntryBytes = 16 << 20
	// MaxEntryFields bounds the number of fields of the entry, scratch fields and
	// classname, keyname, displayname and is_enabled included.
	MaxEntryFields = 1000
)

// valueBytes is what a value counts towards the bounds: the length of a text, 8 for
// a number or boolean, the sum of its items for a list.
func valueBytes(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case nil:
		return 0
	case []any:
		n := 0
		for _, it := range x {
			n += valueBytes(it)
		}
		return n
	}
	return 8
}

// fieldBytes is what field f of e counts towards MaxEntryBytes: 0 when absent.
func fieldBytes(e Entry, f string) int {
	v, ok := e[f]
	if !ok {
		return 0
	}
	return len(f) + valueBytes(v)
}

// entryBytes is the size of e as MaxEntryBytes counts it.
func entryBytes(e Entry) int {
	n := 0
	for k, v := range e {
		n += len(k) + valueBytes(v)
	}
	return n
}

// actBounded runs r, which writes only its outs, and refuses what it makes past the
// bounds. The sizes of the outs before and after it keep *size (the entry's bytes,
// -1 when not followed) current at a cost in proportion to the rule's own work: the
// whole entry is counted only when a rule adds bytes while *size is not followed.
func actBounded(r *rule, e Entry, now time.Time, size *int, buf *[8]int) error {
	old := buf[:0]
	if len(r.outs) > len(buf) {
		old = make([]int, 0, len(r.outs))
	}
	for _, f := range r.outs {
		old = append(old, fieldBytes(e, f))
	}
	nfields := len(e)
	if err := r.act(e, now); err != nil {
		return err
	}
	grew := false
	for i, f := range r.outs {
		n := fieldBytes(e, f)
		if *size >= 0 {
			*size += n - old[i]
		}
		if n > old[i] {
			grew = true
			if vb := n - len(f); vb > MaxValueBytes {
				return fmt.Errorf("field %s: the value grew to %d bytes (at most %d)", clip.Quote(f), vb, MaxValueBytes)
			}
		}
	}
	if grew {
		if *size < 0 {
			*size = entryBytes(e)
		}
		if *size > MaxEntryBytes {
			return fmt.Errorf("the entry grew to %d bytes (at most %d in all its fields)", *size, MaxEntryBytes)
		}
	}
	if n := len(e); n > nfields && n > MaxEntryFields {
		return fmt.Errorf("the entry grew to %d fields (at most %d)", n, MaxEntryFields)
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

func (e *ValueError) Error() string {
	return fmt.Sprintf("cannot convert %s to %s", clip.Quote(e.Value), e.Want)
}

// checkClassname reports an error when e's classname differs from orig.
func checkClassname(e Entry, orig any, had bool) error {
	cur, has := e[classnameKey]
	switch {
	case had && !has:
		return fmt.Errorf("field %q must not change: it was removed (was %s)", classnameKey, showValue(orig))
	case !had && has:
		return fmt.Errorf("field %q must not change: it was set to %s", classnameKey, showValue(cur))
	case had && !sameValue(orig, cur):
		return fmt.Errorf("field %q must not change: %s became %s", classnameKey, showValue(orig), showValue(cur))
	}
	return nil
}

// showValue is v as Go syntax (%#v, so "1" and 1 differ), cut to clip's bound.
func showValue(v any) string {
	if s, ok := v.(string); ok {
		return clip.Quote(s)
	}
	return clip.Text(fmt.Sprintf("%#v", v))
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
