package model

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// yamlNode builds the node yaml.v3 would encode for v, without encoding and parsing
// it back as yaml.Node.Encode does. Scalars, lists and *Doc are built directly; other
// values (maps, whose key order yaml.v3 decides) go through Encode.
func yamlNode(v any) (*yaml.Node, error) {
	switch x := v.(type) {
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Value: "null"}, nil
	case string:
		if utf8.ValidString(x) { // else yaml.v3 writes it as !!binary
			n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: x}
			if !strings.Contains(x, "\n") && (yaml11Bools[x] || base60Float.MatchString(x)) {
				// Plain, these would read as YAML 1.1 booleans or numbers: yaml.v3 quotes them.
				n.Style = yaml.DoubleQuotedStyle
			}
			return n, nil
		}
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.FormatBool(x)}, nil
	case int64:
		return &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.FormatInt(x, 10)}, nil
	case int:
		return &yaml.Node{Kind: yaml.ScalarNode, Value: strconv.Itoa(x)}, nil
	case float64:
		s := strconv.FormatFloat(x, 'g', -1, 64)
		switch {
		case math.IsInf(x, 1):
			s = ".inf"
		case math.IsInf(x, -1):
			s = "-.inf"
		case math.IsNaN(x):
			s = ".nan"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Value: s}, nil
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Content: make([]*yaml.Node, 0, len(x))}
		for _, e := range x {
			c, err := yamlNode(e)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, c)
		}
		return n, nil
	case *Doc:
		return x.YAMLNode()
	}
	n := &yaml.Node{}
	if err := n.Encode(v); err != nil {
		return nil, err
	}
	return n, nil
}

var yaml11Bools = map[string]bool{"y": true, "Y": true, "yes": true, "Yes": true, "YES": true, "on": true,
	"On": true, "ON": true, "n": true, "N": true, "no": true, "No": true, "NO": true, "off": true, "Off": true, "OFF": true}

var base60Float = regexp.MustCompile(`^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`)

func (d *Doc) YAMLNode() (*yaml.Node, error) {
	n := &yaml.Node{Kind: yaml.MappingNode, Content: make([]*yaml.Node, 0, 2*len(d.Keys))}
	for _, k := range d.Keys {
		v, err := yamlNode(d.Vals[k])
		if err != nil {
			return nil, err
		}
		kn, err := yamlNode(k)
		if err != nil {
			return nil, err
		}
		n.Content = append(n.Content, kn, v)
	}
	return n, nil
}

// appendJSON appends v as encoding/json writes it; strings, integers, booleans, null
// and lists of them are written directly.
func appendJSON(buf []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(buf, "null"...), nil
	case string:
		return appendJSONString(buf, x), nil
	case bool:
		return strconv.AppendBool(buf, x), nil
	case int64:
		return strconv.AppendInt(buf, x, 10), nil
	case int:
		return strconv.AppendInt(buf, int64(x), 10), nil
	case []any:
		buf = append(buf, '[')
		for i, e := range x {
			if i > 0 {
				buf = append(buf, ',')
			}
			var err error
			if buf, err = appendJSON(buf, e); err != nil {
				return nil, err
			}
		}
		return append(buf, ']'), nil
	case *Doc:
		b, err := x.MarshalJSON()
		return append(buf, b...), err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(buf, b...), nil
}

const hexDigits = "0123456789abcdef"

// jsonSafe marks the bytes appendJSONString copies as they are: ASCII but control
// characters, quote, backslash and the HTML-sensitive < > &. A table: every byte of
// every value written passes this test.
var jsonSafe = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendJSONString appends s quoted as encoding/json quotes it (HTML-safe escapes,
// invalid UTF-8 as U+FFFD, U+2028 and U+2029 escaped).
func appendJSONString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if jsonSafe[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			buf = append(buf, s[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

// YAML11Bool reports whether s reads as a boolean in YAML 1.1 (y, yes, on, ...): a
// plain scalar that must be quoted for such readers.
func YAML11Bool(s string) bool { return yaml11Bools[s] }
