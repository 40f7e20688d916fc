// Package codec reads and writes the load format without SQL: YAML, JSON and CSV
// documents, whole or item by item, the printing of documents (the fast YAML writer
// included), the spooling of request bodies and the load-format checks. The store,
// the server and the CLI call it; it knows only the model.
package codec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"dataservice/store/model"
)

// maxExpansion bounds the values aliases may expand to in one body, over all its
// documents (YAML bombs).
// Values written out in the document cost nothing: the parser holds them already.
const maxExpansion = 100000

type decoder struct {
	budget  int
	aliased int // > 0 while expanding an alias or a merge key: only then values spend
}

// ParseDocument parses a YAML or JSON load document (a list of objects, or one object)
// into entries. name is used in error messages and kept on each entry.
func ParseDocument(name string, data []byte) ([]*model.Entry, error) {
	// One budget for the whole body: many small documents must not each spend a full one.
	return parseDocument(name, data, &decoder{budget: maxExpansion})
}

// parseDocument is ParseDocument spending d's budget (shared by the items of a
// document read item by item).
func parseDocument(name string, data []byte, d *decoder) ([]*model.Entry, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []*model.Entry
	for {
		var root yaml.Node
		err := dec.Decode(&root)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, model.Errorf(model.EInvalid, "%s: invalid YAML/JSON: %s", name, yamlErrorText(err))
		}
		if len(root.Content) == 0 {
			continue
		}
		n := root.Content[0]
		var items []*yaml.Node
		switch n.Kind {
		case yaml.SequenceNode:
			items = n.Content
		case yaml.MappingNode:
			items = []*yaml.Node{n}
		case yaml.ScalarNode:
			if n.Tag == "!!null" {
				continue
			}
			return nil, model.Errorf(model.EInvalid, "%s: document is not a list of objects", name)
		case yaml.AliasNode:
			return nil, model.Errorf(model.EInvalid, "%s: document is not a list of objects", name)
		}
		for _, it := range items {
			e := &model.Entry{File: name, Index: len(out) + 1}
			if it.Kind != yaml.MappingNode {
				e.Fields = map[string]any{}
				out = append(out, e)
				continue
			}
			m, order, err := d.mapping(it)
			if err != nil {
				return nil, model.Errorf(model.EInvalid, "%s: entry %d: %v", name, e.Index, err)
			}
			e.Fields, e.Order = m, order
			out = append(out, e)
		}
	}
	return out, nil
}

// yamlAnchor matches the anchor name the YAML parser quotes in its errors. An unquoted
// value starting with '*' is read as an alias, so the "anchor" may be a plain password.
var yamlAnchor = regexp.MustCompile(`anchor '[^']*'`)

// yamlErrorText is the parser's message without text taken from the document.
func yamlErrorText(err error) string {
	msg := yamlAnchor.ReplaceAllString(err.Error(), "anchor (name not shown)")
	if strings.Contains(msg, "unknown anchor") {
		msg += " (a value starting with '*' must be quoted)"
	}
	return msg
}

func (d *decoder) spend() error {
	if d.aliased == 0 {
		return nil
	}
	d.budget--
	if d.budget < 0 {
		return fmt.Errorf("document expands to more than %d values (alias bomb?)", maxExpansion)
	}
	return nil
}

func (d *decoder) mapping(n *yaml.Node) (map[string]any, []string, error) {
	m := make(map[string]any, len(n.Content)/2)
	order := make([]string, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		if kn.Kind == yaml.AliasNode {
			kn = kn.Alias
		}
		if kn == nil || kn.Kind != yaml.ScalarNode {
			return nil, nil, fmt.Errorf("line %d: mapping keys must be scalars", n.Content[i].Line)
		}
		if kn.Value == "<<" && kn.Tag == "!!merge" {
			mv := vn
			if mv.Kind == yaml.AliasNode {
				mv = mv.Alias
			}
			if mv == nil || mv.Kind != yaml.MappingNode {
				return nil, nil, fmt.Errorf("line %d: merge key needs a mapping", kn.Line)
			}
			// A merge expands an alias like a value does: it spends the budget, or
			// nested merges of empty mappings would expand without limit.
			d.aliased++
			err := d.spend()
			var sub map[string]any
			var subOrder []string
			if err == nil {
				sub, subOrder, err = d.mapping(mv)
			}
			d.aliased--
			if err != nil {
				return nil, nil, err
			}
			for _, k := range subOrder {
				if _, ok := m[k]; !ok {
					m[k] = sub[k]
					order = append(order, k)
				}
			}
			continue
		}
		v, err := d.value(vn)
		if err != nil {
			return nil, nil, err
		}
		// A repeated key keeps its last value, as the reference application's parser does.
		if _, dup := m[kn.Value]; !dup {
			order = append(order, kn.Value)
		}
		m[kn.Value] = v
	}
	return m, order, nil
}

func (d *decoder) value(n *yaml.Node) (any, error) {
	if err := d.spend(); err != nil {
		return nil, err
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, fmt.Errorf("line %d: unknown alias", n.Line)
		}
		d.aliased++
		v, err := d.value(n.Alias)
		d.aliased--
		return v, err
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := d.value(c)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		return l, nil
	case yaml.MappingNode:
		m, _, err := d.mapping(n)
		return m, err
	case yaml.ScalarNode:
		return scalarValue(n), nil
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}

// scalarValue is the value of a scalar node. A scalar YAML resolves to a number or a
// boolean is that typed value only when its text is the value's canonical text (5,
// 1.5, true); otherwise it stays the text the file says (1e3, 0o17, 0815, 1.50,
// True), so a string field stores exactly what was written and typed fields parse
// the text. Quoted scalars are always text.
func scalarValue(n *yaml.Node) any {
	v := typedScalar(n)
	if t, ok := model.ScalarText(v); ok && v != nil && t != n.Value {
		return n.Value
	}
	return v
}

func typedScalar(n *yaml.Node) any {
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!bool":
		var b bool
		if n.Decode(&b) == nil {
			return b
		}
	case "!!int":
		if i, err := strconv.ParseInt(n.Value, 0, 64); err == nil {
			return i
		}
		var i int64
		if n.Decode(&i) == nil {
			return i
		}
	case "!!float":
		// NaN and infinities stay text: they have no JSON form.
		var f float64
		if n.Decode(&f) == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return f
		}
	}
	return n.Value
}
