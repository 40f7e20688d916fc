package store

import (
	"bytes"
	"math"
	"strconv"
)

// fastItem reads the commonest shape of a YAML sequence item without the YAML parser:
// a first line "- key: value" and further lines "  key: value"
// (blank lines allowed), where every key is an identifier and every value a plain
// scalar whose meaning is certain: text starting with a letter (not true, false or
// null in any of their YAML spellings), a dotted number with at least two dots (an
// address: text), or a canonical decimal integer. It gives exactly the entry the YAML
// parser gives; ok is false for anything else, which the parser then reads.
func fastItem(name string, item []byte) (e *Entry, ok bool) {
	fields := make(map[string]any, 8)
	order := make([]string, 0, 8)
	first := true
	for len(item) > 0 {
		nl := bytes.IndexByte(item, '\n')
		if nl < 0 {
			nl = len(item)
		}
		line := item[:nl]
		item = item[min(nl+1, len(item)):]
		if len(line) == 0 {
			continue
		}
		if len(line) < 2 || line[1] != ' ' || (first && line[0] != '-') || (!first && line[0] != ' ') {
			return nil, false
		}
		first = false
		line = line[2:]
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || colon+2 >= len(line) || line[colon+1] != ' ' {
			return nil, false
		}
		key, text := line[:colon], line[colon+2:]
		if !isIdentifier(key) {
			return nil, false
		}
		v, ok := fastScalar(text)
		if !ok {
			return nil, false
		}
		k := string(key)
		if _, dup := fields[k]; !dup {
			order = append(order, k)
		}
		fields[k] = v
	}
	if first {
		return nil, false
	}
	return &Entry{File: name, Fields: fields, Order: order}, true
}

func isIdentifier(b []byte) bool {
	for i, c := range b {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return len(b) > 0
}

// fastScalar is the value of a plain scalar of a kind whose YAML meaning is certain.
func fastScalar(b []byte) (any, bool) {
	c := b[0]
	switch {
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		for _, c := range b {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' ||
				c == '_' || c == '/' || c == '@' || c == '+') {
				return nil, false
			}
		}
		switch string(b) {
		case "true", "True", "TRUE", "false", "False", "FALSE", "null", "Null", "NULL":
			return nil, false
		}
		return string(b), true
	case c >= '0' && c <= '9' || c == '-':
		digits, dots := b, 0
		if c == '-' {
			digits = b[1:]
		}
		for _, c := range digits {
			switch {
			case c == '.':
				dots++
			case c < '0' || c > '9':
				return nil, false
			}
		}
		if len(digits) == 0 {
			return nil, false
		}
		if dots >= 2 && c != '-' && digits[0] != '.' {
			return string(b), true
		}
		if dots > 0 || len(digits) > 18 || digits[0] == '0' && (len(digits) > 1 || c == '-') {
			return nil, false
		}
		i, err := strconv.ParseInt(string(b), 10, 64)
		return i, err == nil
	}
	return nil, false
}

// jsonEntry reads a JSON object (valid JSON, scanned by encoding/json) whose keys
// are strings without escapes and whose values are such strings, numbers, booleans,
// null or flat lists of them, keeping the key order; a repeated key keeps its last
// value and first position. The values are those the token decoder gives (integers
// int64, other numbers float64); ok is false for anything else.
func jsonEntry(raw []byte) (map[string]any, []string, bool) {
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
