package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"dataservice/internal/clip"
	"dataservice/rules"
	"dataservice/store/model"
)

// Load outcomes, counted in LoadResult.
const (
	OutCreated   = "created"
	OutUpdated   = "updated"
	OutUnchanged = "unchanged"
	OutDeleted   = "deleted"
	OutEnabled   = "enabled"
	OutDisabled  = "disabled"
	OutSkipped   = "skipped"
)

// LoadOptions tune a load.
type LoadOptions struct {
	// Auth decides what may be written; nil acts with every permission (the CLI).
	Auth *model.Auth
	// Author overrides the revisions' author (default: Auth.Author()).
	Author string
	// Action, when set, replaces every entry's _action.
	Action model.Action
	// DryRun computes the result and writes nothing.
	DryRun bool
	// System allows writing built-in objects (names starting with _) and marks
	// permissions built-in: bootstrap and reloads use it.
	System bool
	// NoRevisions suppresses revision rows (start-up).
	NoRevisions bool
	// Transform runs on each entry before it is loaded (a load-time pipeline); it
	// may change the entry in place or discard it.
	Transform rules.Transform
	// BatchSize is the number of entries per committed transaction (default 1000).
	BatchSize int
	// Strict refuses an entry that names fields its schema does not have; without it
	// they are ignored and counted in the result's warnings.
	Strict bool
	// OnChange, when set, is given each change the load makes (or, in a dry run,
	// would make) as the revision it records, secrets masked; with the second pass an
	// entry's change may come after later entries' (DB.Load and DB.LoadStream only).
	OnChange func(Revision)
}

// Load loads entries, committing every BatchSize entries. Each entry is applied
// atomically; a failed entry never stops the others. Entries that failed only for an
// unresolved reference are retried once after all others.
func (db *DB) Load(ctx context.Context, entries []*model.Entry, opts LoadOptions) (*LoadResult, error) {
	return db.LoadStream(ctx, func(yield func(*model.Entry) error) error {
		for _, e := range entries {
			if err := yield(e); err != nil {
				return err
			}
		}
		return nil
	}, opts)
}

// LoadStream is Load over entries produced one at a time by source, which calls yield
// for each (and returns yield's error when it fails): a document is loaded as it is
// read, holding only the current batch and the entries waiting for a retry.
//
// When it fails part-way (a full disk, an internal error), the result it returns with
// the error counts the entries of the batches committed before the failure (all zero
// in a dry run): loading the same entries again completes the load, since an entry
// already loaded comes back unchanged.
//
// A dry run takes no writer: it reads a snapshot and writes into a private database
// (dryrun.go).
func (db *DB) LoadStream(ctx context.Context, source func(yield func(*model.Entry) error) error, opts LoadOptions) (*LoadResult, error) {
	target, dry := db, (*dryRun)(nil)
	if opts.DryRun {
		d, err := newDryRun(ctx, db)
		if err != nil {
			return &LoadResult{DryRun: true}, dryNoSpace(filepath.Dir(db.path), err)
		}
		defer d.close()
		target, dry = d.priv, d
	}
	res, committed, err := target.loadStream(ctx, source, opts, dry)
	if err != nil && dry != nil {
		// The dry run wrote only in its private database: a full disk is its own.
		err = dryNoSpace(dry.dir, err)
		if ErrorCode(err) == model.EDiskFull {
			db.log.Warn("dry run failed: disk full", "dir", dry.dir, "error", errors.Unwrap(err))
		}
		return committed, err
	}
	if err != nil {
		return committed, db.NoSpace(err)
	}
	return res, nil
}

