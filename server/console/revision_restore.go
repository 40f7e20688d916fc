package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"

	"dataservice/server/httperror"
	"dataservice/store"
	"dataservice/store/model"
)

// secretMask is how a revision records a secret's value.
const secretMask = "********"

type diffRow struct {
	Field, Old, New string
	Changed, Secret bool
}

// restoreChoice is one version a diff page offers to restore: the one this revision
// wrote ("after") or the one before it ("before"), or why it cannot be restored.
type restoreChoice struct {
	Version, Label, Refused string
}

type revisionDiffData struct {
	Rev       store.Revision
	ObjectURL string
	ListURL   string
	Rows      []diffRow
	Restores  []restoreChoice
	// CanUpdate: the user may update the class (else no restore is offered).
	CanUpdate bool
	Error     string
}

// revisionDiff: GET /data/private/revision/<id>/ shows the revision old → new per field
// and the versions that may be restored; POST restores one (form field version).
func (c *Console) revisionDiff(w http.ResponseWriter, r *http.Request, q *req) {
	id, err := strconv.ParseInt(q.ps.ByName("id"), 10, 64)
	if err != nil || id <= 0 {
		c.errorPage(w, r, q, http.StatusNotFound, "not found")
		return
	}
	ctx := r.Context()
	rev, err := c.db.RevisionByID(ctx, id)
	if err == nil && !c.revisionReader(ctx, q.auth)(rev.Classname) {
		// Not told apart from a missing revision: its class is not the user's to read.
		err = model.Errorf(model.ENotFound, "revision %d not found", id)
	}
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	d := revisionDiffData{Rev: rev, ListURL: "/data/private/revision/"}
	sch, err := c.db.Schema(ctx, rev.Classname)
	if err != nil && !store.IsNotFound(err) {
		c.fail(w, r, q, err)
		return
	}
	if err != nil || rev.Classname == "_schema" || rev.Classname == "_permission" {
		sch = nil
	}
	if sch != nil {
		d.CanUpdate = model.CanWrite(q.auth, sch, model.ActionUpdate)
		if _, err := c.db.Instance(ctx, sch.Keyname, rev.Keyname); err == nil {
			d.ObjectURL = link(sch.Keyname, rev.Keyname)
		}
	}
	st := statesOf(rev)
	d.Rows = revisionRows(rev, sch, st)
	status := http.StatusOK
	if r.Method == http.MethodPost {
		version := r.PostFormValue("version")
		if sch != nil && !d.CanUpdate {
			c.forbidden(w, r, q, model.WritePermission(sch, model.ActionUpdate))
			return
		}
		plan, refused, err := c.restorePlan(ctx, rev, sch, st, version)
		if err != nil {
			c.fail(w, r, q, err)
			return
		}
		if refused == "" {
			out, err := c.apply(ctx, q.auth, sch, plan.cur, plan.next, model.ActionUpdate)
			if err == nil {
				done := "restored"
				if out.Result == store.OutUnchanged {
					done = "unchanged"
				}
				http.Redirect(w, r, link(sch.Keyname, plan.cur.Keyname)+"?done="+done, http.StatusSeeOther)
				return
			}
			if store.Aborts(err) {
				c.fail(w, r, q, err)
				return
			}
			refused, status = "The store refused it: "+store.ErrorMessage(err), httperror.Status(err)
		} else {
			status = http.StatusConflict
		}
		d.Error = "Not restored: " + refused
	}
	// What may be restored, or why not; nothing for a user who may not update the class.
	if sch == nil || d.CanUpdate {
		for _, v := range []struct{ version, label, doc string }{
			{"before", "Restore the version before this change", rev.Before},
			{"after", "Restore this version", rev.After},
		} {
			if v.doc == "" {
				continue
			}
			_, refused, err := c.restorePlan(ctx, rev, sch, st, v.version)
			if err != nil {
				c.fail(w, r, q, err)
				return
			}
			d.Restores = append(d.Restores, restoreChoice{Version: v.version, Label: v.label, Refused: refused})
		}
	}
	c.render(w, r, q, status, "revision_diff", fmt.Sprintf("Revision %d", rev.ID), d)
}

// revisionStates are the whole object before and after a revision (nil: no object),
// or why they cannot be told (reason); schema and permission revisions have none.
type revisionStates struct {
	before, after *store.RevisionDoc
	reason        string
}

