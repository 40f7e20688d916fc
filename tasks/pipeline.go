package tasks

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"dataservice/internal/clip"
	"dataservice/rules"
	"dataservice/store"
	"dataservice/store/model"
)

// checkpoint is where a pipeline run resumes: the schema index and the last instance
// id done in it. It commits with the batch it describes.
type checkpoint struct {
	Schema int   `json:"schema"`
	After  int64 `json:"after"`
}

// pipelineRun is the state of one pipeline task while it runs.
type pipelineRun struct {
	r      *Runner
	handle string
	lease  string // the claim's lease: a batch commits only while the task is held under it
	p      *params
	auth   *model.Auth
	rules  *rules.Pipeline
	res    *Result
	now    time.Time
	// renamed is set when a rename (which rewrites references in other instances)
	// was applied in the current batch.
	renamed bool
	// sch is the schema of the last batch, loaded at schema generation schGen.
	sch    *model.Schema
	schGen int64
	// entry is the rule entry, one map reused for every instance (entryOf), and next
	// the new state, reused likewise (newState; the store keeps neither).
	entry rules.Entry
	next  store.Instance
	// changes and messages are res's lists as last encoded for the checkpoint.
	changes, messages encodedList
}

// encodedList is the JSON of a list that only grows, re-encoded when its length changes.
type encodedList struct {
	n   int
	raw json.RawMessage
}

func (l *encodedList) of(v any, n int) json.RawMessage {
	if l.raw == nil || l.n != n {
		var err error
		if l.raw, err = json.Marshal(v); err != nil {
			// Not reachable with values read from JSON; the result stays valid JSON.
			l.raw = json.RawMessage("null")
		}
		l.n = n
	}
	return l.raw
}

// resultJSON is json.Marshal(x.res), as the checkpoint stores it after every batch.
// The lists (up to maxListed entries each) are encoded once per change, not once per
// batch, and spliced in as they are; the counters are written in Result's order.
func (x *pipelineRun) resultJSON() []byte {
	r := x.res
	changes := x.changes.of(r.Changes, len(r.Changes))
	messages := x.messages.of(r.ErrorMessages, len(r.ErrorMessages))
	out := make([]byte, 0, 160+len(changes)+len(messages))
	sep := byte('{')
	for _, c := range [...]struct {
		name string
		n    int64
	}{{"scanned", r.Scanned}, {"updated", r.Updated}, {"deleted", r.Deleted}, {"disabled", r.Disabled},
		{"enabled", r.Enabled}, {"unchanged", r.Unchanged}, {"discarded", r.Discarded}, {"errors", r.Errors}} {
		out = append(out, sep, '"')
		sep = ','
		out = append(out, c.name...)
		out = append(out, `":`...)
		out = strconv.AppendInt(out, c.n, 10)
	}
	out = append(out, `,"changes":`...)
	out = append(out, changes...)
	out = append(out, `,"error_messages":`...)
	out = append(out, messages...)
	return append(out, '}')
}

