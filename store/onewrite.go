package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"dataservice/internal/clip"
	"dataservice/store/model"
)

// Kinds of one-instance write (OneWrite.Kind): the API's POST, PUT, PATCH and DELETE
// of /api/instances/<schema>/.
const (
	WriteCreate  = "create"
	WriteReplace = "replace"
	WriteMerge   = "merge"
	WriteDelete  = "delete"
)

// OneWrite is one write of one instance asked by the per-instance API. It goes through
// the same checks as a load entry (read-only credentials, the write permission of its
// kind, keyname modes, value validation) and then the apply path (grant containment,
// the admin account's protection, revisions, the cascading rename).
type OneWrite struct {
	// Class is the instance's schema.
	Class string
	// Key is the keyname the path names; "" for a create.
	Key string
	// Kind is WriteCreate, WriteReplace, WriteMerge or WriteDelete.
	Kind string
	// Body is the request's object: the whole state (create, replace) or a JSON merge
	// patch of the state as the API shows it (merge). Unused by delete.
	Body map[string]any
	// IfMatch, when not nil, is the condition of the write: the entity tags (ETag) the
	// stored instance may have, or "*" for any existing one. It is checked in the
	// write's transaction, so no other write comes between the check and the write.
	IfMatch []string
	// Auth decides what may be written; nil acts with every permission.
	Auth *model.Auth
	// DryRun decides everything and writes nothing, as a dry-run load does.
	DryRun bool
}

// OneResult is what a OneWrite did (or, in a dry run, would do).
type OneResult struct {
	// Result is one of the Out constants (created, updated, unchanged, deleted).
	Result string
	// Schema is the instance's schema.
	Schema *model.Schema
	// Instance is the instance as written (for a delete: as it was).
	Instance *Instance
	// Renamed is set when the write renamed the instance.
	Renamed bool
	// Changed names what the write sets or changes, in the schema's order: keyname,
	// displayname, is_enabled, then fields (secret fields by name only). Empty for a
	// delete and for a write that changes nothing.
	Changed []string
	// Warnings are what did not stop the write (IP collection).
	Warnings []string
}

// ETag is the entity tag of a stored instance: a strong hash of what defines it (its
// id, classname, keyname, displayname, is_enabled and its data as stored). Every
// write that changes any of them changes it, whoever makes it (a load, a pipeline, a
// start-up migration, SQL from outside), and a write that changes nothing keeps it.
func ETag(in *Instance) string {
	raw := in.raw
	if raw == "" {
		raw = model.MustJSON(in.Data)
	}
	h := sha256.New()
	for _, part := range []string{strconv.FormatInt(in.ID, 10), in.Classname, in.Keyname, in.Displayname,
		strconv.FormatBool(in.IsEnabled), raw} {
		h.Write([]byte(strconv.Itoa(len(part))))
		h.Write([]byte{':'})
		h.Write([]byte(part))
	}
	return `"` + hex.EncodeToString(h.Sum(nil)[:16]) + `"`
}

// WriteOne applies w in one transaction and returns the instance as written. A dry
// run writes in the private database of a dry-run load (dryrun.go) and never takes
// the writer; its If-Match is checked against the same snapshot it reads.
func (db *DB) WriteOne(ctx context.Context, w OneWrite) (*OneResult, error) {
	if w.Auth != nil && w.Auth.ReadOnly {
		return nil, model.Errorf(model.EForbidden, "read-only credentials cannot write")
	}
	target, dry := db, (*dryRun)(nil)
	if w.DryRun {
		d, err := newDryRun(ctx, db)
		if err != nil {
			return nil, dryNoSpace(filepath.Dir(db.path), err)
		}
		defer d.close()
		target, dry = d.priv, d
	}
	tx, err := target.BeginAs(ctx, Revisions{Author: w.Auth.Author()})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if dry != nil {
		tx.dry, dry.tx = dry, tx
		dry.before()
	}
	res, err := tx.writeOne(ctx, w)
	switch {
	case err != nil && dry != nil:
		return nil, dryNoSpace(dry.dir, err)
	case err != nil:
		return nil, db.NoSpace(err)
	case dry != nil:
		return res, nil // the deferred rollback discards the private writes
	}
	return res, tx.Commit()
}