// loadStream is LoadStream; with dry set, db is the dry run's private database and
// the whole load is one transaction, rolled back.
func (db *DB) loadStream(ctx context.Context, source func(yield func(*model.Entry) error) error, opts LoadOptions, dry *dryRun) (res, committed *LoadResult, err error) {
	if opts.BatchSize <= 0 {
		opts.BatchSize = 1000
	}
	res = &LoadResult{DryRun: opts.DryRun, strict: opts.Strict}
	committed = &LoadResult{DryRun: opts.DryRun}
	var tx *Tx
	var l *loader
	defer func() {
		if tx != nil {
			tx.Rollback()
		}
	}()
	inBatch := 0
	var began time.Time
	begin := func() error {
		var err error
		if tx, err = db.BeginAs(ctx, Revisions{Author: loadAuthor(opts), Off: opts.NoRevisions, Observe: opts.OnChange}); err != nil {
			return err
		}
		l = &loader{tx: tx, opts: opts}
		began = time.Now()
		if dry != nil {
			tx.dry, dry.tx = dry, tx
			l.before = func(context.Context, *model.Entry) error { dry.before(); return nil }
		}
		return nil
	}
	flush := func() error {
		if tx == nil || dry != nil {
			// A dry run's private database has no other writer to make way for.
			return nil
		}
		err := tx.Commit()
		if err == nil {
			*committed = *res
			committed.Messages = append([]EntryError(nil), res.Messages...)
		}
		tx, inBatch = nil, 0
		return err
	}
	var retry []*model.Entry
	seen := 0                          // entries the source gave
	retrySeq := map[*model.Entry]int{} // the place in the load of each retried entry
	one := func(e *model.Entry, second bool) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if tx == nil {
			if err := begin(); err != nil {
				return err
			}
		}
		seq, retried := retrySeq[e]
		if !retried {
			seen++
			seq = seen
		}
		outcome, err := l.loadEntry(ctx, e)
		l.report(res)
		l.tx.db.HoldForTest(1)
		switch {
		case err == nil:
			res.count(outcome)
		case !second && model.IsUnresolved(err):
			retry = append(retry, e)
			retrySeq[e] = seq
			l.unknown = nil // counted when the entry is done
		case Aborts(err):
			return fmt.Errorf("%s entry %d: %w", e.File, e.Index, err)
		default:
			res.fail(e, err, seq)
		}
		l.reportUnknown(res, e)
		inBatch++
		// A batch also commits once it has held the writer for a quarter of a second, so
		// other writers never wait long behind a large load.
		if inBatch >= opts.BatchSize || time.Since(began) > maxBatchTime {
			return flush()
		}
		return nil
	}
	pass := func(list []*model.Entry, second bool) error {
		for _, e := range list {
			if err := one(e, second); err != nil {
				return err
			}
		}
		return nil
	}
	if err := source(func(e *model.Entry) error { return one(e, false) }); err != nil {
		return nil, committed, err
	}
	// Retry passes go on while they resolve something, so chains of forward
	// references load; the last pass reports what is still unresolved.
	for len(retry) > 0 {
		list := retry
		retry = nil
		if err := pass(list, false); err != nil {
			return nil, committed, err
		}
		if len(retry) == len(list) {
			retry = nil
			if err := pass(list, true); err != nil {
				return nil, committed, err
			}
		}
	}
	res.finish()
	if dry != nil {
		return res, nil, nil // the deferred rollback discards the private writes
	}
	if err := flush(); err != nil {
		return nil, committed, err
	}
	return res, nil, nil
}

// maxBatchTime is how long a load batch holds the writer before it commits, measured
// on the process's monotonic clock (a duration no row records, so not db.Now).
const maxBatchTime = 250 * time.Millisecond

func loadAuthor(opts LoadOptions) string {
	if opts.Author != "" {
		return opts.Author
	}
	return opts.Auth.Author()
}

// Load loads entries inside the caller's transaction (used by start-up blocks so a
// block is one transaction). The second pass runs as in DB.Load. Its revisions name
// the load's author and are left out when the transaction or the load says so;
// DryRun and BatchSize are the caller's business (it owns the transaction).
func (tx *Tx) Load(ctx context.Context, entries []*model.Entry, opts LoadOptions) (*LoadResult, error) {
	tx = tx.withRevisions(Revisions{Author: loadAuthor(opts), Off: tx.rev.Off || opts.NoRevisions})
	l := &loader{tx: tx, opts: opts}
	res := &LoadResult{DryRun: opts.DryRun, strict: opts.Strict}
	list, last := entries, false
	seqs := make(map[*model.Entry]int, len(entries))
	for i, e := range entries {
		seqs[e] = i + 1
	}
	for len(list) > 0 {
		var retry []*model.Entry
		for _, e := range list {
			outcome, err := l.loadEntry(ctx, e)
			l.report(res)
			switch {
			case err == nil:
				res.count(outcome)
			case !last && model.IsUnresolved(err):
				retry = append(retry, e)
				l.unknown = nil // counted when the entry is done
			case Aborts(err):
				return nil, fmt.Errorf("%s entry %d: %w", e.File, e.Index, err)
			default:
				res.fail(e, err, seqs[e])
			}
			l.reportUnknown(res, e)
		}
		// Retry while a pass resolves something; the last pass reports the rest.
		last = len(retry) == len(list)
		list = retry
	}
	res.finish()
	return res, nil
}