// runPipeline processes the task's schemas in batches from its checkpoint. It returns
// the final status and error text, or status "" when the task was interrupted
// (shutdown or lost lease) and stays resumable.
func (r *Runner) runPipeline(ctx context.Context, t *Task, p *params, stored *model.Auth, lease string) (string, string) {
	// The set-up and each batch run to their end even when ctx ends (shutdown): a
	// cancelled query would otherwise fail the task, while the loop below hands it
	// back to the queue between batches.
	shutdown := ctx.Err
	ctx = context.WithoutCancel(ctx)
	auth, err := recheck(ctx, r.db, stored)
	if err != nil {
		return StatusFailed, store.ErrorMessage(err)
	}
	pl, err := r.db.PipelineByName(ctx, p.Pipeline)
	if err != nil {
		return StatusFailed, store.ErrorMessage(err)
	}
	pl.Content = p.Content
	if err := r.checkRun(ctx, pl, p.Schemas, p.DryRun, auth); err != nil {
		return StatusFailed, store.ErrorText(err)
	}
	compiled, err := rules.Parse(p.Content)
	if err != nil {
		// Every bad rule.
		var le *rules.ListError
		if errors.As(err, &le) {
			return StatusFailed, strings.Join(le.Messages(), "; ")
		}
		return StatusFailed, err.Error()
	}
	x := &pipelineRun{r: r, handle: t.Handle, lease: lease, p: p, auth: auth, rules: compiled, res: t.Result, now: r.db.Now().UTC()}
	if x.res == nil {
		x.res = &Result{}
	}
	var cp checkpoint
	var cpText string
	if err := table.ReadRow(ctx, r.db, "SELECT checkpoint FROM tasks WHERE handle = ?", t.Handle).Scan(&cpText); err != nil {
		return StatusFailed, "internal error"
	}
	_ = json.Unmarshal([]byte(cpText), &cp)
	if t.Progress.Total == 0 {
		total := int64(len(p.Keynames))
		for _, name := range p.Schemas {
			if len(p.Keynames) > 0 {
				break
			}
			n, err := r.db.CountInstances(ctx, name)
			if err != nil {
				return StatusFailed, "internal error"
			}
			total += int64(n)
		}
		err := r.db.WithTx(ctx, func(tx *store.Tx) error {
			_, err := table.Exec(ctx, tx, "UPDATE tasks SET progress_total = ? WHERE handle = ?", total, t.Handle)
			return err
		})
		if store.ErrorCode(err) == model.EDiskFull {
			return StatusFailed, store.ErrorMessage(err)
		}
		if err != nil {
			return StatusFailed, "internal error"
		}
	}
	batchNo := 0
	for cp.Schema < len(p.Schemas) {
		if shutdown() != nil {
			r.release(ctx, t.Handle, lease)
			return "", ""
		}
		// The submitter's credential is re-checked between batches: a key made
		// read-only, disabled, expired or deleted meanwhile stops the task.
		if x.auth, err = recheck(ctx, r.db, stored); err != nil {
			return StatusFailed, store.ErrorMessage(err)
		}
		cancel, ok, err := x.batch(ctx, &cp)
		if store.ErrorCode(err) == model.EDiskFull {
			// The operator's problem, logged once per episode by the store: the
			// task's error says what happened and where.
			return StatusFailed, store.ErrorMessage(r.db.NoSpace(err))
		}
		if err != nil {
			r.log.Error("pipeline batch", "handle", t.Handle, "error", err)
			return StatusFailed, "internal error"
		}
		if !ok {
			return "", ""
		}
		batchNo++
		if r.o.AfterBatch != nil {
			if err := r.o.AfterBatch(t.Handle, batchNo); err != nil {
				return "", ""
			}
		}
		if cancel {
			return StatusCancelled, ""
		}
	}
	return StatusSucceeded, ""
}

