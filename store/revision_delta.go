package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"dataservice/store/model"
)

// The revision row of an instance update is a "delta" row (column delta = 1): its
// after holds the whole object after the update, exactly the bytes a row of the whole
// form holds, and its before only what the update changed: the old values of the
// changed parts, under the same keys. A create keeps its whole after, a delete its
// whole before, a rename both, and schema and permission revisions stay whole (delta =
// 0, as every row written before the column existed).
//
// Every row is thus self-contained: the object after the change is the after as it
// is, and the object before it is the after with the before applied (Revision.States).
// No other row is read, so what happened since or before (writes without revision
// rows, such as start-up loads and migrations; a field dropped from the schema, which
// removes its values without revisions; the retention clean-up) cannot change what a
// row says.
//
// The before of a delta row is a JSON object with keys sorted, each present only when
// it has something to say:
//
//	absent       the changed data keys the old object did not hold (set by the
//	             update), sorted
//	data         the changed data keys the old object held, with their old values
//	displayname  the old display name, when it changed
//	is_enabled   the old enabled state, when it changed
//	keyname      the old keyname, when it changed
//
// A separate absent list, rather than a null value, says a key is missing: a value
// stored under a key that is not a field of the schema is kept as stored, and may be
// null. Secrets are masked as in a whole document; a changed secret is listed (masked),
// so the history tells it changed without telling its value.

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
	return w.Delta(s, old, next, "")
}

// RevisionDeltas builds the delta rows of updates, reusing its buffer from one row to
// the next (a write transaction holds one; the pipeline benchmark's floor too, to
// write the same bytes at the same cost). The zero value is ready; it is not safe for
// concurrent use.
type RevisionDeltas struct {
	buf []byte // the row's before then after
}

// deltaKey is one changed data key: whether the new object holds it, and its old value.
type deltaKey struct {
	name  string
	inOld bool
	ov    any
}

// Delta is RevisionDelta. dataJSON, when not empty, is next.Data already encoded (as
// the write stores it): the whole after then copies it. One pass over the data,
// comparing the values already decoded; then the before, encoded from the sorted
// changed keys, and the after into one buffer, returned as two parts of one string (one
// allocation per row).
func (w *RevisionDeltas) Delta(s *model.Schema, old, next *Instance, dataJSON string) (before, after string) {
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
		keys = append(keys, deltaKey{name: k, inOld: true, ov: ov})
	}
	if common < len(next.Data) { // next holds keys old does not
		for k := range next.Data {
			if _, ok := old.Data[k]; !ok {
				keys = append(keys, deltaKey{name: k})
			}
		}
	}
	// The order of json.Marshal's keys: by the Go strings, as the absent list is sorted.
	order := orderArr[:0]
	for i := range keys {
		order = append(order, i)
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(keys[a].name, keys[b].name) })
	buf := appendDeltaBefore(w.buf[:0], s, keys, order, old, next)
	split := len(buf)
	buf = appendInstanceDoc(buf, s, next, dataJSON)
	w.buf = buf
	both := string(buf)
	return both[:split], both[split:]
}

// appendDeltaBefore appends the before of a delta row: old's values where they differ
// from next's; under data the changed keys old holds, under absent the ones it does not.
func appendDeltaBefore(buf []byte, s *model.Schema, keys []deltaKey, order []int, old, next *Instance) []byte {
	secrets := s != nil && s.HasSecrets()
	start := len(buf)
	buf = append(buf, '{')
	n := 0
	for _, i := range order {
		k := &keys[i]
		if k.inOld {
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
		if !k.inOld {
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
			var err error
			if buf, err = model.AppendJSON(buf, k.ov); err != nil {
				// Validated values always encode, as MustJSON assumes.
				panic("store: value not encodable as JSON: " + err.Error())
			}
		}
		n++
	}
	if n > 0 {
		buf = append(buf, '}')
	}
	if old.Displayname != next.Displayname {
		if len(buf) > start+1 {
			buf = append(buf, ',')
		}
		buf = append(buf, `"displayname":`...)
		buf = model.AppendJSONString(buf, old.Displayname)
	}
	if old.IsEnabled != next.IsEnabled {
		if len(buf) > start+1 {
			buf = append(buf, ',')
		}
		buf = append(buf, `"is_enabled":`...)
		buf = strconv.AppendBool(buf, old.IsEnabled)
	}
	if old.Keyname != next.Keyname {
		if len(buf) > start+1 {
			buf = append(buf, ',')
		}
		buf = append(buf, `"keyname":`...)
		buf = model.AppendJSONString(buf, old.Keyname)
	}
	return append(buf, '}')
}

// isSecretField reports whether the field k of s has dataformat secret.
func isSecretField(s *model.Schema, k string) bool {
	f := s.Field(k)
	return f != nil && f.Dataformat == "secret"
}

// RevisionDoc is one side of an instance revision as read back: the whole object (a
// row's after, a whole row's before, or a delta row's before applied to its after) or,
// for the before of a delta row, only the changed parts: a nil field, or a data key
// neither in Data nor in Absent, did not change. Values are as JSON decodes them,
// numbers as json.Number.
type RevisionDoc struct {
	Keyname     *string        `json:"keyname,omitempty"`
	Displayname *string        `json:"displayname,omitempty"`
	IsEnabled   *bool          `json:"is_enabled,omitempty"`
	Data        map[string]any `json:"data,omitempty"`
	// Absent lists the data keys the old object did not hold (a delta row's before).
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

// States returns the whole object before and after the instance revision r, as a
// revision of the whole form records it (secrets masked; nil for no object: before a
// create, after a delete). A delta row's before is its after with the changed parts
// set back (see above); nothing but r is read.
func (r Revision) States() (before, after *RevisionDoc, err error) {
	if after, err = ParseRevisionDoc(r.After); err == nil {
		before, err = ParseRevisionDoc(r.Before)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("revision %d: unreadable record: %w", r.ID, err)
	}
	if !r.Delta {
		return before, after, nil
	}
	if before == nil || after == nil || after.Keyname == nil || after.Displayname == nil || after.IsEnabled == nil {
		return nil, nil, fmt.Errorf("revision %d: unreadable record: a change record without both sides", r.ID)
	}
	whole := *after
	whole.Data = make(map[string]any, len(after.Data)+len(before.Data))
	for k, v := range after.Data {
		whole.Data[k] = v
	}
	if before.Keyname != nil {
		whole.Keyname = before.Keyname
	}
	if before.Displayname != nil {
		whole.Displayname = before.Displayname
	}
	if before.IsEnabled != nil {
		whole.IsEnabled = before.IsEnabled
	}
	for k, v := range before.Data {
		whole.Data[k] = v
	}
	for _, k := range before.Absent {
		delete(whole.Data, k)
	}
	return &whole, after, nil
}

// ChangedKeys are the data keys a delta row's change set, changed or removed: the keys
// of its before (nil for a row of the whole form, or an unreadable one).
func (r Revision) ChangedKeys() map[string]bool {
	if !r.Delta {
		return nil
	}
	d, err := ParseRevisionDoc(r.Before)
	if err != nil || d == nil {
		return nil
	}
	changed := make(map[string]bool, len(d.Data)+len(d.Absent))
	for k := range d.Data {
		changed[k] = true
	}
	for _, k := range d.Absent {
		changed[k] = true
	}
	return changed
}
