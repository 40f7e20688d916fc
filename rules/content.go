package rules

import (
	"bytes"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Normalize converts pipeline content to the flat rule list: content that parses as
// a list is returned byte for byte; a mapping with `tasks:` becomes that list (the
// deprecated keys csv_delimiter, encoding, keyfield and classname are dropped with the
// wrapper); anything else becomes "[]". changed reports whether the text differs from
// content.
func Normalize(content string) (out string, changed bool) {
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(content), &root); err == nil && len(root.Content) == 1 {
		n := root.Content[0]
		if n.Kind == yaml.SequenceNode {
			return content, false
		}
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value != "tasks" || n.Content[i+1].Kind != yaml.SequenceNode {
					continue
				}
				var buf bytes.Buffer
				enc := yaml.NewEncoder(&buf)
				enc.SetIndent(2)
				seq := *n.Content[i+1]
				seq.Style = 0
				if err := enc.Encode(&seq); err == nil && enc.Close() == nil {
					s := buf.String()
					if strings.TrimSpace(s) == "" || len(seq.Content) == 0 {
						s = "[]"
					}
					return s, s != content
				}
			}
		}
	}
	return "[]", content != "[]"
}

// Check reports whether content is a valid rule list.
func Check(content string) error {
	_, err := Parse(content)
	return err
}

// Transform applies rules to one load entry's fields in place; discard reports that
// the entry is to be dropped.
type Transform func(fields map[string]any) (discard bool, err error)

// LoadTransform compiles content for use at load time: the returned function runs the
// rules over each entry at the time now gives (nil: the wall clock).
func LoadTransform(content string, now func() time.Time) (Transform, error) {
	compiled, err := Parse(content)
	if err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	return func(fields map[string]any) (bool, error) {
		return compiled.Apply(Entry(fields), now().UTC())
	}, nil
}