// batch processes up to BatchSize instances of the current schema in one transaction
// that also records the checkpoint, counters and lease. ok is false when the lease was lost.
//
// A dry-run batch writes nothing but its checkpoint: it reads in a read transaction and
// records the checkpoint in a short write transaction of its own, so it never holds the
// writer while it works. A real batch commits early once it has run for maxBatchTime,
// so other writers wait at most about that long.
func (x *pipelineRun) batch(ctx context.Context, cp *checkpoint) (cancel, ok bool, err error) {
	r := x.r
	rev := store.Revisions{Author: "task:" + x.handle, Chain: x.p.Chain}
	begin := func(ctx context.Context) (*store.Tx, error) { return r.db.BeginAs(ctx, rev) }
	if x.p.DryRun {
		begin = r.db.BeginRead
	}
	tx, err := begin(ctx)
	if err != nil {
		return false, false, err
	}
	defer tx.Rollback()
	name := x.p.Schemas[cp.Schema]
	s, err := x.schema(ctx, tx, name)
	if err != nil {
		return false, false, err
	}
	batch, err := x.instances(ctx, tx, name, cp.After)
	if err != nil {
		return false, false, err
	}
	x.renamed = false
	started, done := time.Now(), 0
	for _, in := range batch {
		if x.renamed {
			// A rename earlier in this batch may have rewritten references this
			// instance holds: work on its stored state, not the batch's snapshot.
			if in, err = tx.Instance(ctx, name, in.Keyname); err != nil {
				return false, false, err
			}
		}
		if err := x.process(ctx, tx, s, in); err != nil {
			return false, false, err
		}
		r.db.HoldForTest(1)
		cp.After = in.ID
		done++
		if time.Since(started) > maxBatchTime {
			break
		}
	}
	if done == len(batch) && len(batch) < r.o.BatchSize {
		cp.Schema, cp.After = cp.Schema+1, 0
	}
	if x.p.DryRun {
		// The read snapshot ends here; the checkpoint is written on its own.
		tx.Rollback()
		if tx, err = r.db.Begin(ctx); err != nil {
			return false, false, err
		}
		defer tx.Rollback()
	}
	cpj, _ := json.Marshal(cp)
	rj := x.resultJSON()
	var flag int
	err = table.QueryRow(ctx, tx, `UPDATE tasks SET checkpoint = ?, result = ?, progress_done = ?, lease_until = ?
		WHERE handle = ? AND lease_owner = ? AND status = 'running' RETURNING cancel_requested`,
		string(cpj), string(rj), x.res.Scanned, leaseTime(r.db.Now().Add(r.o.Lease)), x.handle, x.lease).Scan(&flag)
	if err != nil {
		// No row: another runner took the task over; this batch must not commit.
		return false, false, nil
	}
	if err := tx.Commit(); err != nil {
		return false, false, err
	}
	if r.o.OnProcessed != nil {
		r.o.OnProcessed(done)
	}
	return flag == 1, true, nil
}

// instances is the next batch of schema name after the instance id after: the
// instances the run names (Params.Keynames) when it names some, in id order, those
// gone meanwhile left out; else the next BatchSize instances.
func (x *pipelineRun) instances(ctx context.Context, tx *store.Tx, name string, after int64) ([]*store.Instance, error) {
	if len(x.p.Keynames) == 0 {
		return tx.Instances(ctx, name, after, x.r.o.BatchSize)
	}
	var out []*store.Instance
	for _, key := range x.p.Keynames {
		in, err := tx.Instance(ctx, name, key)
		if store.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if in.ID > after {
			out = append(out, in)
		}
	}
	slices.SortFunc(out, func(a, b *store.Instance) int { return cmp.Compare(a.ID, b.ID) })
	return out[:min(len(out), x.r.o.BatchSize)], nil
}

// schema returns schema name as tx (which has written nothing yet) sees it. The schema
// an earlier batch loaded serves while the schema generation is the one it was loaded
// at: every committed change to a schema raises the generation.
func (x *pipelineRun) schema(ctx context.Context, tx *store.Tx, name string) (*model.Schema, error) {
	gen, err := tx.SchemaGeneration(ctx)
	if err != nil {
		return nil, err
	}
	if x.sch != nil && x.sch.Keyname == name && x.schGen == gen {
		return x.sch, nil
	}
	s, err := tx.Schema(ctx, name)
	if err != nil {
		return nil, err
	}
	x.sch, x.schGen = s, gen
	return s, nil
}

// recheck re-reads the submitter's authorisation context: a deleted, disabled or
// expired user or key, or a key made read-only, is refused with a clear error.
func recheck(ctx context.Context, db *store.DB, stored *model.Auth) (*model.Auth, error) {
	auth, err := db.Refresh(ctx, stored)
	if err != nil {
		return nil, err
	}
	if auth.ReadOnly {
		return nil, model.Errorf(model.EForbidden, "API key %s is now read-only", stored.Name)
	}
	return auth, nil
}

