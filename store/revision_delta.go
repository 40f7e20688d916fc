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
// next of an instance of s (see above), built with buffers of its own. A writer of many
// rows reuses a RevisionDeltas instead.
func RevisionDelta(s *model.Schema, old, next *Instance) (before, after string) {
	var w RevisionDeltas
	return w.Delta(s, old, next)
}

// RevisionDeltas builds the delta rows of updates, reusing its buffers from one row to
// the next (a write transaction holds one; the pipeline benchmark's floor too, to
// write the same bytes at the same cost). The zero value is ready; it is not safe for
// concurrent use.
type RevisionDeltas struct {
	buf []byte // the row's before then after
}

// deltaKey is one changed data key, which sides hold it and their values.
type deltaKey struct {
	name         string
	inOld, inNew bool
	ov, nv       any
}

// Delta is RevisionDelta: one pass over the data, comparing the values already decoded,
// then both documents encoded from the sorted changed keys into one buffer and returned
// as two parts of one string (one allocation per row).
func (w *RevisionDeltas) Delta(s *model.Schema, old, next *Instance) (before, after string) {
	// The changed keys, on the stack while they are few: filling and sorting them then
	// costs no allocation and no write barrier.
	var keyArr [16]deltaKey
	var orderArr [16]int
	keys := keyArr[:0]
	common := 0 // keys of old that next holds too
	for k, ov := range old.Data {
		nv, ok := next.Data[k]
		if ok {
			common++
			if model.SameJSONValue(ov, nv) {
				continue
			}
		}
		keys = append(keys, deltaKey{name: k, inOld: true, inNew: ok, ov: ov, nv: nv})
	}
	if common < len(next.Data) { // next holds keys old does not
		for k, nv := range next.Data {
			if _, ok := old.Data[k]; !ok {
				keys = append(keys, deltaKey{name: k, inNew: true, nv: nv})
			}
		}
	}
	// The order of json.Marshal's keys: by the Go strings, as the absent lists were sorted.
	order := orderArr[:0]
	for i := range keys {
		order = append(order, i)
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(keys[a].name, keys[b].name) })
	secrets := s != nil && s.HasSecrets()
	buf := appendDeltaSide(w.buf[:0], s, secrets, keys, order, old, next, false)
	split := len(buf)
	buf = appendDeltaSide(buf, s, secrets, keys, order, next, old, true)
	w.buf = buf
	both := string(buf)
	return both[:split], both[split:]
}

// appendDeltaSide appends one side of a delta row (the new side when after): side's values
// where they differ from other's; under data the changed keys side holds, under absent
// the ones it does not.
func appendDeltaSide(buf []byte, s *model.Schema, secrets bool, keys []deltaKey, order []int, side, other *Instance, after bool) []byte {
	start := len(buf)
	buf = append(buf, '{')
	holds := func(k *deltaKey) bool { return after && k.inNew || !after && k.inOld }
	n := 0
	for _, i := range order {
		k := &keys[i]
		if holds(k) {
			continue
		}
		if n == 0 {
			buf = append(buf, `"absent":[`...)
		} else {
			buf = append(buf, ',')
		}
		buf = model.AppendJSONString(buf, k.name)
		n++
	}
	if n > 0 {
		buf = append(buf, ']')
	}
	n = 0
	for _, i := range order {
		k := &keys[i]
		if !holds(k) {
			continue
		}
		if n == 0 {
			if len(buf) > start+1 {
				buf = append(buf, ',')
			}
			buf = append(buf, `"data":{`...)
		} else {
			buf = append(buf, ',')
		}
		buf = model.AppendJSONString(buf, k.name)
		buf = append(buf, ':')
		if secrets && isSecretField(s, k.name) {
			buf = model.AppendJSONString(buf, revisionSecretMask)
		} else {
			v := k.ov
			if after {
				v = k.nv
			}
			var err error
			if buf, err = model.AppendJSON(buf, v); err != nil {
				// Validated values always encode, as MustJSON assumes.
				panic("store: value not encodable as JSON: " + err.Error())
			}
		}
		n++
	}
	if n > 0 {
		buf = append(buf, '}')
	}
	if side.Displayname != other.Displayname {
		if len(buf) > start+1 {
			buf = append(buf, ',')
		}
		buf = append(buf, `"displayname":`...)
		buf = model.AppendJSONString(buf, side.Displayname)
	}
	if side.IsEnabled != other.IsEnabled {
		if len(buf) > start+1 {
			buf = append(buf, ',')
		}
		buf = append(buf, `"is_enabled":`...)
		buf = strconv.AppendBool(buf, side.IsEnabled)
	}
	if side.Keyname != other.Keyname {
		if len(buf) > start+1 {
			buf = append(buf, ',')
		}
		buf = append(buf, `"keyname":`...)
		buf = model.AppendJSONString(buf, side.Keyname)
	}
	return append(buf, '}')
}

// isSecretField reports whether the field k of s has dataformat secret.
func isSecretField(s *model.Schema, k string) bool {
	f := s.Field(k)
	return f != nil && f.Dataformat == "secret"
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
