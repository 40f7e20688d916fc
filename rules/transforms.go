package rules

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"golang.org/x/text/cases"
	"golang.org/x/text/language"

	"dataservice/internal/clip"
)

// specs is the table of transformation rules (set_condition is separate).
var specs = map[string]spec{
	"field_noop":         {min: 0, max: 0, kind: kindNoop},
	"discard":            {min: 0, max: 0, kind: kindDiscard},
	"field_set":          {min: 2, max: 2, build: buildSet},
	"field_copy":         {min: 2, max: 2, oldForm: true, build: buildCopy(false)},
	"field_rename":       {min: 2, max: 2, oldForm: true, build: buildCopy(true)},
	"field_delete":       {min: 1, max: -1, build: buildDelete},
	"field_keep":         {min: 1, max: -1, build: buildKeep},
	"field_add":          {min: 1, max: -1, build: buildAdd},
	"field_lower":        {min: 1, max: -1, build: buildText(lowerText)},
	"field_upper":        {min: 1, max: -1, build: buildText(upperText)},
	"field_nospace":      {min: 1, max: -1, build: buildText(noSpace)},
	"field_toint":        {min: 1, max: -1, build: buildConvert(toInt)},
	"field_tofloat":      {min: 1, max: -1, build: buildConvert(toFloat)},
	"field_tostring":     {min: 1, max: -1, build: buildConvert(toString)},
	"field_regexp_sub":   {min: 3, max: 3, oldForm: true, build: buildRegexpSub},
	"field_append":       {min: 2, max: 2, build: buildAffix(false)},
	"field_prefix":       {min: 2, max: 2, build: buildAffix(true)},
	"field_merge":        {min: 3, max: 4, build: buildMerge},
	"field_join":         {min: 3, max: -1, build: buildJoin},
	"field_md5":          {min: 2, max: -1, build: buildMD5},
	"field_uuid":         {min: 1, max: -1, build: buildUUID},
	"field_date_now":     {min: 1, max: -1, build: buildNow(dateLayout)},
	"field_time_now":     {min: 1, max: -1, build: buildNow(timeLayout)},
	"field_datetime_now": {min: 1, max: -1, build: buildNow(dateTimeLayout)},
	"field_datetime":     {min: 2, max: 2, build: buildDatetime},
}

// Layouts of the date and time rules.
const (
	dateLayout     = "2006-01-02"
	timeLayout     = "15:04:05"
	dateTimeLayout = "2006-01-02 15:04:05"
)

// buildSet: field_set FIELD VALUE.
func buildSet(a *args) (action, error) {
	f, err := a.out(0)
	if err != nil {
		return nil, err
	}
	v, err := a.value(1)
	if err != nil {
		return nil, err
	}
	if list, ok := v.([]any); ok {
		// Each entry gets its own copy so that callers may modify it.
		return func(e Entry, _ time.Time) error {
			e[f] = slices.Clone(list)
			return nil
		}, nil
	}
	return func(e Entry, _ time.Time) error {
		e[f] = v
		return nil
	}, nil
}

// buildCopy: field_copy SRC DST (move=false) and field_rename SRC DST
// (move=true). A missing SRC sets DST to "".
func buildCopy(move bool) func(a *args) (action, error) {
	return func(a *args) (action, error) {
		src, err := a.name(0)
		if err != nil {
			return nil, err
		}
		dst, err := a.out(1)
		if err != nil {
			return nil, err
		}
		if move {
			_, _ = a.out(0) // read above: cannot fail
		}
		return func(e Entry, _ time.Time) error {
			v, ok := e[src]
			if !ok {
				e[dst] = ""
				return nil
			}
			e[dst] = v
			if move && src != dst {
				delete(e, src)
			}
			return nil
		}, nil
	}
}

// buildDelete: field_delete FIELD...
func buildDelete(a *args) (action, error) {
	fields, err := a.outNames(0)
	if err != nil {
		return nil, err
	}
	return func(e Entry, _ time.Time) error {
		for _, f := range fields {
			delete(e, f)
		}
		return nil
	}, nil
}

// buildAdd: field_add FIELD... sets each FIELD to the empty string, as the
// reference application's 3.15 rule does (a value already there is replaced).
func buildAdd(a *args) (action, error) {
	fields, err := a.outNames(0)
	if err != nil {
		return nil, err
	}
	return func(e Entry, _ time.Time) error {
		for _, f := range fields {
			e[f] = ""
		}
		return nil
	}, nil
}

// upperText and lowerText use full Unicode case mapping (Straße -> STRASSE, final
// sigma), with a fast path for ASCII text, where it equals the simple mapping. A
// Caser holds state, so each call makes its own.
func upperText(s string) string {
	if isASCII(s) {
		return strings.ToUpper(s)
	}
	return cases.Upper(language.Und).String(s)
}