// maxBatchTime is how long a batch runs before it commits what it has done. It is
// measured on the process's monotonic clock (time.Since), not the database's clock:
// it bounds how long the batch holds the writer, a duration no row records. The
// commit then re-indexes the changed instances for search, which costs about as much
// again: other writers wait about a quarter of a second in all.
const maxBatchTime = 125 * time.Millisecond

// entryOf fills e (cleared first: one map serves every instance of a run) with the
// rule entry of an instance; secret fields are left out (a rule must never copy a
// hash into a readable field) and lists are copied. all reports whether every stored
// value went into the entry (no secret, external or removed field holds one).
func entryOf(e rules.Entry, s *model.Schema, in *store.Instance) (all bool) {
	clear(e)
	e["classname"] = in.Classname
	e["keyname"] = in.Keyname
	e["displayname"] = in.Displayname
	e["is_enabled"] = in.IsEnabled
	copied := 0
	for _, f := range s.Fields {
		if f.Dataformat == "secret" || f.Dataformat == "external" {
			continue
		}
		v, ok := in.Data[f.Keyname]
		if !ok {
			continue
		}
		if l, isList := v.([]any); isList {
			v = append([]any(nil), l...)
		}
		e[f.Keyname] = v
		copied++
	}
	return copied == len(in.Data)
}

func (x *pipelineRun) fail(in *store.Instance, err error) {
	x.res.Errors++
	if len(x.res.ErrorMessages) < maxListed {
		x.res.ErrorMessages = append(x.res.ErrorMessages, fmt.Sprintf("%s %s: %s", in.Classname, clip.Text(in.Keyname), errText(err)))
	}
}

// errText is the message kept for a failed entry: rule errors are plain errors that
// name the rule; store errors carry their caller-safe message.
func errText(err error) string {
	if store.ErrorCode(err) == model.EInternal {
		return err.Error()
	}
	return store.ErrorText(err)
}

func (x *pipelineRun) record(c Change) {
	if len(x.res.Changes) < maxListed {
		x.res.Changes = append(x.res.Changes, c)
	}
}

// process applies the rules to one instance and hands the outcome to the store's
// apply path, counting what it did. A returned error is internal and fails the
// batch; entry problems are counted.
func (x *pipelineRun) process(ctx context.Context, tx *store.Tx, s *model.Schema, in *store.Instance) error {
	x.res.Scanned++
	if x.entry == nil {
		x.entry = rules.Entry{}
	}
	e := x.entry
	all := entryOf(e, s, in)
	discard, err := x.rules.Apply(e, x.now)
	if err != nil {
		x.fail(in, err)
		return nil
	}
	if discard {
		x.res.Discarded++
		return nil
	}
	if c, _ := e["classname"].(string); c != s.Keyname {
		x.fail(in, model.Errorf(model.EInvalid, "classname cannot be changed"))
		return nil
	}
	action, _ := e["_action"].(string)
	w := store.Write{Schema: s, Old: in, Action: model.Action(strings.ToLower(strings.TrimSpace(action)))}
	switch w.Action {
	case "", model.ActionCreate, model.ActionUpdate:
		w.Action = model.ActionUpdate
		w.New = &x.next
		if err = newState(w.New, s, in, e, all); err != nil {
			x.fail(in, err)
			return nil
		}
	}
	out, err := tx.Apply(ctx, w, store.ApplyOptions{Auth: x.auth, DryRun: x.p.DryRun})
	if err != nil {
		if store.Aborts(err) {
			return err
		}
		x.fail(in, err)
		return nil
	}
	switch out.Result {
	case store.OutSkipped, store.OutUnchanged:
		x.res.Unchanged++
		return nil
	case store.OutDeleted:
		x.res.Deleted++
	case store.OutEnabled:
		x.res.Enabled++
	case store.OutDisabled:
		x.res.Disabled++
	case store.OutUpdated:
		x.res.Updated++
		if out.Renamed {
			x.renamed = !x.p.DryRun
		}
		if len(x.res.Changes) >= maxListed {
			return nil // the result lists the first changes only: no need to compare fields
		}
		change := Change{Classname: in.Classname, Keyname: in.Keyname, Action: string(model.ActionUpdate),
			Fields: changedFields(s, in, w.New)}
		if out.Renamed {
			change.NewKey = w.New.Keyname
		}
		x.record(change)
		return nil
	}
	change := Change{Classname: in.Classname, Keyname: in.Keyname, Action: string(w.Action)}
	if len(x.res.Changes) < maxListed {
		if n := x.notApplied(s, in, e, all); n > 0 {
			change.Note = fmt.Sprintf("%s; %d field %s not applied", out.Result, n, plural(n, "change"))
		}
	}
	x.record(change)
	return nil
}