// statesOf reads the object before and after rev from the row alone (a delta row's
// before is its whole after with the changed parts set back: store.Revision.States).
// An unreadable record shows as empty, and is refused as a version to restore.
func statesOf(rev store.Revision) revisionStates {
	if rev.Classname == "_schema" || rev.Classname == "_permission" {
		return revisionStates{}
	}
	b, a, err := rev.States()
	if err != nil {
		return revisionStates{reason: "the revision's record is unreadable."}
	}
	return revisionStates{before: b, after: a}
}

// revisionRows is the diff of rev, old → new per field (sch: the class's schema, nil
// when it is gone; st: the object before and after). A delta row's changed data keys
// are the ones its before names.
func revisionRows(rev store.Revision, sch *model.Schema, st revisionStates) []diffRow {
	if rev.Classname == "_schema" || rev.Classname == "_permission" {
		return docRows(rev.Before, rev.After)
	}
	return diffRows(sch, st.before, st.after, rev.ChangedKeys())
}

// diffRows lists keyname, display name, enabled and every field of either record, old
// → new; fields in the schema's order (when it still exists), then the others by
// name. Secrets are never shown: a revision records them masked, so a secret row says
// only whether it was set, removed or changed, where the records tell. changed, for a
// delta row, is the set of data keys its before names (records of the whole form: nil):
// a secret there changed, one not there did not.
func diffRows(sch *model.Schema, before, after *store.RevisionDoc, changed map[string]bool) []diffRow {
	var rows []diffRow
	str := func(d *store.RevisionDoc, f func(*store.RevisionDoc) (string, bool)) (string, bool) {
		if d == nil {
			return "", false
		}
		return f(d)
	}
	for _, p := range []struct {
		name string
		f    func(*store.RevisionDoc) (string, bool)
	}{
		{"keyname", func(d *store.RevisionDoc) (string, bool) { return deref(d.Keyname), d.Keyname != nil }},
		{"displayname", func(d *store.RevisionDoc) (string, bool) { return deref(d.Displayname), d.Displayname != nil }},
		{"is_enabled", func(d *store.RevisionDoc) (string, bool) {
			if d.IsEnabled == nil {
				return "", false
			}
			return fmt.Sprint(*d.IsEnabled), true
		}},
	} {
		o, oHas := str(before, p.f)
		n, nHas := str(after, p.f)
		if !oHas && !nHas && (before != nil || after != nil) {
			continue // a record without the part (an unreadable one)
		}
		rows = append(rows, diffRow{Field: p.name, Old: o, New: n, Changed: o != n})
	}
	keys := map[string]bool{}
	for _, d := range []*store.RevisionDoc{before, after} {
		if d != nil {
			for k := range d.Data {
				keys[k] = true
			}
			for _, k := range d.Absent {
				keys[k] = true
			}
		}
	}
	var order []string
	if sch != nil {
		for _, f := range sch.Fields {
			if keys[f.Keyname] {
				order = append(order, f.Keyname)
				delete(keys, f.Keyname)
			}
		}
	}
	var rest []string
	for k := range keys {
		rest = append(rest, k)
	}
	sort.Strings(rest)
	order = append(order, rest...)
	// An update whose whole records are equal changed what they do not record: a secret.
	sameRecords := changed == nil && before != nil && after != nil && equalDocs(before, after)
	val := func(d *store.RevisionDoc, k string) (any, bool) {
		if d == nil {
			return nil, false
		}
		v, ok := d.Data[k]
		return v, ok
	}
	for _, k := range order {
		ov, oHas := val(before, k)
		nv, nHas := val(after, k)
		secret := ov == secretMask || nv == secretMask
		if sch != nil {
			if f := sch.Field(k); f != nil && f.Dataformat == "secret" {
				secret = true
			}
		}
		if !secret {
			o, n := text(ov), text(nv)
			rows = append(rows, diffRow{Field: k, Old: o, New: n, Changed: o != n})
			continue
		}
		row := diffRow{Field: k, Secret: true}
		switch {
		case oHas && nHas && changed != nil && changed[k], oHas && nHas && sameRecords:
			row.Old, row.New, row.Changed = "(secret)", "changed (not shown)", true
		case oHas && nHas && changed != nil:
			row.Old, row.New = "(secret)", "(secret, unchanged)"
		case oHas && nHas:
			row.Old, row.New = "(secret)", "(secret; changes are not recorded)"
		case oHas:
			row.Old, row.New, row.Changed = "(secret)", "removed", true
		case nHas:
			row.Old, row.New, row.Changed = "", "set (not shown)", true
		default:
			continue
		}
		rows = append(rows, row)
	}
	return rows
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// docRows is the diff of schema and permission revisions: every top-level key of
// either record (a field definition shown as JSON), keyname and displayname first.
func docRows(before, after string) []diffRow {
	read := func(s string) map[string]any {
		m := map[string]any{}
		if s != "" {
			dec := json.NewDecoder(bytes.NewReader([]byte(s)))
			dec.UseNumber()
			_ = dec.Decode(&m) // an unreadable record shows as empty
		}
		return m
	}
	b, a := read(before), read(after)
	keys := map[string]bool{}
	for _, m := range []map[string]any{b, a} {
		for k := range m {
			keys[k] = true
		}
	}
	var rest []string
	for k := range keys {
		if k != "keyname" && k != "displayname" {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	var rows []diffRow
	for _, k := range append([]string{"keyname", "displayname"}, rest...) {
		_, inB := b[k]
		_, inA := a[k]
		if !inB && !inA {
			continue
		}
		o, n := text(b[k]), text(a[k])
		rows = append(rows, diffRow{Field: k, Old: o, New: n, Changed: o != n})
	}
	return rows
}

func equalDocs(a, b *store.RevisionDoc) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// restore is a restore ready to apply: the stored instance and the wanted state.
type restore struct {
	cur, next *store.Instance
}

// restorePlan builds the write that puts version ("before" or "after") of rev back, or
// says why it cannot (refused): the object must still be the one the revision
// describes, and every field of the version must still exist. The keyname stays (a
// rename is undone by renaming); secrets keep their current value (history holds none).
func (c *Console) restorePlan(ctx context.Context, rev store.Revision, sch *model.Schema, st revisionStates, version string) (*restore, string, error) {
	var raw string
	var doc *store.RevisionDoc
	switch version {
	case "before":
		raw, doc = rev.Before, st.before
	case "after":
		raw, doc = rev.After, st.after
	default:
		return nil, "choose the version to restore (before or after this change).", nil
	}
	switch {
	case rev.Classname == "_schema" || rev.Classname == "_permission":
		return nil, "schemas and permissions are restored by loading their definition, not from their history.", nil
	case sch == nil:
		return nil, fmt.Sprintf("the schema %s no longer exists.", rev.Classname), nil
	case raw == "":
		if version == "before" {
			return nil, "a create has no version before it.", nil
		}
		return nil, "a delete leaves no version after it.", nil
	}
	cur, err := c.db.Instance(ctx, sch.Keyname, rev.Keyname)
	if store.IsNotFound(err) {
		return nil, fmt.Sprintf("%s %s no longer exists (deleted, or renamed: its history goes on under the new keyname).", rev.Classname, rev.Keyname), nil
	}
	if err != nil {
		return nil, "", err
	}
	since, err := c.db.ObjectReplacedSince(ctx, rev.Classname, rev.Keyname, rev.ID)
	if err != nil {
		return nil, "", err
	}
	if since != "" {
		what := map[string]string{string(model.ActionCreate): "deleted and created again", string(model.ActionDelete): "deleted and created again",
			string(model.ActionRename): "replaced by another instance renamed to this keyname"}[since]
		return nil, fmt.Sprintf("%s %s was %s since this revision: the instance under this keyname now is another object.", rev.Classname, rev.Keyname, what), nil
	}
	if st.reason != "" {
		return nil, st.reason, nil
	}
	if doc == nil {
		return nil, "", fmt.Errorf("revision %d: unreadable record", rev.ID)
	}
	next := &store.Instance{ID: cur.ID, Classname: cur.Classname, Keyname: cur.Keyname, Displayname: deref(doc.Displayname),
		IsEnabled: doc.IsEnabled != nil && *doc.IsEnabled, CreatedAt: cur.CreatedAt, UpdatedAt: cur.UpdatedAt, Data: map[string]any{}}
	keys := make([]string, 0, len(doc.Data))
	for k := range doc.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := doc.Data[k]
		f := sch.Field(k)
		switch {
		case len(k) > 0 && k[0] == '_':
			continue
		case f == nil:
			return nil, fmt.Sprintf("the instance changed shape: field %s of that version no longer exists in schema %s.", k, sch.Keyname), nil
		case f.Dataformat == "secret" || f.Dataformat == "external":
			continue // secrets keep their current value; external fields are computed
		case v == secretMask:
			return nil, fmt.Sprintf("the instance changed shape: field %s held a secret in that version (recorded masked), and is no longer a secret field.", k), nil
		}
		next.Data[k] = v
	}
	for k, v := range cur.Data {
		f := sch.Field(k)
		if f == nil || f.Dataformat == "secret" {
			next.Data[k] = v // secrets, and values the schema does not name, stay as stored
		}
	}
	return &restore{cur: cur, next: next}, "", nil
}
