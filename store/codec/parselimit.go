package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"dataservice/store/model"
)

// MaxYAMLBody bounds a load body that is not JSON. A YAML parser holds the whole
// document as a node tree (about a hundred bytes per node, a node per two bytes of
// input at worst), so YAML is bounded tighter than JSON, which is decoded as a stream.
const MaxYAMLBody = 8 << 20

// ParseBody parses a load body as ParseDocumentLenient does, with bounded memory: a
// JSON body (starting with '[' or '{') is decoded one entry at a time, and more than
// maxEntries entries (0: no bound) is an ETooLarge error, raised as soon as the entry
// after the last allowed one has been read. Bodies that are not JSON and larger than
// MaxYAMLBody are refused with ETooLarge.
func ParseBody(name string, body []byte, maxEntries int) ([]*model.Entry, []string, error) {
	t := bytes.TrimLeft(body, " \t\r\n\ufeff")
	if len(t) > 0 && (t[0] == '[' || t[0] == '{') {
		entries, err := parseJSONStream(name, t, maxEntries)
		if err == nil || model.HasCode(err, model.ETooLarge) {
			return entries, nil, err
		}
		if len(body) > MaxYAMLBody {
			return nil, nil, model.Errorf(model.EInvalid, "%s: invalid JSON: %v", name, err)
		}
		// Not JSON after all (YAML flow style, comments): the YAML parser decides.
	}
	if len(body) > MaxYAMLBody {
		return nil, nil, model.Errorf(model.ETooLarge, "%s: a YAML body is limited to %d MiB (send JSON for larger loads)", name, MaxYAMLBody>>20)
	}
	entries, warnings, err := ParseDocumentLenient(name, body)
	if err != nil {
		return nil, nil, err
	}
	if maxEntries > 0 && len(entries) > maxEntries {
		return nil, nil, tooManyEntries(name, maxEntries)
	}
	return entries, warnings, nil
}

func tooManyEntries(name string, max int) error {
	return model.Errorf(model.ETooLarge, "%s: more than %d entries in one request; split the load", name, max)
}

// parseJSONStream decodes a JSON list of objects (or one object) entry by entry,
// keeping each object's key order.
func parseJSONStream(name string, data []byte, maxEntries int) ([]*model.Entry, error) {
	var out []*model.Entry
	err := eachJSON(name, bytes.NewReader(data), func(e *model.Entry) error {
		if maxEntries > 0 && len(out) >= maxEntries {
			return tooManyEntries(name, maxEntries)
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachJSON decodes a JSON list of objects (or one object) from r and calls fn with
// each entry as soon as it is read (its first token); fn's error stops it.
func eachJSON(name string, r io.Reader, fn func(*model.Entry) error) error {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	n := 0
	next := func() *model.Entry {
		n++
		return &model.Entry{File: name, Index: n, Fields: map[string]any{}}
	}
	switch tok {
	case json.Delim('{'):
		e := next()
		if err := jsonObjectInto(dec, e); err != nil {
			return err
		}
		if err := fn(e); err != nil {
			return err
		}
	case json.Delim('['):
		for dec.More() {
			e := next()
			// Each item is scanned whole, then read by jsonEntry (the common flat shape)
			// or token by token; anything but an object fails as "no classname".
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return err
			}
			if raw[0] == '{' {
				if m, order, ok := model.DecodeFlatObject(raw); ok {
					e.Fields, e.Order = m, order
				} else {
					item := json.NewDecoder(bytes.NewReader(raw))
					item.UseNumber()
					item.Token() // '{'
					if err := jsonObjectInto(item, e); err != nil {
						return err
					}
				}
			}
			if err := fn(e); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return err
		}
	default:
		return errors.New("not a list of objects")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

func jsonObjectInto(dec *json.Decoder, e *model.Entry) error {
	m, order, err := jsonObject(dec)
	if err != nil {
		return err
	}
	e.Fields, e.Order = m, order
	return nil
}

// jsonObject reads an object's members after its '{'; a repeated key keeps its last
// value and its first position, as the YAML path does.
func jsonObject(dec *json.Decoder) (map[string]any, []string, error) {
	m := map[string]any{}
	var order []string
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		k, ok := kt.(string)
		if !ok {
			return nil, nil, fmt.Errorf("object key is not a string")
		}
		v, err := jsonValue(dec)
		if err != nil {
			return nil, nil, err
		}
		if _, dup := m[k]; !dup {
			order = append(order, k)
		}
		m[k] = v
	}
	_, err := dec.Token() // '}'
	return m, order, err
}

func jsonList(dec *json.Decoder) ([]any, error) {
	l := []any{}
	for dec.More() {
		v, err := jsonValue(dec)
		if err != nil {
			return nil, err
		}
		l = append(l, v)
	}
	_, err := dec.Token() // ']'
	return l, err
}

func jsonValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch x := tok.(type) {
	case json.Delim:
		if x == '{' {
			m, _, err := jsonObject(dec)
			return m, err
		}
		return jsonList(dec)
	case json.Number:
		return model.FromJSON(x), nil
	}
	return tok, nil
}