// notApplied counts the changes the rules made to in (fields, displayname, keyname)
// that an _action of delete, enable or disable leaves unapplied: that action is the
// whole write.
func (x *pipelineRun) notApplied(s *model.Schema, in *store.Instance, e rules.Entry, all bool) int {
	var next store.Instance
	if err := newState(&next, s, in, e, all); err != nil {
		return 1 // is_enabled is not a boolean: a change, if a bad one
	}
	n := len(changedFields(s, in, &next))
	if next.Displayname != in.Displayname {
		n++
	}
	if next.Keyname != in.Keyname {
		n++
	}
	return n
}

// plural is word, with an s unless n is 1.
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// newState sets next to the state the rules left in e: the fields they may set, displayname,
// is_enabled and keyname (a change is a cascading rename). Other keys of e are
// dropped. Secret and external fields keep their stored values (the rules never see
// them), as do removed fields; all is entryOf's report that there are none.
func newState(next *store.Instance, s *model.Schema, in *store.Instance, e rules.Entry, all bool) error {
	*next = store.Instance{ID: in.ID, Classname: in.Classname, Keyname: in.Keyname, Displayname: in.Displayname,
		IsEnabled: in.IsEnabled}
	if k, ok := e["keyname"]; ok {
		if key, isText := k.(string); isText {
			next.Keyname = strings.TrimSpace(key)
		} else {
			next.Keyname = strings.TrimSpace(fmt.Sprint(k))
		}
	}
	if d, ok := e["displayname"]; ok {
		next.Displayname = textOf(d)
	}
	if v, ok := e["is_enabled"]; ok {
		b, isBool := v.(bool)
		if !isBool {
			var okWord bool
			if b, okWord = model.BoolWord(textOf(v)); !okWord {
				return model.Errorf(model.EInvalid, "is_enabled %s is not a boolean", clip.Quote(textOf(v)))
			}
		}
		next.IsEnabled = b
	}
	data := make(map[string]any, len(in.Data))
	for _, f := range s.Fields {
		if f.Dataformat == "secret" || f.Dataformat == "external" {
			continue
		}
		if v, ok := e[f.Keyname]; ok {
			data[f.Keyname] = v
		}
	}
	if !all {
		for k, v := range in.Data {
			if f := s.Field(k); f == nil || f.Dataformat == "secret" || f.Dataformat == "external" {
				data[k] = v
			}
		}
	}
	next.Data = data
	return nil
}

// changedFields lists the fields whose value differs between in and next.
func changedFields(s *model.Schema, in, next *store.Instance) map[string]FieldChange {
	var out map[string]FieldChange
	for _, f := range s.Fields {
		o, n := in.Data[f.Keyname], next.Data[f.Keyname]
		if !reflect.DeepEqual(o, n) {
			if out == nil {
				out = map[string]FieldChange{}
			}
			out[f.Keyname] = FieldChange{Old: o, New: n}
		}
	}
	return out
}

func textOf(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	}
	return fmt.Sprint(v)
}