func lowerText(s string) string {
	if isASCII(s) {
		return strings.ToLower(s)
	}
	return cases.Lower(language.Und).String(s)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// buildKeep: field_keep FIELD... removes every other field except the
// identity keys and keys starting with "_" (the scratch space of pipelines,
// _action included), which it always keeps.
func buildKeep(a *args) (action, error) {
	fields, err := a.names(0)
	if err != nil {
		return nil, err
	}
	a.shrinks = true
	keep := map[string]struct{}{
		"classname": {}, "keyname": {}, "displayname": {}, "is_enabled": {},
	}
	for _, f := range fields {
		keep[f] = struct{}{}
	}
	return func(e Entry, _ time.Time) error {
		for k := range e {
			if _, ok := keep[k]; !ok && !strings.HasPrefix(k, "_") {
				delete(e, k)
			}
		}
		return nil
	}, nil
}

// buildText builds a rule applying fn to the text of each FIELD.
func buildText(fn func(string) string) func(a *args) (action, error) {
	return func(a *args) (action, error) {
		fields, err := a.outNames(0)
		if err != nil {
			return nil, err
		}
		return func(e Entry, _ time.Time) error {
			for _, f := range fields {
				mapText(e, f, fn)
			}
			return nil
		}, nil
	}
}

// mapText replaces field f of e by fn of its text, item by item for a
// multi-valued field. A missing field is left alone, and an unchanged string
// is not stored again (which would allocate).
func mapText(e Entry, f string, fn func(string) string) {
	v, ok := e[f]
	if !ok {
		return
	}
	switch x := v.(type) {
	case string:
		if y := fn(x); y != x {
			e[f] = y
		}
	case []any:
		out := make([]any, len(x))
		for i, it := range x {
			out[i] = fn(textOf(it))
		}
		e[f] = out
	default:
		e[f] = fn(textOf(v))
	}
}

// noSpace removes all white space from s.
func noSpace(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}

// buildConvert builds field_toint, field_tofloat and field_tostring.
func buildConvert(conv func(any) (any, error)) func(a *args) (action, error) {
	return func(a *args) (action, error) {
		fields, err := a.outNames(0)
		if err != nil {
			return nil, err
		}
		return func(e Entry, _ time.Time) error {
			for _, f := range fields {
				v, ok := e[f]
				if !ok {
					continue
				}
				out, err := convertValue(v, conv)
				if err != nil {
					return fmt.Errorf("field %s: %w", clip.Quote(f), err)
				}
				e[f] = out
			}
			return nil
		}, nil
	}
}

// convertValue applies conv to v, item by item for a multi-valued field.
func convertValue(v any, conv func(any) (any, error)) (any, error) {
	list, ok := v.([]any)
	if !ok {
		return conv(v)
	}
	out := make([]any, len(list))
	for i, it := range list {
		c, err := conv(it)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// toInt converts v to int64; nil stays nil, booleans are 1 and 0, floats
// and numeric strings must be integral.
func toInt(v any) (any, error) {
	switch x := v.(type) {
	case int64, nil:
		return v, nil
	case bool:
		if x {
			return int64(1), nil
		}
		return int64(0), nil
	case float64:
		if n, ok := floatToInt(x); ok {
			return n, nil
		}
	default:
		s := strings.TrimSpace(textOf(v))
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			if n, ok := floatToInt(f); ok {
				return n, nil
			}
		}
	}
	return nil, &ValueError{Value: textOf(v), Want: "int"}
}

// toFloat converts v to a finite float64; nil stays nil, booleans are 1
// and 0.
func toFloat(v any) (any, error) {
	switch x := v.(type) {
	case float64, nil:
		return v, nil
	case int64:
		return float64(x), nil
	case bool:
		if x {
			return 1.0, nil
		}
		return 0.0, nil
	default:
		f, err := strconv.ParseFloat(strings.TrimSpace(textOf(v)), 64)
		if err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return f, nil
		}
	}
	return nil, &ValueError{Value: textOf(v), Want: "float"}
}

// toString converts v to its text; nil becomes "".
func toString(v any) (any, error) {
	if _, ok := v.(string); ok {
		return v, nil
	}
	return textOf(v), nil
}

// buildRegexpSub: field_regexp_sub FIELD REGEX REPLACEMENT.
func buildRegexpSub(a *args) (action, error) {
	f, err := a.out(0)
	if err != nil {
		return nil, err
	}
	re, err := compileRegexp(a, 1)
	if err != nil {
		return nil, err
	}
	repl, err := a.text(2)
	if err != nil {
		return nil, err
	}
	// Each match adds at most the replacement and, per reference, the matched text:
	// when that bound is within MaxValueBytes the plain replacement is safe; otherwise
	// the replacement is built step by step and stops past the bound.
	fn := func(s string) string {
		if !re.MatchString(s) { // MatchString does not allocate
			return s
		}
		if (len(s)+1)*(2*len(repl)+1) <= MaxValueBytes {
			return re.ReplaceAllString(s, repl)
		}
		return replaceBounded(re, s, repl)
	}
	return func(e Entry, _ time.Time) error {
		mapText(e, f, fn)
		return nil
	}, nil
}

// replaceBounded is ReplaceAllString that stops once the result passes
// MaxValueBytes; Apply then refuses the value.
func replaceBounded(re *regexp.Regexp, s, repl string) string {
	var out []byte
	last := 0
	for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
		out = append(out, s[last:m[0]]...)
		out = re.ExpandString(out, repl, s, m)
		last = m[1]
		if len(out) > MaxValueBytes {
			return string(out)
		}
	}
	return string(append(out, s[last:]...))
}

