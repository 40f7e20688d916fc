package model

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"dataservice/internal/clip"
)

// Schema is a class of instances: its attributes and ordered fields.
type Schema struct {
	ID          int64
	Keyname     string
	Displayname string
	Description string
	KeynameMode string
	IsEnabled   bool
	IsBuiltin   bool
	// Schema-level permissions; empty means the global p_data_* permission applies.
	PRead, PCreate, PUpdate, PDelete, PAdmin string
	// Options holds display hints (icon, page, order, handle_method, ...) as given.
	Options map[string]any
	Fields  []*Field
	byName  map[string]*Field
}

// Field is a field definition of a schema.
type Field struct {
	ID            int64
	Classname     string
	Keyname       string
	Displayname   string
	Description   string
	Dataformat    string
	DataformatExt string
	CardinalMin   int
	CardinalMax   int
	Default       any
	Order         int
	IsEnabled     bool
	Options       map[string]any
}

// Field returns the field named name, or nil.
func (s *Schema) Field(name string) *Field { return s.byName[name] }

// FieldIndex is the position of field name among the schema's fields; names of no
// field come after them all.
func (s *Schema) FieldIndex(name string) int {
	for i, f := range s.Fields {
		if f.Keyname == name {
			return i
		}
	}
	return len(s.Fields)
}

// AddField appends f to the schema's fields.
func (s *Schema) AddField(f *Field) {
	if s.byName == nil {
		s.byName = map[string]*Field{}
	}
	s.Fields = append(s.Fields, f)
	s.byName[f.Keyname] = f
}

// Clone returns a copy of s to edit: its options and fields are copies too (a field's
// default and option values are shared).
func (s *Schema) Clone() *Schema {
	cp := *s
	cp.Options = CloneMap(s.Options)
	cp.Fields, cp.byName = nil, map[string]*Field{}
	for _, f := range s.Fields {
		fc := *f
		fc.Options = CloneMap(f.Options)
		cp.AddField(&fc)
	}
	return &cp
}

// Doc returns the schema in the load format (a `_schema` entry): header and
// attributes, `_options` (description and display hints, so a field named
// description never collides with the attribute), then the fields in order.
func (s *Schema) Doc() *Doc {
	d := &Doc{}
	d.Set("classname", "_schema")
	d.Set("keyname", s.Keyname)
	d.Set("displayname", s.Displayname)
	d.Set("keyname_mode", s.KeynameMode)
	d.Set("is_enabled", s.IsEnabled)
	for _, kv := range [][2]string{{"p_read", s.PRead}, {"p_create", s.PCreate}, {"p_update", s.PUpdate},
		{"p_delete", s.PDelete}, {"p_admin", s.PAdmin}} {
		if kv[1] != "" {
			d.Set(kv[0], kv[1])
		}
	}
	opts := CloneMap(s.Options)
	if s.Description != "" {
		opts["description"] = s.Description
	}
	if len(opts) > 0 {
		d.Set("_options", sortedDoc(opts))
	}
	for _, f := range s.Fields {
		d.Set(f.Keyname, sortedDoc(f.doc()))
	}
	return d
}

func (f *Field) doc() map[string]any {
	fd := map[string]any{
		"displayname":    f.Displayname,
		"description":    f.Description,
		"dataformat":     f.Dataformat,
		"dataformat_ext": f.DataformatExt,
		"cardinal_min":   int64(f.CardinalMin),
		"cardinal_max":   int64(f.CardinalMax),
		"order":          int64(f.Order),
		"is_enabled":     f.IsEnabled,
	}
	if f.Default != nil {
		fd["default"] = f.Default
	}
	for k, v := range f.Options {
		fd[k] = v
	}
	return fd
}

