package model

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// decodeFlat decodes the common shape of stored instance data quickly: an object
// whose values are strings without escapes, numbers, booleans, null, or lists of
// those, as json.Marshal writes it (no spaces). ok is false for anything else, and
// the caller falls back to encoding/json. Integers become int64, other numbers float64,
// as DecodeData does.
func decodeFlat(s string) (m map[string]any, ok bool) {
	p := flatParser{s: s}
	if !p.byte('{') {
		return nil, false
	}
	m = make(map[string]any, 8)
	if p.byte('}') {
		return m, p.i == len(s)
	}
	for {
		k, ok := p.str()
		if !ok || !p.byte(':') {
			return nil, false
		}
		v, ok := p.value(true)
		if !ok {
			return nil, false
		}
		m[k] = v
		if p.byte(',') {
			continue
		}
		if p.byte('}') && p.i == len(s) {
			return m, true
		}
		return nil, false
	}
}

type flatParser struct {
	s string
	i int
}

func (p *flatParser) byte(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a string without escapes.
func (p *flatParser) str() (string, bool) {
	if !p.byte('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.s) {
		switch c := p.s[p.i]; {
		case c == '"':
			v := p.s[start:p.i]
			p.i++
			return v, utf8.ValidString(v)
		case c == '\\' || c < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

func (p *flatParser) value(listOK bool) (any, bool) {
	if p.i >= len(p.s) {
		return nil, false
	}
	switch c := p.s[p.i]; {
	case c == '"':
		return p.str()
	case c == 't' && len(p.s)-p.i >= 4 && p.s[p.i:p.i+4] == "true":
		p.i += 4
		return true, true
	case c == 'f' && len(p.s)-p.i >= 5 && p.s[p.i:p.i+5] == "false":
		p.i += 5
		return false, true
	case c == 'n' && len(p.s)-p.i >= 4 && p.s[p.i:p.i+4] == "null":
		p.i += 4
		return nil, true
	case c == '[' && listOK:
		p.i++
		l := []any{}
		if p.byte(']') {
			return l, true
		}
		for {
			v, ok := p.value(false)
			if !ok {
				return nil, false
			}
			l = append(l, v)
			if p.byte(',') {
				continue
			}
			return l, p.byte(']')
		}
	case c == '-' || (c >= '0' && c <= '9'):
		start := p.i
		isFloat, ok := p.number()
		if !ok {
			return nil, false
		}
		text := p.s[start:p.i]
		if !isFloat {
			if n, err := strconv.ParseInt(text, 10, 64); err == nil {
				return n, true
			}
		}
		f, err := strconv.ParseFloat(text, 64)
		return f, err == nil
	}
	return nil, false
}

// number scans a JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *flatParser) number() (isFloat, ok bool) {
	p.byte('-')
	digits := func() int {
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.byte('0') {
		if p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			return false, false
		}
	} else if digits() == 0 {
		return false, false
	}
	if p.byte('.') {
		if digits() == 0 {
			return false, false
		}
		isFloat = true
	}
	if p.byte('e') || p.byte('E') {
		if !p.byte('+') {
			p.byte('-')
		}
		if digits() == 0 {
			return false, false
		}
		isFloat = true
	}
	return isFloat, true
}

// DecodeFlatObject reads a JSON object (valid JSON, scanned by encoding/json) whose keys
// are strings without escapes and whose values are such strings, numbers, booleans,
// null or flat lists of them, keeping the key order; a repeated key keeps its last
// value and first position. The values are those the token decoder gives (integers
// int64, other numbers float64); ok is false for anything else.
func DecodeFlatObject(raw []byte) (map[string]any, []string, bool) {
	p := flatParser{s: string(raw)}
	ws := func() {
		for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
			p.i++
		}
	}
	if !p.byte('{') {
		return nil, nil, false
	}
	m := make(map[string]any, 8)
	order := make([]string, 0, 8)
	ws()
	if p.byte('}') {
		ws()
		return m, order, p.i == len(p.s)
	}
	for {
		ws()
		k, ok := p.str()
		if !ok {
			return nil, nil, false
		}
		ws()
		if !p.byte(':') {
			return nil, nil, false
		}
		ws()
		v, ok := p.value(true)
		if !ok {
			return nil, nil, false
		}
		if f, isFloat := v.(float64); isFloat && (math.IsInf(f, 0) || math.IsNaN(f)) {
			return nil, nil, false
		}
		if _, dup := m[k]; !dup {
			order = append(order, k)
		}
		m[k] = v
		ws()
		if p.byte(',') {
			continue
		}
		if p.byte('}') {
			ws()
			return m, order, p.i == len(p.s)
		}
		return nil, nil, false
	}
}
