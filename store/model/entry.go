package model

import (
	"strings"

	"dataservice/internal/clip"
)

// Entry is one object of a load document: its keys in Fields, their order in Order,
// and where it came from. Header values are read by prepare.
type Entry struct {
	Fields map[string]any
	Order  []string
	File   string
	Index  int

	Classname      string
	Keyname        string
	Displayname    string
	HasDisplayname bool
	IsEnabled      *bool
	Action         Action

	// Transformed is set once the loader's Transform has run on the entry.
	Transformed bool
}

// headerKeys are the keys of an entry that are not field values.
var headerKeys = map[string]bool{"classname": true, "keyname": true, "displayname": true, "is_enabled": true,
	"_action": true}

// NewEntry builds an entry from a map (key order: sorted header first, then as ranged).
func NewEntry(m map[string]any) *Entry {
	e := &Entry{Fields: m}
	for _, k := range []string{"classname", "keyname", "displayname", "is_enabled"} {
		if _, ok := m[k]; ok {
			e.Order = append(e.Order, k)
		}
	}
	for k := range m {
		if !headerKeys[k] || k == "_action" {
			e.Order = append(e.Order, k)
		}
	}
	return e
}

// Set sets key to v, keeping Order in step.
func (e *Entry) Set(k string, v any) {
	if _, ok := e.Fields[k]; !ok {
		e.Order = append(e.Order, k)
	}
	e.Fields[k] = v
}

// syncOrder drops keys removed from Fields (by a pipeline) and appends new ones.
func (e *Entry) syncOrder() {
	seen := make(map[string]bool, len(e.Order))
	out := e.Order[:0]
	for _, k := range e.Order {
		if _, ok := e.Fields[k]; ok && !seen[k] {
			out = append(out, k)
			seen[k] = true
		}
	}
	for k := range e.Fields {
		if !seen[k] {
			out = append(out, k)
		}
	}
	e.Order = out
}

// Prepare reads the header keys; action overrides _action when non-empty. It reports
// every header problem at once (classname, keyname, displayname, is_enabled, _action,
// in that order: the first is the one a caller saw when only one was reported).
func (e *Entry) Prepare(action Action) error {
	e.syncOrder()
	// Refused before anything is written: on PostgreSQL a NUL that reaches the engine
	// aborts the whole transaction, not only this entry.
	if where, ok := holdsNUL(e.Fields); ok {
		return Errorf(EInvalid, "%s: %s", where, nulText)
	}
	var probs Problems
	cls, ok := e.Fields["classname"].(string)
	cls = strings.TrimSpace(cls)
	if !ok || cls == "" {
		probs.Add("classname", Errorf(EInvalid, "entry has no classname"))
	}
	e.Classname = cls
	kv := e.Fields["keyname"]
	if kv == nil && cls == "_user" {
		kv = e.Fields["login"]
	}
	k, ok := ScalarText(kv)
	if !ok {
		probs.Add("keyname", Errorf(EInvalid, "keyname must be a scalar"))
	}
	e.Keyname = strings.TrimSpace(k)
	e.HasDisplayname = false
	if d, present := e.Fields["displayname"]; present {
		t, ok := ScalarText(d)
		if !ok {
			probs.Add("displayname", Errorf(EInvalid, "displayname must be a scalar"))
		} else {
			e.Displayname, e.HasDisplayname = t, true
		}
	}
	e.IsEnabled = nil
	if v, present := e.Fields["is_enabled"]; present && v != nil {
		b, ok := v.(bool)
		if !ok {
			t, scalar := ScalarText(v)
			if b, ok = BoolWord(t); !ok || !scalar {
				probs.Add("is_enabled", Errorf(EInvalid, "is_enabled %s is not a boolean", clip.Quote(t)))
			}
		}
		if ok {
			e.IsEnabled = &b
		}
	}
	e.Action = ActionCreate
	if a, present := e.Fields["_action"]; present && a != nil {
		t, _ := ScalarText(a)
		e.Action = Action(strings.ToLower(strings.TrimSpace(t)))
	}
	if action != "" {
		e.Action = action
	}
	switch e.Action {
	case ActionCreate, ActionUpdate, ActionInit, ActionDelete, ActionEnable, ActionDisable, ActionNoop:
	case actionCreateOrUpdate:
		e.Action = ActionCreate
	default:
		probs.Add("_action", Errorf(EInvalid, "unknown _action %s", clip.Quote(string(e.Action))))
	}
	return probs.Err()
}