// ApplyField merges a field definition into s; it reports whether the field is to be deleted.
func (s *Schema) ApplyField(name string, attrs map[string]any, pos int) (bool, error) {
	if !fieldNameRE.MatchString(name) || headerKeys[name] {
		return false, Errorf(EInvalid, "schema %s: %s is not a valid field name", s.Keyname, clip.Quote(name))
	}
	f := s.byName[name]
	text, _ := ScalarText(attrs["_action"])
	action := Action(text)
	switch action {
	case "", ActionCreate, ActionUpdate, ActionInit, ActionNoop, ActionDelete, actionCreateOrUpdate:
	default:
		return false, Errorf(EInvalid, "schema %s: field %s: unknown _action %s", s.Keyname, name, clip.Quote(text))
	}
	switch {
	case action == ActionNoop:
		return false, nil
	case action == ActionDelete:
		if f != nil {
			delete(s.byName, name)
			for i, x := range s.Fields {
				if x == f {
					s.Fields = append(s.Fields[:i], s.Fields[i+1:]...)
					break
				}
			}
			return true, nil
		}
		return false, nil
	case action == ActionInit && f != nil:
		return false, nil
	case action == ActionUpdate && f == nil:
		return false, Errorf(ENotFound, "schema %s: field %s not found", s.Keyname, name)
	}
	existed := f != nil
	// How a stored secret field keeps its values (hashed, or sealed with the key) is
	// fixed: a hash cannot be opened, nor a sealed value verified as a hash.
	wasSecret := existed && f.Dataformat == "secret"
	oldExt := ""
	if existed {
		oldExt = f.DataformatExt
	}
	if f == nil {
		f = &Field{Classname: s.Keyname, Keyname: name, Dataformat: "string", CardinalMax: 1, IsEnabled: true,
			Order: (pos + 1) * 10, Options: map[string]any{}}
		s.AddField(f)
	}
	for k, v := range attrs {
		if k == "_action" {
			continue
		}
		text, scalar := ScalarText(v)
		bad := func(what string) (bool, error) {
			return false, Errorf(EInvalid, "schema %s: field %s: %s %s is not %s", s.Keyname, name, k, clip.Quote(text), what)
		}
		switch k {
		case "displayname":
			f.Displayname = text
		case "description":
			f.Description = text
		case "dataformat":
			if !dataformats[text] {
				return false, Errorf(EInvalid, "schema %s: field %s: unknown dataformat %s", s.Keyname, name, clip.Quote(text))
			}
			// Stored hashes would become readable values of the new dataformat.
			if existed && f.Dataformat == "secret" && text != "secret" {
				return false, Errorf(EInvalid, "schema %s: field %s: a secret field cannot change its dataformat (to %s)", s.Keyname, name, text)
			}
			f.Dataformat = text
		case "dataformat_ext":
			f.DataformatExt = text
		case "cardinal_min", "cardinal_max", "order":
			n, ok := toInt(v)
			if !scalar || !ok || n < 0 {
				return bad("a non-negative integer")
			}
			switch k {
			case "cardinal_min":
				f.CardinalMin = n
			case "cardinal_max":
				f.CardinalMax = n
			default:
				f.Order = n
			}
		case "default":
			f.Default = v
		case "is_enabled":
			b, ok := v.(bool)
			if !ok {
				if b, ok = BoolWord(text); !ok {
					return bad("a boolean")
				}
			}
			f.IsEnabled = b
		default:
			f.Options[k] = v
		}
	}
	switch f.Dataformat {
	case "schema", "enumerate":
		if strings.TrimSpace(f.DataformatExt) == "" {
			return false, Errorf(EInvalid, "schema %s: field %s: dataformat %s needs dataformat_ext", s.Keyname, name, f.Dataformat)
		}
	case "external":
		if len(strings.Fields(f.DataformatExt)) < 2 {
			return false, Errorf(EInvalid, "schema %s: field %s: external needs dataformat_ext \"PARENT_FIELD REMOTE_FIELD\"", s.Keyname, name)
		}
	}
	// A secret holds one value: each value given is hashed with argon2id inside the
	// write transaction, so a list of them would let one request hold every writer for
	// as long as it likes.
	if f.Dataformat == "secret" {
		f.DataformatExt = strings.TrimSpace(f.DataformatExt)
		if f.DataformatExt != "" && f.DataformatExt != SecretEncrypted {
			return false, Errorf(EInvalid, "schema %s: field %s: a secret's dataformat_ext is empty (hashed) or %s, not %s",
				s.Keyname, name, SecretEncrypted, clip.Quote(f.DataformatExt))
		}
		if wasSecret && f.DataformatExt != strings.TrimSpace(oldExt) {
			return false, Errorf(EInvalid, "schema %s: field %s: a secret field cannot change its dataformat_ext (from %s to %s): "+
				"its stored values are kept in the other form", s.Keyname, name, clip.Quote(oldExt), clip.Quote(f.DataformatExt))
		}
	}
	if f.Dataformat == "secret" && f.CardinalMax != 1 {
		return false, Errorf(EInvalid, "schema %s: field %s: a secret field holds one value (cardinal_max 1, not %d)", s.Keyname, name, f.CardinalMax)
	}
	if f.CardinalMax != 0 && f.CardinalMin > f.CardinalMax {
		return false, Errorf(EInvalid, "schema %s: field %s: cardinal_min %d exceeds cardinal_max %d", s.Keyname, name, f.CardinalMin, f.CardinalMax)
	}
	sort.SliceStable(s.Fields, func(i, j int) bool { return s.Fields[i].Order < s.Fields[j].Order })
	return false, nil
}

