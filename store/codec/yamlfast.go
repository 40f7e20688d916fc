package codec

import (
	"strconv"

	"dataservice/store/model"
)

// appendYAMLItem appends d as one item of a block sequence, byte for byte as yaml.v3
// writes it in Export (a sequence of mappings, default indent), when every key and
// value has a form simple enough to write directly: plain or empty strings, integers,
// booleans, null and lists of those. ok is false for anything else (floats, nested
// mappings, strings yaml.v3 would quote or fold): the caller then encodes d with yaml.v3.
func appendYAMLItem(buf []byte, d *model.Doc) (out []byte, ok bool) {
	if len(d.Keys) == 0 {
		return buf, false
	}
	start := len(buf)
	for i, k := range d.Keys {
		// yaml.v3 writes keys longer than 128 bytes as complex keys ("? key").
		if !yamlPlain(k) || len(k) > 100 {
			return buf[:start], false
		}
		if i == 0 {
			buf = append(buf, "- "...)
		} else {
			buf = append(buf, "  "...)
		}
		buf = append(buf, k...)
		buf = append(buf, ':')
		v := d.Vals[k]
		if l, isList := v.([]any); isList && len(l) > 0 {
			buf = append(buf, '\n')
			for _, e := range l {
				buf = append(buf, "    - "...)
				if buf, ok = appendYAMLScalar(buf, e); !ok {
					return buf[:start], false
				}
				buf = append(buf, '\n')
			}
			continue
		}
		buf = append(buf, ' ')
		if buf, ok = appendYAMLScalar(buf, v); !ok {
			return buf[:start], false
		}
		buf = append(buf, '\n')
	}
	return buf, true
}

// appendYAMLScalar appends a simple value as yaml.v3 writes it in flow position.
func appendYAMLScalar(buf []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return append(buf, "null"...), true
	case bool:
		return strconv.AppendBool(buf, x), true
	case int64:
		return strconv.AppendInt(buf, x, 10), true
	case int:
		return strconv.AppendInt(buf, int64(x), 10), true
	case string:
		if x == "" {
			return append(buf, `""`...), true
		}
		if yamlPlain(x) {
			return append(buf, x...), true
		}
	case []any:
		if len(x) == 0 {
			return append(buf, "[]"...), true
		}
	}
	return buf, false
}

// yamlPlain reports whether yaml.v3 writes s as a plain scalar that reads back as the
// same string. Only two shapes are accepted, both conservative: a letter or '_'
// followed by ASCII letters, digits, "_.-/" and inner spaces (not a word YAML reads as
// a boolean or null; yaml.v3 does not fold long lines), and digits with at least two dots and nothing else (an IPv4 address, a
// version): never an integer, a float or a timestamp.
func yamlPlain(s string) bool {
	if s == "" {
		return false
	}
	c := s[0]
	if c >= '0' && c <= '9' {
		dots := 0
		for i := 0; i < len(s); i++ {
			switch c := s[i]; {
			case c == '.':
				dots++
			case c < '0' || c > '9':
				return false
			}
		}
		return dots >= 2
	}
	if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_') {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-' ||
			c == '/' || c == ' ' && i < len(s)-1) {
			return false
		}
	}
	return !model.YAML11Bool(s) && !yamlWords[s]
}

// yamlWords are the plain words yaml.v3 resolves to booleans or null.
var yamlWords = map[string]bool{"true": true, "True": true, "TRUE": true, "false": true, "False": true,
	"FALSE": true, "null": true, "Null": true, "NULL": true}