// Key returns the entry's classname and keyname as written (login stands for the
// keyname of a _user entry), without validating anything.
func (e *Entry) Key() (cls, key string) {
	cls, _ = ScalarText(e.Fields["classname"])
	cls = strings.TrimSpace(cls)
	kv := e.Fields["keyname"]
	if kv == nil && cls == "_user" {
		kv = e.Fields["login"]
	}
	key, _ = ScalarText(kv)
	return cls, strings.TrimSpace(key)
}

// Doc is an object in the load format with its keys in order.
type Doc struct {
	Keys []string
	Vals map[string]any
}

// Set appends or replaces key.
func (d *Doc) Set(k string, v any) {
	if d.Vals == nil {
		d.Vals = map[string]any{}
	}
	if _, ok := d.Vals[k]; !ok {
		d.Keys = append(d.Keys, k)
	}
	d.Vals[k] = v
}

// MarshalJSON writes the keys in order.
func (d *Doc) MarshalJSON() ([]byte, error) {
	buf := make([]byte, 0, 64*len(d.Keys)+2)
	buf = append(buf, '{')
	for i, k := range d.Keys {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendJSONString(buf, k)
		buf = append(buf, ':')
		var err error
		if buf, err = appendJSON(buf, d.Vals[k]); err != nil {
			return nil, err
		}
	}
	return append(buf, '}'), nil
}

// MarshalYAML writes the keys in order.
func (d *Doc) MarshalYAML() (any, error) { return d.YAMLNode() }

// IsHeaderKey reports whether k is a key of an entry that is not a field value
// (classname, keyname, displayname, is_enabled, _action).
func IsHeaderKey(k string) bool { return headerKeys[k] }

// ResolveKeyname applies the schema's keyname mode to the entry's keyname and
// displayname, and checks the keyname.
func (e *Entry) ResolveKeyname(s *Schema) error {
	mode := strings.Fields(s.KeynameMode)
	switch {
	case len(mode) > 0 && mode[0] == "hexip":
		switch {
		case e.HasDisplayname && e.Displayname != "":
			hex, err := HexIP(strings.TrimSpace(e.Displayname))
			if err != nil {
				return Errorf(EInvalid, "%s: displayname %s must be an IPv4 address (keyname mode hexip)", s.Keyname, clip.Quote(e.Displayname))
			}
			if e.Keyname != "" && e.Keyname != hex && e.Keyname != strings.TrimSpace(e.Displayname) {
				return Errorf(EInvalid, "%s: keyname %s does not match displayname %s (expected %s)", s.Keyname, clip.Quote(e.Keyname), e.Displayname, hex)
			}
			e.Displayname, e.Keyname = strings.TrimSpace(e.Displayname), hex
		case IsDottedIPv4(e.Keyname):
			e.Displayname, e.HasDisplayname = e.Keyname, true
			e.Keyname, _ = HexIP(e.Keyname)
		case IsHexIP(e.Keyname):
			// Named by its derived keyname: the address is derived back, so a new
			// instance never lacks its displayname.
			e.Displayname, e.HasDisplayname = dottedOfHex(e.Keyname), true
		default:
			return Errorf(EInvalid, "%s: keyname %s: keyname mode hexip needs an IPv4 address in displayname or keyname", s.Keyname, clip.Quote(e.Keyname))
		}
	case len(mode) > 1 && mode[0] == "dataformat":
		f := &Field{Keyname: "keyname", Dataformat: mode[1], DataformatExt: strings.Join(mode[2:], " "), CardinalMax: 1}
		v, _, err := f.normalizeOne(e.Keyname, nil)
		if err != nil {
			return Errorf(EInvalid, "%s: keyname %s is not valid for keyname mode %s: %s", s.Keyname, clip.Quote(e.Keyname), clip.Quote(s.KeynameMode), messageOf(err))
		}
		if t, _ := ScalarText(v); t != e.Keyname {
			return Errorf(EInvalid, "%s: keyname %s is not in canonical form (%s)", s.Keyname, clip.Quote(e.Keyname), t)
		}
	}
	return CheckKeyname(e.Keyname)
}

// holdsNUL reports whether a key or a string anywhere in v holds a NUL character,
// and where: the top-level key under which it is.
func holdsNUL(fields map[string]any) (string, bool) {
	for k, v := range fields {
		if strings.ContainsRune(k, 0) {
			return "a field name", true
		}
		if valueHoldsNUL(v) {
			return "field " + clip.Quote(k), true
		}
	}
	return "", false
}

func valueHoldsNUL(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.ContainsRune(x, 0)
	case []any:
		for _, it := range x {
			if valueHoldsNUL(it) {
				return true
			}
		}
	case map[string]any:
		_, ok := holdsNUL(x)
		return ok
	}
	return false
}