func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case int64:
		return int(x), true
	case int:
		return x, true
	case float64:
		if x == float64(int(x)) {
			return int(x), true
		}
	case string:
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(x), "%d", &n); err == nil && fmt.Sprint(n) == strings.TrimSpace(x) {
			return n, true
		}
		// A number the loader kept as text (1e3, 10.0).
		if f, err := parseFloatText(strings.TrimSpace(x)); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<31 {
			return int(f), true
		}
	}
	return 0, false
}

// HasSecrets reports whether s has a field of dataformat secret.
func (s *Schema) HasSecrets() bool {
	for _, f := range s.Fields {
		if f.Dataformat == "secret" {
			return true
		}
	}
	return false
}

// IPv4AddressFields lists the fields of s holding single IPv4 addresses (dataformat
// ipv4 without the subnet extension): the values IP collection looks at.
func (s *Schema) IPv4AddressFields() []*Field {
	var out []*Field
	for _, f := range s.Fields {
		if f.Dataformat == "ipv4" && !strings.Contains(f.DataformatExt, "subnet") {
			out = append(out, f)
		}
	}
	return out
}

// checkKeynameMode validates a schema's keyname_mode.
func checkKeynameMode(m string) error {
	w := strings.Fields(m)
	switch {
	case len(w) == 1 && (w[0] == "edit" || w[0] == "hexip"):
		return nil
	case len(w) >= 2 && w[0] == "dataformat":
		if !dataformats[w[1]] || w[1] == "external" || w[1] == "secret" {
			return Errorf(EInvalid, "keyname_mode %s: unknown dataformat %s", clip.Quote(m), clip.Quote(w[1]))
		}
		return nil
	}
	return Errorf(EInvalid, "keyname_mode %s: expected edit, hexip or dataformat <dataformat> [ext...]", clip.Quote(m))
}

// SetAttr sets the schema attribute k (displayname, is_enabled, p_read, ...) from a
// load entry; any other key is a display hint kept in Options.
func (s *Schema) SetAttr(k string, v any) error {
	text, ok := ScalarText(v)
	if !ok {
		// Display hints may be structured; keep them as given.
		s.Options[k] = v
		return nil
	}
	switch k {
	case "displayname":
		s.Displayname = text
	case "description":
		s.Description = text
	case "is_enabled":
		b, ok := v.(bool)
		if !ok {
			if b, ok = BoolWord(text); !ok {
				return Errorf(EInvalid, "schema %s: is_enabled %s is not a boolean", s.Keyname, clip.Quote(text))
			}
		}
		s.IsEnabled = b
	case "keyname_mode":
		if err := checkKeynameMode(text); err != nil {
			return err
		}
		s.KeynameMode = strings.Join(strings.Fields(text), " ")
	case "p_read":
		s.PRead = text
	case "p_create":
		s.PCreate = text
	case "p_update":
		s.PUpdate = text
	case "p_delete":
		s.PDelete = text
	case "p_admin":
		s.PAdmin = text
	default:
		s.Options[k] = v
	}
	return nil
}

// CheckCardinality checks that data holds at least each field's minimum number of
// values (external fields are computed, not stored: they are not counted).
func (s *Schema) CheckCardinality(data map[string]any) error {
	var probs Problems
	s.AddCardinality(data, &probs)
	return probs.Err()
}

// AddCardinality records in probs a problem for each field of s that data holds too
// few values of (in field order), leaving out the fields probs has a problem of
// already: their value was refused, so their count says nothing.
func (s *Schema) AddCardinality(data map[string]any, probs *Problems) {
	for _, f := range s.Fields {
		if f.CardinalMin <= 0 || f.Dataformat == "external" {
			continue
		}
		n := 0
		switch v := data[f.Keyname].(type) {
		case nil:
		case []any:
			n = len(v)
		default:
			n = 1
		}
		if n < f.CardinalMin && !probs.Has(f.Keyname) {
			probs.Add(f.Keyname, Errorf(EInvalid, "field %s: needs at least %d value(s)", f.Keyname, f.CardinalMin))
		}
	}
}