// loader applies load entries in one transaction.
type loader struct {
	tx   *Tx
	opts LoadOptions
	// sawExisting turns the insert-first path off once an entry existed.
	sawExisting bool
	// before, when set, runs before each entry is applied (a dry run counts the entry
	// and calls its test hook there).
	before func(context.Context, *model.Entry) error
	// warnings are the apply path's warnings (IP collection) not yet in the result.
	warnings []string
	// unknown are the unknown field names of the entry being loaded.
	unknown []string
}

// reportUnknown counts the unknown field names of e, just loaded, in res.
func (l *loader) reportUnknown(res *LoadResult, e *model.Entry) {
	if len(l.unknown) > 0 {
		res.noteUnknown(e.Classname, l.unknown)
		l.unknown = nil
	}
}

// report moves the loader's warnings into res (at most MaxErrorMessages kept).
func (l *loader) report(res *LoadResult) {
	if len(l.warnings) > 0 {
		res.Warnings = appendBounded(res.Warnings, l.warnings)
		l.warnings = l.warnings[:0]
	}
}

// loadEntry applies one entry inside a savepoint so a failure leaves nothing behind.
func (l *loader) loadEntry(ctx context.Context, e *model.Entry) (string, error) {
	tx, opts := l.tx, l.opts
	// The transform changes the entry in place: an entry retried by the second pass
	// has been transformed already.
	if opts.Transform != nil && !e.Transformed {
		if err := e.Prepare(""); err != nil {
			return "", err
		}
		discard, err := opts.Transform(e.Fields)
		e.Transformed = true
		if err != nil {
			return "", model.Errorf(model.EInvalid, "%s", tx.transformMessage(ctx, e, err))
		}
		if discard {
			return OutSkipped, nil
		}
	}
	if err := e.Prepare(opts.Action); err != nil {
		return "", l.tx.headerProblems(ctx, l.opts.Auth, e, err)
	}
	if l.before != nil {
		if err := l.before(ctx, e); err != nil {
			return "", err
		}
	}
	// Every refusal of an entry happens before its first write, so a failed entry
	// leaves nothing behind without a savepoint (two statements an entry saved). Should
	// an entry ever fail after writing, the failure is made internal: the caller then
	// rolls the whole batch back, which keeps every entry atomic.
	written := tx.writes
	outcome, err := l.applyEntry(ctx, e)
	if err != nil && tx.writes != written && !Aborts(err) {
		return "", fmt.Errorf("entry failed after writing: %w", err)
	}
	return outcome, err
}

// transformMessage is the message of a load-time pipeline's failure on e. When e's
// class has secret fields, a value the rule quoted is left out: it may be a plain
// secret, copied to any field by an earlier rule.
func (tx *Tx) transformMessage(ctx context.Context, e *model.Entry, err error) string {
	var r interface{ Redacted() string }
	if !errors.As(err, &r) {
		return err.Error()
	}
	s, serr := tx.Schema(ctx, e.Classname)
	if serr != nil {
		return r.Redacted()
	}
	for _, f := range s.Fields {
		if f.Dataformat == "secret" {
			return r.Redacted()
		}
	}
	return err.Error()
}

func (l *loader) applyEntry(ctx context.Context, e *model.Entry) (string, error) {
	tx, opts := l.tx, l.opts
	if opts.Auth != nil && opts.Auth.ReadOnly {
		return "", model.Errorf(model.EForbidden, "read-only credentials cannot load")
	}
	switch e.Classname {
	case "_schema", "_permission":
		if p := model.ClassPermission(e.Classname); opts.Auth != nil && !opts.Auth.Has(p) {
			return "", model.Errorf(model.EForbidden, "permission denied: %s needs %s", e.Classname, p)
		}
		if e.Keyname == "" {
			return "", model.Errorf(model.EInvalid, "entry has no keyname")
		}
		if e.Classname == "_schema" {
			return tx.putSchema(ctx, e, e.Action, opts.System)
		}
		return tx.putPermission(ctx, e, opts.System)
	}
	s, err := tx.Schema(ctx, e.Classname)
	if IsNotFound(err) {
		return "", model.Errorf(model.EInvalid, "unknown class %s", clip.Quote(e.Classname))
	}
	if err != nil {
		return "", err
	}
	return l.putInstance(ctx, s, e)
}

