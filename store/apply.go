package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"dataservice/internal/clip"
	"dataservice/store/model"
)

// Write is one change asked of an instance: the input of the apply path, which the
// loader, the pipeline task and the console all go through.
type Write struct {
	// Schema is the instance's schema.
	Schema *model.Schema
	// Old is the stored state; nil when the instance does not exist.
	Old *Instance
	// New is the wanted state for create, init and update: keyname, displayname,
	// is_enabled and every data value (what is absent from New.Data is removed). A
	// Keyname other than Old's is a cascading rename. Apply validates it and may
	// normalize it in place. Ignored by delete, enable, disable and noop.
	New *Instance
	// Action is what the write does.
	Action model.Action

	// validated is set by the loader, which built New with buildInstance.
	validated bool
	// ifAbsent makes a create insert only when the keyname is free; otherwise Apply
	// writes nothing and returns errExists (the loader's insert-first path).
	ifAbsent bool
}

// ApplyOptions are who applies a Write and how.
type ApplyOptions struct {
	// Auth decides what may be written; nil acts with every permission.
	Auth *model.Auth
	// System allows what only the start-up sequence may do (delete the admin account).
	System bool
	// Migration marks a write of the start-up sequence (bootstrap, migration blocks,
	// the keys-and-admin step): it needs System and the system identity (Auth nil or
	// model.SystemAuth), and it writes no revision row whatever the transaction records
	// otherwise, as start-up migrations write none. No request of the API or the
	// console sets it: only a Migration transaction does.
	Migration bool
	// DryRun decides the outcome, checks a rename, and writes nothing.
	DryRun bool
}

// Outcome is what Apply did (or, in a dry run, would do).
type Outcome struct {
	// Result is one of the Out constants.
	Result string
	// Renamed is set when the write renamed the instance (or would, in a dry run).
	Renamed bool
	// Warnings are what did not stop the write: the addresses of its ipv4 fields that
	// IP collection did not collect because the ipam_ip schema refuses them, and why.
	Warnings []string
}

// errExists reports that an ifAbsent create found the keyname taken.
var errExists = errors.New("instance exists")

// Apply applies one write in its own transaction (the console's single-instance
// create, edit, delete, enable, disable and rename).
func (db *DB) Apply(ctx context.Context, w Write, opts ApplyOptions) (Outcome, error) {
	tx, err := db.BeginAs(ctx, Revisions{Author: opts.Auth.Author()})
	if err != nil {
		return Outcome{}, err
	}
	defer tx.Rollback()
	out, err := tx.Apply(ctx, w, opts)
	if err != nil {
		return Outcome{}, err
	}
	if opts.DryRun {
		return out, nil
	}
	return out, tx.Commit()
}

// Apply applies one write inside the transaction: the `_action` dispatch, the
// permission checks, the admin account's protection, the "unchanged" test and the
// write with its revision. Refusals (invalid, not found, forbidden, conflict) happen
// before anything is written; an internal error may leave partial writes behind, so
// the caller must then roll back.
func (tx *Tx) Apply(ctx context.Context, w Write, opts ApplyOptions) (Outcome, error) {
	if opts.Migration {
		if !opts.System || opts.Auth != nil && opts.Auth.Kind != model.AuthSystem {
			return Outcome{}, model.Errorf(model.EForbidden, "permission denied: a migration write needs the system identity")
		}
		v := *tx
		v.rev.Off, v.migration = true, true
		tx = &v
	}
	switch w.Action {
	case model.ActionNoop:
		return Outcome{Result: OutSkipped}, nil
	case model.ActionDelete:
		return tx.applyDelete(ctx, w, opts)
	case model.ActionEnable, model.ActionDisable:
		return tx.applyEnabled(ctx, w, opts)
	case model.ActionInit:
		if w.Old != nil {
			return Outcome{Result: OutUnchanged}, nil
		}
	case model.ActionCreate, model.ActionUpdate:
		if w.Old == nil && w.Action == model.ActionUpdate {
			return Outcome{}, model.Errorf(model.ENotFound, "%s %s not found", w.Schema.Keyname, clip.Quote(keyOf(w)))
		}
	default:
		return Outcome{}, model.Errorf(model.EInvalid, "unknown _action %s", clip.Quote(string(w.Action)))
	}
	if w.New == nil {
		return Outcome{}, model.Errorf(model.EInvalid, "%s: %s needs the new state", w.Schema.Keyname, w.Action)
	}
	if IsAuthoredClass(w.Schema.Keyname) {
		// The last writer is the author, whoever the caller says it is. An update keeps
		// the stored author until the write changes something else (applyUpdate), so
		// loading the same content again leaves the rule or schedule as it was.
		if w.New.Data == nil {
			w.New.Data = map[string]any{}
		}
		if w.Old == nil {
			setAuthor(w.New.Data, opts.Auth)
		} else {
			keepAuthor(w.New.Data, w.Old.Data)
		}
	}
	if w.Old == nil {
		return tx.applyCreate(ctx, w, opts)
	}
	return tx.applyUpdate(ctx, w, opts)
}