// buildAffix: field_append FIELD TEXT (prefix=false) and field_prefix FIELD
// TEXT (prefix=true).
func buildAffix(prefix bool) func(a *args) (action, error) {
	return func(a *args) (action, error) {
		f, err := a.out(0)
		if err != nil {
			return nil, err
		}
		text, err := a.text(1)
		if err != nil {
			return nil, err
		}
		fn := func(s string) string { return s + text }
		if prefix {
			fn = func(s string) string { return text + s }
		}
		return func(e Entry, _ time.Time) error {
			mapText(e, f, fn)
			return nil
		}, nil
	}
}

// buildMerge: field_merge SRC1 SRC2 DST [SEPARATOR].
func buildMerge(a *args) (action, error) {
	src1, err := a.name(0)
	if err != nil {
		return nil, err
	}
	src2, err := a.name(1)
	if err != nil {
		return nil, err
	}
	dst, err := a.out(2)
	if err != nil {
		return nil, err
	}
	var sep string
	if a.len() == 4 {
		if sep, err = a.text(3); err != nil {
			return nil, err
		}
	}
	return func(e Entry, _ time.Time) error {
		e[dst] = textOf(e[src1]) + sep + textOf(e[src2])
		return nil
	}, nil
}

// buildJoin: field_join DST SEPARATOR SRC... Missing and nil sources are
// skipped; the items of a multi-valued source are joined one by one.
func buildJoin(a *args) (action, error) {
	dst, err := a.out(0)
	if err != nil {
		return nil, err
	}
	sep, err := a.text(1)
	if err != nil {
		return nil, err
	}
	srcs, err := a.names(2)
	if err != nil {
		return nil, err
	}
	return func(e Entry, _ time.Time) error {
		var b strings.Builder
		n := 0
		add := func(v any) {
			if b.Len() > MaxValueBytes {
				return // Apply refuses the value; stop growing it
			}
			if n > 0 {
				b.WriteString(sep)
			}
			b.WriteString(textOf(v))
			n++
		}
		for _, s := range srcs {
			switch v := e[s].(type) {
			case nil:
			case []any:
				for _, it := range v {
					add(it)
				}
			default:
				add(v)
			}
		}
		e[dst] = b.String()
		return nil
	}, nil
}

// buildMD5: field_md5 DST SRC... DST is the hex MD5 of the sources' text
// joined by ":" (a missing source is "").
func buildMD5(a *args) (action, error) {
	dst, err := a.out(0)
	if err != nil {
		return nil, err
	}
	srcs, err := a.names(1)
	if err != nil {
		return nil, err
	}
	return func(e Entry, _ time.Time) error {
		// Hashed as a stream: many large sources never make one large buffer.
		h := md5.New()
		for i, s := range srcs {
			if i > 0 {
				h.Write([]byte{':'})
			}
			io.WriteString(h, textOf(e[s]))
		}
		e[dst] = hex.EncodeToString(h.Sum(nil))
		return nil
	}, nil
}

// buildUUID: field_uuid FIELD... sets each FIELD to a new random UUID.
func buildUUID(a *args) (action, error) {
	fields, err := a.outNames(0)
	if err != nil {
		return nil, err
	}
	return func(e Entry, _ time.Time) error {
		for _, f := range fields {
			e[f] = uuid.NewString()
		}
		return nil
	}, nil
}

// buildNow builds field_date_now, field_time_now and field_datetime_now.
func buildNow(layout string) func(a *args) (action, error) {
	return func(a *args) (action, error) {
		fields, err := a.outNames(0)
		if err != nil {
			return nil, err
		}
		return func(e Entry, now time.Time) error {
			s := now.UTC().Format(layout)
			for _, f := range fields {
				e[f] = s
			}
			return nil
		}, nil
	}
}

// buildDatetime: field_datetime FIELD EXPR.
func buildDatetime(a *args) (action, error) {
	f, err := a.out(0)
	if err != nil {
		return nil, err
	}
	s, err := a.text(1)
	if err != nil {
		return nil, err
	}
	offs, err := parseDateExpr(s)
	if err != nil {
		return nil, fmt.Errorf("invalid expression %s: %w", clip.Quote(s), err)
	}
	return func(e Entry, now time.Time) error {
		e[f] = evalDateExpr(now, offs).Format(dateTimeLayout)
		return nil
	}, nil
}