// putInstance applies an instance entry of schema s: it builds the new state from the
// entry and the stored object and hands it to the apply path.
func (l *loader) putInstance(ctx context.Context, s *model.Schema, e *model.Entry) (string, error) {
	tx, opts := l.tx, l.opts
	l.unknown = unknownFields(s, e)
	var refused []string // the unknown names a strict load refuses
	if opts.Strict {
		refused = l.unknown
	}
	if err := tx.nameProblems(ctx, opts.Auth, s, e, refused); err != nil {
		return "", err
	}
	ao := ApplyOptions{Auth: opts.Auth, System: opts.System}
	// Only a caller holding every permission learns whether a plain secret it gives is
	// the stored one (as "unchanged"): for anyone else a given plain secret is always a
	// change, so a load (dry run or not) is no oracle on secrets.
	compareSecrets := opts.Auth == nil || opts.Auth.HasAll()
	// Insert first while entries keep being new (an initial load): one statement
	// instead of a lookup and an insert. When the keyname exists, or the entry is not
	// valid as a new object, the lookup path below decides with the stored object.
	// Event rules and schedules always take the lookup path: their checks depend on
	// the stored state (a secret left out is kept, a new webhook_url needs a new one).
	if e.Action == model.ActionCreate && !l.sawExisting && !IsAuthoredClass(s.Keyname) &&
		model.CanWrite(opts.Auth, s, model.ActionCreate) {
		if next, err := tx.buildInstance(ctx, s, e, nil, compareSecrets); err == nil {
			out, err := tx.Apply(ctx, Write{Schema: s, New: next, Action: model.ActionCreate, validated: true, ifAbsent: true}, ao)
			if !errors.Is(err, errExists) {
				l.warnings = append(l.warnings, out.Warnings...)
				return out.Result, err
			}
			l.sawExisting = true
		}
	}
	old, err := tx.Instance(ctx, s.Keyname, e.Keyname)
	if err != nil && !IsNotFound(err) {
		return "", err
	}
	w := Write{Schema: s, Old: old, New: &Instance{Classname: s.Keyname, Keyname: e.Keyname}, Action: e.Action, validated: true}
	// A load is refused before the entry is looked at when the caller may not make
	// the write its action asks for, whatever the stored object holds.
	if op := loadOp(e.Action, old); op != "" && (old != nil || e.Action == model.ActionCreate || e.Action == model.ActionInit) {
		if err := model.AuthorizeWrite(opts.Auth, s, op); err != nil {
			return "", err
		}
	}
	switch e.Action {
	case model.ActionCreate, model.ActionUpdate, model.ActionInit:
		if old != nil || e.Action != model.ActionUpdate {
			if e.Action == model.ActionInit && old != nil {
				break
			}
			if w.New, err = tx.buildInstance(ctx, s, e, old, compareSecrets); err != nil {
				return "", err
			}
		}
	}
	out, err := tx.Apply(ctx, w, ao)
	l.warnings = append(l.warnings, out.Warnings...)
	if err == nil && old != nil {
		switch out.Result {
		case OutDeleted, OutEnabled, OutDisabled:
			if n := notApplied(s, e, old); n > 0 {
				where := EntryError{File: e.File, Index: e.Index, Classname: s.Keyname, Keyname: clip.Text(old.Keyname)}.where()
				l.warnings = append(l.warnings, fmt.Sprintf("%s: %s; %d field %s not applied", where, out.Result, n, plural(n, "change")))
			}
		}
	}
	return out.Result, err
}