// applyDelete deletes w.Old; a missing instance is unchanged.
func (tx *Tx) applyDelete(ctx context.Context, w Write, opts ApplyOptions) (Outcome, error) {
	s, old := w.Schema, w.Old
	if old == nil {
		return Outcome{Result: OutUnchanged}, nil
	}
	if err := model.AuthorizeWrite(opts.Auth, s, model.ActionDelete); err != nil {
		return Outcome{}, err
	}
	if err := tx.containGrant(ctx, opts.Auth, s, old, nil); err != nil {
		return Outcome{}, err
	}
	if isAdminAccount(s, old) && !opts.System {
		return Outcome{}, model.Errorf(model.EForbidden, "the admin account cannot be deleted")
	}
	if !opts.DryRun {
		if err := tx.deleteInstance(ctx, s, old); err != nil {
			return Outcome{}, err
		}
	}
	return Outcome{Result: OutDeleted}, nil
}

// applyEnabled sets is_enabled of w.Old as w.Action (enable or disable) says.
func (tx *Tx) applyEnabled(ctx context.Context, w Write, opts ApplyOptions) (Outcome, error) {
	s, old := w.Schema, w.Old
	if old == nil {
		return Outcome{}, model.Errorf(model.ENotFound, "%s %s not found", s.Keyname, clip.Quote(keyOf(w)))
	}
	want := w.Action == model.ActionEnable
	if old.IsEnabled == want {
		return Outcome{Result: OutUnchanged}, nil
	}
	if err := model.AuthorizeWrite(opts.Auth, s, model.ActionUpdate); err != nil {
		return Outcome{}, err
	}
	if err := tx.containGrant(ctx, opts.Auth, s, old, nil); err != nil {
		return Outcome{}, err
	}
	out := Outcome{Result: OutDisabled}
	if want {
		out.Result = OutEnabled
	}
	next := *old
	next.IsEnabled = want
	if IsAuthoredClass(s.Keyname) {
		// Arming (or disarming) a rule or a schedule is a write by whoever does it:
		// it acts from now on with that principal's permissions, not with those of
		// whoever wrote it before; arming it checks it as an update that enables it
		// would (what it names exists, its writer could run its pipeline).
		next.Data = maps.Clone(old.Data)
		if next.Data == nil {
			next.Data = map[string]any{}
		}
		setAuthor(next.Data, opts.Auth)
		if want {
			if err := tx.classChecks(ctx, s, &next, nil); err != nil {
				return Outcome{}, err
			}
			if err := tx.checkAuthored(ctx, opts.Auth, s, old, &next); err != nil {
				return Outcome{}, err
			}
		}
	}
	if !opts.DryRun {
		var err error
		if _, out.Warnings, err = tx.write(ctx, s, old, &next, w.Action, model.MustJSON(next.Data), false); err != nil {
			return Outcome{}, err
		}
	}
	return out, nil
}

