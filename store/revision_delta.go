package store

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"dataservice/store/model"
)

// The revision row of an instance update records only what the update changed (a
// "delta" row, column delta = 1): its before holds the old values of the changed parts,
// its after the new ones, under the same keys. A create keeps its whole after, a delete
// its whole before, a rename both, and schema and permission revisions stay whole (delta
// = 0, as every row written before the column existed). The whole object at a delta
// row is rebuilt backward from the object's newest state (revision_rebuild.go).
//
// A delta document is a JSON object with keys sorted, each present only when it has
// something to say:
//
//	absent       the changed data keys this side does not hold (set by the
//	             update: absent before; removed: absent after), sorted
//	data         the changed data keys this side holds, with their values
//	displayname  when the display name changed
//	is_enabled   when the enabled state changed
//	keyname      when the keyname changed
//
// A separate absent list, rather than a null value, says a key is missing: a value
// stored under a key that is not a field of the schema is kept as stored, and may be
// null. Secrets are masked as in a whole document; a changed secret is listed (masked
// on both sides), so the history tells it changed without telling its value.

// RevisionInsertSQL writes a revision row of the whole form; RevisionDeltaInsertSQL a
// delta row. Arguments: classname, keyname, action, before, after, author, created_at
// (before or after NULL for no object). The benchmarks' floors write with them.
const (
	RevisionInsertSQL = `INSERT INTO revisions(classname, keyname, action, before, after, author, created_at)
		VALUES(?, ?, ?, ?, ?, ?, ?)`
	RevisionDeltaInsertSQL = `INSERT INTO revisions(classname, keyname, action, before, after, author, created_at, delta)
		VALUES(?, ?, ?, ?, ?, ?, ?, 1)`
)

// deltaChange reports whether the change of an instance old → next by action is
// recorded as a delta row: every change of an existing instance but a rename.
func deltaChange(action model.Action, old, next *Instance) bool {
	return old != nil && next != nil && action != model.ActionRename
}

// revisionSecretMask is how a revision records a secret's value.
const revisionSecretMask = "********"

// RevisionDelta is the before and after documents of the delta row of the update old →
// next of an instance of s (see above). The pipeline benchmark's floor writes the same
// bytes with it.
func RevisionDelta(s *model.Schema, old, next *Instance) (before, after string) {
	var ob, nb map[string]any // the changed data values each side holds
	var oAbsent, nAbsent []string
	mask := func(k string, v any) any {
		if s != nil {
			if f := s.Field(k); f != nil && f.Dataformat == "secret" {
				return revisionSecretMask
			}
		}
		return v
	}
	for k, ov := range old.Data {
		nv, ok := next.Data[k]
		if ok && model.SameJSONValue(ov, nv) {
			continue
		}
		if ob == nil {
			ob = map[string]any{}
		}
		ob[k] = mask(k, ov)
		if ok {
			if nb == nil {
				nb = map[string]any{}
			}
			nb[k] = mask(k, nv)
		} else {
			nAbsent = append(nAbsent, k)
		}
	}
	for k, nv := range next.Data {
		if _, ok := old.Data[k]; ok {
			continue
		}
		if nb == nil {
			nb = map[string]any{}
		}
		nb[k] = mask(k, nv)
		oAbsent = append(oAbsent, k)
	}
	slices.Sort(oAbsent)
	slices.Sort(nAbsent)
	return deltaDoc(old, next, ob, oAbsent), deltaDoc(next, old, nb, nAbsent)
}

// deltaDoc writes one side of a delta row: side's values where they differ from
// other's, data the changed values side holds, absent the changed keys it does not.
func deltaDoc(side, other *Instance, data map[string]any, absent []string) string {
	var b strings.Builder
	b.Grow(64 + 32*len(data))
	sep := func() {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
	}
	b.WriteByte('{')
	if len(absent) > 0 {
		b.WriteString(`"absent":[`)
		for i, k := range absent {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(jsonString(k))
		}
		b.WriteByte(']')
	}
	if len(data) > 0 {
		sep()
		b.WriteString(`"data":`)
		b.WriteString(model.MustJSON(data))
	}
	if side.Displayname != other.Displayname {
		sep()
		b.WriteString(`"displayname":`)
		b.WriteString(jsonString(side.Displayname))
	}
	if side.IsEnabled != other.IsEnabled {
		sep()
		b.WriteString(`"is_enabled":`)
		b.WriteString(strconv.FormatBool(side.IsEnabled))
	}
	if side.Keyname != other.Keyname {
		sep()
		b.WriteString(`"keyname":`)
		b.WriteString(jsonString(side.Keyname))
	}
	b.WriteByte('}')
	return b.String()
}

// RevisionDoc is one side of an instance revision as read back: the whole object (a
// row of the whole form, or a state rebuilt from delta rows) or, for one side of a
// delta row, only the changed parts: a nil field, or a data key neither in Data nor
// in Absent, did not change. Values are as JSON decodes them, numbers as json.Number.
type RevisionDoc struct {
	Keyname     *string        `json:"keyname,omitempty"`
	Displayname *string        `json:"displayname,omitempty"`
	IsEnabled   *bool          `json:"is_enabled,omitempty"`
	Data        map[string]any `json:"data,omitempty"`
	// Absent lists the data keys this side does not hold (delta rows only).
	Absent []string `json:"absent,omitempty"`
}

// ParseRevisionDoc reads one side of a revision row; "" (no object: before a create,
// after a delete) gives nil.
func ParseRevisionDoc(s string) (*RevisionDoc, error) {
	if s == "" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var d RevisionDoc
	if err := dec.Decode(&d); err != nil {
		return nil, err
	}
	if d.Data == nil {
		d.Data = map[string]any{}
	}
	return &d, nil
}

// overlay writes the parts d records over state (a whole document), in place: undoing
// a delta row's change overlays its before, redoing it its after.
func (d *RevisionDoc) overlay(state *RevisionDoc) {
	if d.Keyname != nil {
		state.Keyname = d.Keyname
	}
	if d.Displayname != nil {
		state.Displayname = d.Displayname
	}
	if d.IsEnabled != nil {
		state.IsEnabled = d.IsEnabled
	}
	for k, v := range d.Data {
		state.Data[k] = v
	}
	for _, k := range d.Absent {
		delete(state.Data, k)
	}
}

// clone is a copy of a whole document whose data map may be changed.
func (d *RevisionDoc) clone() *RevisionDoc {
	c := *d
	c.Data = make(map[string]any, len(d.Data))
	for k, v := range d.Data {
		c.Data[k] = v
	}
	c.Absent = nil
	return &c
}