// loadOp is the kind of write an entry's action asks of a stored object old (nil:
// none), or "" when it writes nothing.
func loadOp(action model.Action, old *Instance) model.Action {
	switch action {
	case model.ActionCreate, model.ActionInit:
		if old == nil {
			return model.ActionCreate
		}
		if action == model.ActionInit {
			return model.ActionCreate
		}
		return model.ActionUpdate
	case model.ActionUpdate, model.ActionEnable, model.ActionDisable:
		return model.ActionUpdate
	case model.ActionDelete:
		return model.ActionDelete
	}
	return ""
}

// buildInstance merges the entry into old (nil: a new object with the fields'
// defaults) and validates every value. With compareSecrets, a plain secret that verifies
// against the stored hash keeps it (no change). It reports every problem of the entry's
// values at once, in entry order, then the cardinality problems of the fields that
// have none.
func (tx *Tx) buildInstance(ctx context.Context, s *model.Schema, e *model.Entry, old *Instance, compareSecrets bool) (*Instance, error) {
	next := &Instance{Classname: s.Keyname, Keyname: e.Keyname, IsEnabled: true, Data: map[string]any{}}
	if old != nil {
		next.Displayname, next.IsEnabled, next.Data = old.Displayname, old.IsEnabled, model.CloneMap(old.Data)
	}
	if e.HasDisplayname {
		next.Displayname = e.Displayname
	}
	if e.IsEnabled != nil {
		next.IsEnabled = *e.IsEnabled
	}
	var probs model.Problems
	if err := tx.entryValues(ctx, s, e, old, compareSecrets, next.Data, &probs); err != nil {
		return nil, err
	}
	if old == nil {
		for _, f := range s.Fields {
			if _, ok := next.Data[f.Keyname]; ok || f.Default == nil || f.Dataformat == "external" {
				continue
			}
			if nv, present, err := f.Normalize(f.Default, tx.refs(ctx)); err == nil && present {
				next.Data[f.Keyname] = nv
			}
		}
	}
	s.AddCardinality(next.Data, &probs)
	if err := probs.Err(); err != nil {
		return nil, err
	}
	return next, nil
}

// entryValues validates the entry's field values in entry order into data (nil:
// validated only), recording each problem in probs; it returns an error only when
// validation itself failed (the database).
func (tx *Tx) entryValues(ctx context.Context, s *model.Schema, e *model.Entry, old *Instance, compareSecrets bool, data map[string]any, probs *model.Problems) error {
	for _, k := range e.Order {
		if model.IsHeaderKey(k) || strings.HasPrefix(k, "_") {
			continue
		}
		f := s.Field(k)
		if f == nil {
			continue
		}
		v := e.Fields[k]
		if s.Keyname == "_pipeline" && k == "content" {
			norm, err := PipelineContent(v)
			if err != nil {
				if err := probs.Add(k, err); err != nil {
					return err
				}
				continue
			}
			v = norm
		}
		if s.Keyname == EventRuleClass && k == "condition" {
			norm, err := EventCondition(v)
			if err != nil {
				if err := probs.Add(k, err); err != nil {
					return err
				}
				continue
			}
			v = norm
		}
		if f.Dataformat == "secret" && old != nil && compareSecrets && tx.sameSecret(f, v, old.Data[k]) {
			continue // the plain text given is the one stored: keep its hash (no change)
		}
		nv, present, err := f.Normalize(v, tx.refs(ctx))
		if err != nil {
			if err := probs.Add(k, err); err != nil {
				return err
			}
			continue
		}
		if data == nil {
			continue
		}
		if present {
			data[k] = nv
		} else {
			delete(data, k)
		}
	}
	return nil
}

// sameSecret reports whether v is plain text that is the secret f stores (verifies
// against its hash, or opens from its sealed value), so loading the same password or
// key secret again changes nothing. (It costs the one argon2id run that hashing the
// value again would cost.)
func (tx *Tx) sameSecret(f *model.Field, v, stored any) bool {
	if f.IsEncryptedSecret() {
		plain, _ := v.(string)
		sealed, _ := stored.(string)
		return tx.db.sameSealed(plain, sealed)
	}
	return sameSecret(v, stored)
}

// sameSecret reports whether the plain secret v verifies against the stored hash.
func sameSecret(v, stored any) bool {
	plain, ok := v.(string)
	hash, _ := stored.(string)
	if !ok || plain == "" || hash == "" || model.IsSecretHash(plain) {
		return false
	}
	return model.VerifySecret(plain, hash)
}