// keepAuthor puts the stored author of an authored class's instance (old) into the
// data of its next state, whatever the caller gave.
func keepAuthor(data, old map[string]any) {
	for _, k := range []string{AuthorField, AuthorIDField} {
		if v, ok := old[k]; ok {
			data[k] = v
		} else {
			delete(data, k)
		}
	}
}

// setAuthor records auth as the author of an authored class's instance data: its
// name (model.Auth.Author) and its instance id (model.Auth.AuthorID).
func setAuthor(data map[string]any, auth *model.Auth) {
	data[AuthorField] = auth.Author()
	data[AuthorIDField] = auth.AuthorID()
}

// applyCreate inserts w.New.
func (tx *Tx) applyCreate(ctx context.Context, w Write, opts ApplyOptions) (Outcome, error) {
	s, next := w.Schema, w.New
	var verr error
	if !w.validated {
		var checked *Instance
		if checked, verr = tx.validateNew(ctx, s, next); verr == nil {
			*w.New = *checked
		}
	}
	if err := tx.classChecks(ctx, s, next, verr); err != nil {
		return Outcome{}, err
	}
	if err := model.AuthorizeWrite(opts.Auth, s, model.ActionCreate); err != nil {
		return Outcome{}, err
	}
	if err := tx.containGrant(ctx, opts.Auth, s, nil, next); err != nil {
		return Outcome{}, err
	}
	if err := tx.checkAuthored(ctx, opts.Auth, s, nil, next); err != nil {
		return Outcome{}, err
	}
	if _, err := tx.sealSecrets(s, nil, next, opts.DryRun); err != nil {
		return Outcome{}, err
	}
	if opts.DryRun {
		return Outcome{Result: OutCreated}, nil
	}
	inserted, warnings, err := tx.write(ctx, s, nil, next, model.ActionCreate, model.MustJSON(next.Data), w.ifAbsent)
	if err != nil {
		return Outcome{}, err
	}
	if !inserted {
		return Outcome{}, errExists
	}
	return Outcome{Result: OutCreated, Warnings: warnings}, nil
}

// applyUpdate writes w.New over w.Old: unchanged when nothing differs; a changed
// keyname is a cascading rename.
func (tx *Tx) applyUpdate(ctx context.Context, w Write, opts ApplyOptions) (Outcome, error) {
	s, old, next := w.Schema, w.Old, w.New
	differs := false // the validation saw a value that encodes differently
	var verr error
	if !w.validated {
		differs, verr = tx.prepare(ctx, s, next, old)
	}
	if err := tx.classChecks(ctx, s, next, verr); err != nil {
		return Outcome{}, err
	}
	renamed := next.Keyname != old.Keyname
	var data string // the one encoding of the new state; a dry run needs none
	if !opts.DryRun {
		data = model.MustJSON(next.Data)
	}
	// The stored text is the judge when there is one (a value such as -0 may not survive
	// a decode and re-encode); differs implies the encodings of the maps differ.
	changed := next.Displayname != old.Displayname || next.IsEnabled != old.IsEnabled ||
		!(data != "" && old.raw == data || !differs && model.SameJSON(old.Data, next.Data))
	if !changed && !renamed {
		return Outcome{Result: OutUnchanged}, nil
	}
	if IsAuthoredClass(s.Keyname) && (changed || renamed) {
		setAuthor(next.Data, opts.Auth)
		changed = true
		if !opts.DryRun {
			data = model.MustJSON(next.Data)
		}
	}
	if changed {
		if err := model.AuthorizeWrite(opts.Auth, s, model.ActionUpdate); err != nil {
			return Outcome{}, err
		}
	}
	if err := tx.containGrant(ctx, opts.Auth, s, old, next); err != nil {
		return Outcome{}, err
	}
	if changed {
		if err := tx.checkAuthored(ctx, opts.Auth, s, old, next); err != nil {
			return Outcome{}, err
		}
		if sealed, err := tx.sealSecrets(s, old, next, opts.DryRun); err != nil {
			return Outcome{}, err
		} else if sealed && !opts.DryRun {
			data = model.MustJSON(next.Data)
		}
	}
	if renamed {
		if !model.CanRename(opts.Auth) {
			return Outcome{}, model.Errorf(model.EForbidden, "permission denied: renaming needs %s", model.PermKeynameRename)
		}
		if isAdminAccount(s, old) {
			// The start-up sequence manages the account by this login.
			return Outcome{}, model.Errorf(model.EForbidden, "the admin account cannot be renamed")
		}
		if err := tx.checkRenameReach(ctx, opts.Auth, s, old); err != nil {
			return Outcome{}, err
		}
		warnings, err := tx.applyRename(ctx, s, old, next, data, changed, opts.DryRun)
		return Outcome{Result: OutUpdated, Renamed: true, Warnings: warnings}, err
	}
	out := Outcome{Result: OutUpdated}
	if !opts.DryRun {
		var err error
		if _, out.Warnings, err = tx.write(ctx, s, old, next, model.ActionUpdate, data, false); err != nil {
			return Outcome{}, err
		}
	}
	return out, nil
}