// writeOne is WriteOne inside the transaction, in a load entry's order: the stored
// instance and the precondition, the entry's header and keyname, the write permission
// of the kind, the values, then the apply path.
func (tx *Tx) writeOne(ctx context.Context, w OneWrite) (*OneResult, error) {
	s, err := tx.Schema(ctx, w.Class)
	if err != nil {
		return nil, err
	}
	res := &OneResult{Schema: s}
	var old *Instance
	if w.Kind != WriteCreate {
		var missing error
		if old, missing = tx.Instance(ctx, s.Keyname, w.Key); missing != nil && !IsNotFound(missing) {
			return nil, missing
		}
		// The precondition first: with If-Match, a missing instance is 412, not 404.
		if err := tx.checkIfMatch(ctx, s, w, old); err != nil {
			return nil, err
		}
		if old == nil {
			return nil, missing
		}
	}
	ao := ApplyOptions{Auth: w.Auth}
	// As in a load: only a caller holding every permission learns whether a plain
	// secret it gives is the stored one.
	compareSecrets := w.Auth == nil || w.Auth.HasAll()
	var out Outcome
	key := w.Key
	switch w.Kind {
	case WriteDelete:
		if err := model.AuthorizeWrite(w.Auth, s, model.ActionDelete); err != nil {
			return nil, err
		}
		if out, err = tx.Apply(ctx, Write{Schema: s, Old: old, Action: model.ActionDelete}, ao); err != nil {
			return nil, err
		}
		res.Result, res.Instance = out.Result, old
		return res, nil
	case WriteCreate:
		e, err := stateEntry(s, w.Body, "", false)
		if err != nil {
			return nil, err
		}
		// Refused before the entry is looked at: a caller who may not create learns
		// nothing of what exists.
		if err := model.AuthorizeWrite(w.Auth, s, model.ActionCreate); err != nil {
			return nil, err
		}
		if err := tx.prepareState(ctx, w.Auth, s, e, model.ActionCreate); err != nil {
			return nil, err
		}
		if _, err := tx.Instance(ctx, s.Keyname, e.Keyname); err == nil {
			return nil, model.Errorf(model.EConflict, "%s %s already exists", s.Keyname, clip.Quote(e.Keyname))
		} else if !IsNotFound(err) {
			return nil, err
		}
		next, err := tx.buildInstance(ctx, s, e, nil, compareSecrets)
		if err != nil {
			return nil, err
		}
		if out, err = tx.Apply(ctx, Write{Schema: s, New: next, Action: model.ActionCreate, validated: true}, ao); err != nil {
			return nil, err
		}
		key = next.Keyname
	case WriteReplace, WriteMerge:
		state := w.Body
		if w.Kind == WriteMerge {
			state = mergeState(s, old, w.Body)
		}
		e, err := stateEntry(s, state, old.Keyname, true)
		if err != nil {
			return nil, err
		}
		// Refused before the entry is looked at, and even when nothing would change, as
		// a load entry is.
		if err := model.AuthorizeWrite(w.Auth, s, model.ActionUpdate); err != nil {
			return nil, err
		}
		if err := tx.prepareState(ctx, w.Auth, s, e, model.ActionUpdate); err != nil {
			return nil, err
		}
		next, err := tx.buildInstance(ctx, s, e, old, compareSecrets)
		if err != nil {
			return nil, err
		}
		if out, err = tx.Apply(ctx, Write{Schema: s, Old: old, New: next, Action: model.ActionUpdate, validated: true}, ao); err != nil {
			return nil, err
		}
		key = next.Keyname
	default:
		return nil, model.Errorf(model.EInvalid, "unknown write %s", clip.Quote(w.Kind))
	}
	res.Result, res.Renamed, res.Warnings = out.Result, out.Renamed, out.Warnings
	if res.Instance, err = tx.Instance(ctx, s.Keyname, key); err != nil {
		return nil, err
	}
	if res.Result != OutUnchanged {
		res.Changed = changedKeys(s, old, res.Instance)
	}
	return res, nil
}

// changedKeys names what differs between the instance before (nil: none) and after,
// in the schema's order. Values are compared as stored; only names are returned, so a
// changed secret is named without a trace of its value.
func changedKeys(s *model.Schema, before, after *Instance) []string {
	var out []string
	if before == nil {
		before = &Instance{IsEnabled: true}
	}
	if before.Keyname != after.Keyname {
		out = append(out, "keyname")
	}
	if before.Displayname != after.Displayname {
		out = append(out, "displayname")
	}
	if before.IsEnabled != after.IsEnabled {
		out = append(out, "is_enabled")
	}
	for _, f := range s.Fields {
		b, inBefore := before.Data[f.Keyname]
		a, inAfter := after.Data[f.Keyname]
		if inBefore != inAfter || inBefore && model.MustJSON(b) != model.MustJSON(a) {
			out = append(out, f.Keyname)
		}
	}
	return out
}

// checkIfMatch applies w's If-Match to the stored instance old (nil: none). A dry run
// compares with the snapshot's row: the private database's copy has another id.
func (tx *Tx) checkIfMatch(ctx context.Context, s *model.Schema, w OneWrite, old *Instance) error {
	if w.IfMatch == nil {
		return nil
	}
	cur := old
	if tx.dry != nil && old != nil {
		in, err := tx.dry.snap.Instance(ctx, s.Keyname, w.Key)
		if err != nil {
			return err
		}
		cur = in
	}
	if cur == nil {
		return model.Errorf(model.EPrecondition, "precondition failed: %s %s does not exist", s.Keyname, clip.Quote(w.Key))
	}
	tag := ETag(cur)
	for _, t := range w.IfMatch {
		if t == "*" || t == tag {
			return nil
		}
	}
	return model.Errorf(model.EPrecondition, "precondition failed: %s %s has changed since the ETag given was read "+
		"(its ETag is now %s)", s.Keyname, clip.Quote(w.Key), tag)
}

