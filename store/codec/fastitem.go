package codec

import (
	"bytes"
	"strconv"

	"dataservice/store/model"
)

// fastItem reads the commonest shape of a YAML sequence item without the YAML parser:
// a first line "- key: value" and further lines "  key: value"
// (blank lines allowed), where every key is an identifier and every value a plain
// scalar whose meaning is certain: text starting with a letter (not true, false or
// null in any of their YAML spellings), a dotted number with at least two dots (an
// address: text), or a canonical decimal integer. It gives exactly the entry the YAML
// parser gives; ok is false for anything else, which the parser then reads.
func fastItem(name string, item []byte) (e *model.Entry, ok bool) {
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
	return &model.Entry{File: name, Fields: fields, Order: order}, true
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