// applyRename writes the other changes and the cascading rename atomically; it
// returns the warnings of the write (IP collection).
func (tx *Tx) applyRename(ctx context.Context, s *model.Schema, old, next *Instance, data string, changed, dryRun bool) ([]string, error) {
	newKey := next.Keyname
	// The stored instance is old: rename it by its ID, whatever ID the caller left
	// in next (a state built from a form has none).
	at := *next
	at.ID, at.Keyname = old.ID, old.Keyname
	if dryRun {
		return nil, tx.CheckRename(ctx, s, &at, newKey)
	}
	mark := tx.markEvents()
	if _, err := tx.execContext(ctx, "SAVEPOINT apply_rename"); err != nil {
		return nil, fmt.Errorf("rename %s %s: %w", s.Keyname, old.Keyname, err)
	}
	var warnings []string
	err := func() error {
		if changed {
			var err error
			if _, warnings, err = tx.write(ctx, s, old, &at, model.ActionUpdate, data, false); err != nil {
				return err
			}
		}
		_, err := tx.cascadeRename(ctx, s, &at, newKey)
		return err
	}()
	if err != nil {
		tx.execContext(ctx, "ROLLBACK TO apply_rename")
		tx.rollbackEvents(mark)
	}
	tx.execContext(ctx, "RELEASE apply_rename")
	if err != nil {
		return nil, err
	}
	*next = at
	return warnings, nil
}

// validateNew validates a new instance from outside the loader as a load would create
// it: keyname mode, defaults, every value.
func (tx *Tx) validateNew(ctx context.Context, s *model.Schema, next *Instance) (*Instance, error) {
	e := entryOfInstance(s, next)
	if err := e.ResolveKeyname(s); err != nil {
		// The values' problems too, so a form shows every one at once.
		var probs model.Problems
		if probs.Add(keynameField(err), err) != nil {
			return nil, err
		}
		if verr := tx.entryValues(ctx, s, e, nil, false, nil, &probs); verr != nil {
			return nil, verr
		}
		return nil, probs.Err()
	}
	return tx.buildInstance(ctx, s, e, nil, false)
}

// keynameField is the field a keyname refusal is about: displayname when the keyname
// mode derives the keyname from it, else keyname.
func keynameField(err error) string {
	if strings.Contains(ErrorMessage(err), "displayname") {
		return "displayname"
	}
	return "keyname"
}

// entryOfInstance is the load entry that creates in.
func entryOfInstance(s *model.Schema, in *Instance) *model.Entry {
	e := &model.Entry{Fields: make(map[string]any, len(in.Data)), Classname: s.Keyname, Keyname: in.Keyname,
		Displayname: in.Displayname, HasDisplayname: true, Action: model.ActionCreate}
	enabled := in.IsEnabled
	e.IsEnabled = &enabled
	for k, v := range in.Data {
		e.Set(k, v)
	}
	return e
}

func isAdminAccount(s *model.Schema, in *Instance) bool {
	return s.Keyname == "_user" && in.Keyname == "admin"
}

func keyOf(w Write) string {
	if w.New != nil {
		return w.New.Keyname
	}
	return ""
}