// mergeState is the state of old as the API shows it (secrets left out, external
// fields not stored) with patch merged in (RFC 7396). A secret field the patch names
// is set to what the patch gives, null clearing it.
func mergeState(s *model.Schema, old *Instance, patch map[string]any) map[string]any {
	cur := map[string]any{"classname": old.Classname, "keyname": old.Keyname, "displayname": old.Displayname,
		"is_enabled": old.IsEnabled}
	for _, f := range s.Fields {
		if f.Dataformat == "secret" || f.Dataformat == "external" {
			continue
		}
		if v, ok := old.Data[f.Keyname]; ok {
			cur[f.Keyname] = v
		}
	}
	merged := model.MergePatch(cur, patch)
	for k, v := range patch {
		if f := s.Field(k); f != nil && f.Dataformat == "secret" {
			merged[k] = v
		}
	}
	return merged
}

// stateEntry is the load entry that makes an instance of s hold state. Every key must
// be a header key or a field of s (external fields, computed from other instances,
// are ignored); classname, when given, must be s. With replace, what state leaves out
// is cleared (displayname empty, is_enabled true, fields removed) except secret
// fields, which the API never shows, so a state read back and sent again keeps them;
// the keyname defaults to key (given another one, the write is a rename).
func stateEntry(s *model.Schema, state map[string]any, key string, replace bool) (*model.Entry, error) {
	var unknown []string
	e := &model.Entry{Fields: make(map[string]any, len(s.Fields)+4), File: "body", Index: 1}
	if _, ok := state["_action"]; ok {
		return nil, model.Errorf(model.EInvalid, "_action is not taken here: the method says what the write does "+
			"(POST creates, PUT replaces, PATCH changes, DELETE deletes)")
	}
	for k, v := range state {
		switch {
		case k == "classname":
			if t, ok := v.(string); v != nil && (!ok || strings.TrimSpace(t) != s.Keyname) {
				c, _ := model.ScalarText(v)
				return nil, model.Errorf(model.EInvalid, "classname %s is not the schema of the path (%s)", clip.Quote(c), s.Keyname)
			}
		case model.IsHeaderKey(k):
			e.Fields[k] = v
		default:
			f := s.Field(k)
			switch {
			case f == nil:
				unknown = append(unknown, k)
			case f.Dataformat != "external":
				e.Fields[k] = v
			}
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		quoted := make([]string, 0, min(len(unknown), 10))
		for _, k := range unknown[:min(len(unknown), 10)] {
			quoted = append(quoted, clip.Quote(k))
		}
		more := ""
		if len(unknown) > 10 {
			more = " and " + strconv.Itoa(len(unknown)-10) + " more"
		}
		return nil, model.Errorf(model.EInvalid, "%s has no field %s%s (fields are set by name; classname, keyname, "+
			"displayname and is_enabled are the other keys)", s.Keyname, strings.Join(quoted, ", "), more)
	}
	e.Fields["classname"] = s.Keyname
	if replace {
		if e.Fields["keyname"] == nil && (s.Keyname != "_user" || e.Fields["login"] == nil) {
			e.Fields["keyname"] = key
		}
		if _, ok := e.Fields["displayname"]; !ok {
			e.Fields["displayname"] = ""
		}
		if e.Fields["is_enabled"] == nil {
			e.Fields["is_enabled"] = true
		}
		for _, f := range s.Fields {
			if _, ok := e.Fields[f.Keyname]; !ok && f.Dataformat != "secret" && f.Dataformat != "external" {
				e.Fields[f.Keyname] = nil
			}
		}
	}
	// Header keys first, then the fields in the schema's order: the first problem
	// reported is the same for the same body.
	for _, k := range []string{"classname", "keyname", "displayname", "is_enabled"} {
		if _, ok := e.Fields[k]; ok {
			e.Order = append(e.Order, k)
		}
	}
	for _, f := range s.Fields {
		if _, ok := e.Fields[f.Keyname]; ok && !slices.Contains(e.Order, f.Keyname) {
			e.Order = append(e.Order, f.Keyname)
		}
	}
	return e, nil
}

// prepareState reads the entry's header keys for action and applies the schema's
// keyname mode, as the loader does; a refusal names every problem of the entry (its
// header or keyname first, then its field values).
func (tx *Tx) prepareState(ctx context.Context, auth *model.Auth, s *model.Schema, e *model.Entry, action model.Action) error {
	if err := e.Prepare(action); err != nil {
		return tx.headerProblems(ctx, auth, e, err)
	}
	return tx.nameProblems(ctx, auth, s, e, nil)
}
