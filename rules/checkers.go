package rules

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"

	"dataservice/internal/clip"
)

// checkerSpec describes a set_condition checker.
type checkerSpec struct {
	n     int // number of arguments
	build func(a *args) (check, error)
}

// checkers is the table of set_condition checkers.
var checkers = map[string]checkerSpec{
	"field_match": {2, buildMatch},
	"eq":          {2, buildCompare(func(c int) bool { return c == 0 })},
	"ne":          {2, buildCompare(func(c int) bool { return c != 0 })},
	"lt":          {2, buildCompare(func(c int) bool { return c < 0 })},
	"le":          {2, buildCompare(func(c int) bool { return c <= 0 })},
	"gt":          {2, buildCompare(func(c int) bool { return c > 0 })},
	"ge":          {2, buildCompare(func(c int) bool { return c >= 0 })},
	"exists":      {1, buildExists},
	"empty":       {1, buildEmpty},
	"is_true":     {1, buildBool(true)},
	"is_false":    {1, buildBool(false)},
}

// compileRegexp compiles argument i of a as a regular expression.
func compileRegexp(a *args, i int) (*regexp.Regexp, error) {
	s, err := a.text(i)
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(s)
	if err != nil {
		var se *syntax.Error
		if errors.As(err, &se) {
			// Its text repeats the rest of the expression from the error on.
			return nil, fmt.Errorf("invalid regex: error parsing regexp: %s: `%s`", se.Code, clip.Text(se.Expr))
		}
		return nil, fmt.Errorf("invalid regex: %s", clip.Text(err.Error()))
	}
	return re, nil
}

// buildMatch: field_match FIELD REGEX is true when the value (or, for a
// multi-valued field, any item) matches REGEX.
func buildMatch(a *args) (check, error) {
	f, err := a.name(0)
	if err != nil {
		return nil, err
	}
	re, err := compileRegexp(a, 1)
	if err != nil {
		return nil, err
	}
	return func(e Entry) bool {
		v, ok := e[f]
		if !ok {
			return false
		}
		switch x := v.(type) {
		case string:
			return re.MatchString(x)
		case []any:
			for _, it := range x {
				if re.MatchString(textOf(it)) {
					return true
				}
			}
			return false
		default:
			return re.MatchString(textOf(v))
		}
	}, nil
}

// buildCompare builds the comparison checkers: FIELD1 FIELD2 compared with
// compareValues, false when either field is missing.
func buildCompare(ok func(c int) bool) func(a *args) (check, error) {
	return func(a *args) (check, error) {
		f1, err := a.name(0)
		if err != nil {
			return nil, err
		}
		f2, err := a.name(1)
		if err != nil {
			return nil, err
		}
		return func(e Entry) bool {
			v1, ok1 := e[f1]
			v2, ok2 := e[f2]
			return ok1 && ok2 && ok(compareValues(v1, v2))
		}, nil
	}
}

// compareValues compares two values as integers if both read as integers,
// else as floats if both read as (finite) floats, else as strings.
func compareValues(a, b any) int {
	if x, ok := intOf(a); ok {
		if y, ok := intOf(b); ok {
			return cmp3(x, y)
		}
	}
	if x, ok := floatOf(a); ok {
		if y, ok := floatOf(b); ok {
			return cmp3(x, y)
		}
	}
	return strings.Compare(textOf(a), textOf(b))
}

func cmp3[T int64 | float64](x, y T) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// intOf reads v as an integer: an int64, an integral float64 in range, or a
// string holding a base-10 integer (surrounding spaces ignored).
func intOf(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case float64:
		return floatToInt(x)
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		return n, err == nil
	case nil, bool, []any:
		return 0, false
	default:
		n, err := strconv.ParseInt(textOf(v), 10, 64)
		return n, err == nil
	}
}

// floatToInt converts an integral float64 in the int64 range.
func floatToInt(x float64) (int64, bool) {
	if x != math.Trunc(x) || x < -(1<<63) || x >= 1<<63 {
		return 0, false // also rejects NaN and infinities
	}
	return int64(x), true
}

// floatOf reads v as a finite float: a float64, an int64 or a string holding
// a number (surrounding spaces ignored).
func floatOf(v any) (float64, bool) {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case int64:
		return float64(x), true
	case string:
		var err error
		if f, err = strconv.ParseFloat(strings.TrimSpace(x), 64); err != nil {
			return 0, false
		}
	case nil, bool, []any:
		return 0, false
	default:
		var err error
		if f, err = strconv.ParseFloat(textOf(v), 64); err != nil {
			return 0, false
		}
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// buildExists: exists FIELD is true when the key is present.
func buildExists(a *args) (check, error) {
	f, err := a.name(0)
	if err != nil {
		return nil, err
	}
	return func(e Entry) bool {
		_, ok := e[f]
		return ok
	}, nil
}

// buildEmpty: empty FIELD is true when the field is missing, nil, an empty
// string or an empty list.
func buildEmpty(a *args) (check, error) {
	f, err := a.name(0)
	if err != nil {
		return nil, err
	}
	return func(e Entry) bool {
		switch x := e[f].(type) {
		case nil:
			return true
		case string:
			return x == ""
		case []any:
			return len(x) == 0
		}
		return false
	}, nil
}

// buildBool builds is_true (want=true) and is_false (want=false).
func buildBool(want bool) func(a *args) (check, error) {
	return func(a *args) (check, error) {
		f, err := a.name(0)
		if err != nil {
			return nil, err
		}
		return func(e Entry) bool {
			v, ok := e[f]
			if !ok {
				return false
			}
			b, ok := boolOf(v)
			return ok && b == want
		}, nil
	}
}

// boolOf reads v as a boolean: true for "true", "yes", "on" and "1", false
// for "false", "no", "off", "0" and "" (case-insensitive, spaces trimmed).
// nil reads as "" (false). Anything else is neither.
func boolOf(v any) (b, ok bool) {
	var s string
	switch x := v.(type) {
	case bool:
		return x, true
	case string:
		s = strings.TrimSpace(x)
	default:
		s = strings.TrimSpace(textOf(v))
	}
	switch {
	case s == "", s == "0", strings.EqualFold(s, "false"), strings.EqualFold(s, "no"), strings.EqualFold(s, "off"):
		return false, true
	case s == "1", strings.EqualFold(s, "true"), strings.EqualFold(s, "yes"), strings.EqualFold(s, "on"):
		return true, true
	}
	return false, false
}
