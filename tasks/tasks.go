// Package tasks is the persisted task queue: pipeline runs are submitted as rows of the
// tasks table, claimed by workers with one UPDATE ... RETURNING, and processed in
// batches whose checkpoint commits with the batch, so a restart resumes exactly after
// the last committed batch.
package tasks

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"dataservice/internal/clip"
	"dataservice/rules"
	"dataservice/store"
	"dataservice/store/model"
)

// Task statuses.
const (
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
)

// MaxSchemas is the most schemas one run may name.
const MaxSchemas = 64

// Options tune a Runner.
type Options struct {
	Logger  *slog.Logger
	Workers int
	// BatchSize is the number of instances per committed batch (default 1000).
	BatchSize int
	// Lease is how long a running task stays claimed without a committed batch; a task
	// whose runner died is taken over after it (default 30s).
	Lease time.Duration
	// Poll is how often idle workers look for tasks queued by other processes (default 1s).
	Poll time.Duration
	// AfterBatch, when set, runs after each committed batch (tests inject crashes here).
	AfterBatch func(handle string, batch int) error
	// OnProcessed, when set, is told how many instances each committed pipeline batch
	// processed (metrics).
	OnProcessed func(n int)
	// RevisionBatch and RevisionBatches bound one clean-up of old revisions
	// (REVISION_RETENTION_DAYS): revisions deleted per transaction (default 1000) and
	// transactions per clean-up (default 1000); the next clean-up goes on.
	RevisionBatch, RevisionBatches int
}

// Runner submits and runs tasks.
type Runner struct {
	db   *store.DB
	o    Options
	log  *slog.Logger
	id   string
	wake chan struct{}
	// claims numbers this runner's claims; each claim's lease is unique.
	claims atomic.Uint64
}

// New returns a Runner over db.
func New(db *store.DB, o Options) *Runner {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 1000
	}
	if o.RevisionBatch <= 0 {
		o.RevisionBatch = 1000
	}
	if o.RevisionBatches <= 0 {
		o.RevisionBatches = 1000
	}
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	return &Runner{db: db, o: o, log: o.Logger, id: uuid.NewString(), wake: make(chan struct{}, 1)}
}

// Params are what a pipeline run is submitted with.
type Params struct {
	Pipeline  string
	Schemas   []string
	DryRun    bool
	Auth      *model.Auth
	OwnerType string
	OwnerID   string
	// Keynames, when not empty, restrict the run to these instances of its one schema
	// (an event rule's pipeline action runs on the changed instance only).
	Keynames []string
	// Chain names the event rules whose pipeline actions led to this run, the
	// submitting rule last: the run's writes do not fire them again.
	Chain []string
	// Handle, when not empty, is the task's handle (a uuid); a new one is made
	// otherwise. An event's pipeline action uses the event's id, so a repeated
	// attempt finds the task it queued.
	Handle string
}

// params is the stored form of Params (the pipeline content is snapshotted at submission).
type params struct {
	Pipeline string   `json:"pipeline"`
	Schemas  []string `json:"schemas"`
	DryRun   bool     `json:"dryrun"`
	Content  string   `json:"content"`
	Keynames []string `json:"keynames,omitempty"`
	Chain    []string `json:"chain,omitempty"`
}

// Progress is how far a task got.
type Progress struct {
	Total   int64   `json:"total" yaml:"total"`
	Done    int64   `json:"done" yaml:"done"`
	Percent float64 `json:"percent" yaml:"percent"`
}

// Change is one change a pipeline run made (or, in a dry run, would make).
type Change struct {
	Classname string                 `json:"classname" yaml:"classname"`
	Keyname   string                 `json:"keyname" yaml:"keyname"`
	Action    string                 `json:"action" yaml:"action"`
	NewKey    string                 `json:"new_keyname,omitempty" yaml:"new_keyname,omitempty"`
	Fields    map[string]FieldChange `json:"fields,omitempty" yaml:"fields,omitempty"`
	// Note says what else happened to the entry: when a rule set _action to delete,
	// enable or disable, the other changes its rules made are not applied, and the note
	// counts them ("disabled; 2 field changes not applied").
	Note string `json:"note,omitempty" yaml:"note,omitempty"`
}

// FieldChange is the old and new value of a changed field.
type FieldChange struct {
	Old any `json:"old" yaml:"old"`
	New any `json:"new" yaml:"new"`
}

// Result counts a pipeline run's outcomes.
type Result struct {
	Scanned       int64    `json:"scanned" yaml:"scanned"`
	Updated       int64    `json:"updated" yaml:"updated"`
	Deleted       int64    `json:"deleted" yaml:"deleted"`
	Disabled      int64    `json:"disabled" yaml:"disabled"`
	Enabled       int64    `json:"enabled" yaml:"enabled"`
	Unchanged     int64    `json:"unchanged" yaml:"unchanged"`
	Discarded     int64    `json:"discarded" yaml:"discarded"`
	Errors        int64    `json:"errors" yaml:"errors"`
	Changes       []Change `json:"changes" yaml:"changes"`
	ErrorMessages []string `json:"error_messages" yaml:"error_messages"`
}

// maxListed bounds the changes and error messages kept in a result.
const maxListed = 100

// Task is a task as the API shows it.
type Task struct {
	Handle    string   `json:"handle" yaml:"handle"`
	Kind      string   `json:"kind" yaml:"kind"`
	Pipeline  string   `json:"pipeline" yaml:"pipeline"`
	Schemas   []string `json:"schemas" yaml:"schemas"`
	DryRun    bool     `json:"dryrun" yaml:"dryrun"`
	Status    string   `json:"status" yaml:"status"`
	OwnerType string   `json:"owner_type" yaml:"owner_type"`
	OwnerID   string   `json:"owner_id" yaml:"owner_id"`
	// Submitter is the credential that submitted the task ("apikey#ID" for an API key,
	// by its instance id; "user:LOGIN"; "system"): keys without a user share the owner
	// id "system", so visibility and cancel follow the submitting key itself, never
	// its name. (Tasks stored before key ids were recorded say "apikey:NAME", which no
	// key's credential matches.)
	Submitter string `json:"-" yaml:"-"`
	// principal is the submitting credential by its instance id (principalOf): a
	// scheduled run is seen by that credential, never by a namesake made later.
	principal  string
	CreatedAt  string   `json:"created_at" yaml:"created_at"`
	StartedAt  *string  `json:"started_at" yaml:"started_at"`
	FinishedAt *string  `json:"finished_at" yaml:"finished_at"`
	Progress   Progress `json:"progress" yaml:"progress"`
	Result     *Result  `json:"result" yaml:"result"`
	Error      *string  `json:"error" yaml:"error"`
}

// Finished reports whether the task reached a final status.
func (t *Task) Finished() bool {
	return t.Status == StatusSucceeded || t.Status == StatusFailed || t.Status == StatusCancelled
}

// now is the time recorded in task rows, from the database's clock.
func (r *Runner) now() string { return r.db.Now().UTC().Format(time.RFC3339) }

// Submit validates a pipeline run and queues it, returning its handle at once.
// Validation failures are *model.Error with a message fit for the caller.
func (r *Runner) Submit(ctx context.Context, p Params) (string, error) {
	sub, err := r.prepare(ctx, p)
	if err != nil {
		return "", err
	}
	if err := r.db.WithTx(ctx, func(tx *store.Tx) error { return r.insert(ctx, tx, sub) }); err != nil {
		return "", err
	}
	r.wakeUp()
	return sub.handle, nil
}

// SubmitTx is Submit inside the caller's transaction: the task is queued when tx
// commits and not at all when it rolls back. The pipeline and its schemas are read as
// committed (outside tx).
func (r *Runner) SubmitTx(ctx context.Context, tx *store.Tx, p Params) (string, error) {
	sub, err := r.prepare(ctx, p)
	if err != nil {
		return "", err
	}
	if err := r.insert(ctx, tx, sub); err != nil {
		return "", err
	}
	r.wakeUp()
	return sub.handle, nil
}

// submission is a checked task ready to be queued.
type submission struct {
	handle, params, auth, ownerType, ownerID string
	submitter                                *model.Auth
}

// prepare applies the submission rules and builds the task's row.
func (r *Runner) prepare(ctx context.Context, p Params) (*submission, error) {
	pl, err := r.db.PipelineByName(ctx, p.Pipeline)
	if err != nil {
		return nil, err
	}
	if err := r.checkRun(ctx, pl, p.Schemas, p.DryRun, p.Auth); err != nil {
		return nil, err
	}
	if len(p.Keynames) > 0 && len(p.Schemas) != 1 {
		return nil, model.Errorf(model.EInvalid, "a run over named instances needs exactly one schema")
	}
	handle := p.Handle
	if handle == "" {
		handle = uuid.NewString()
	} else if _, err := uuid.Parse(handle); err != nil {
		return nil, model.Errorf(model.EInvalid, "task handle %s is not a uuid", clip.Quote(handle))
	}
	pj, _ := json.Marshal(params{Pipeline: pl.Keyname, Schemas: p.Schemas, DryRun: p.DryRun, Content: pl.Content,
		Keynames: p.Keynames, Chain: p.Chain})
	aj, _ := json.Marshal(p.Auth)
	return &submission{handle: handle, params: string(pj), auth: string(aj), ownerType: p.OwnerType,
		ownerID: p.OwnerID, submitter: p.Auth}, nil
}

// insert queues sub unless the queue already holds QUEUE_MAX unfinished tasks, or
// QUEUE_MAX_PER_OWNER of the submitting credential's.
func (r *Runner) insert(ctx context.Context, tx *store.Tx, sub *submission) error {
	max := r.db.ConfigInt(ctx, store.ConfigQueueMax)
	perOwner := r.db.ConfigInt(ctx, store.ConfigQueueMaxPerOwner)
	var n int
	if err := table.QueryRow(ctx, tx, "SELECT count(*) FROM tasks WHERE status IN ('queued', 'running')").Scan(&n); err != nil {
		return fmt.Errorf("count tasks: %w", err)
	}
	if n >= max {
		return model.Errorf(model.EInvalid, "task queue is full (%d unfinished tasks, QUEUE_MAX %d)", n, max)
	}
	// The owner is the submitting credential (the stored authorisation context's key
	// id, or kind and name): keys without a user all own tasks as "system" otherwise.
	var mine int
	cond, args := r.submittedBy(sub.submitter)
	if err := table.QueryRow(ctx, tx, `SELECT count(*) FROM tasks WHERE status IN ('queued', 'running')
		AND `+cond, args...).Scan(&mine); err != nil {
		return fmt.Errorf("count tasks: %w", err)
	}
	if perOwner > 0 && mine >= perOwner {
		return model.Errorf(model.EInvalid, "task queue is full for this owner (%d unfinished tasks, QUEUE_MAX_PER_OWNER %d)", mine, perOwner)
	}
	_, err := table.Exec(ctx, tx, `INSERT INTO tasks(handle, kind, params, auth, owner_type, owner_id, status, created_at)
		VALUES(?, 'pipeline', ?, ?, ?, ?, 'queued', ?)`, sub.handle, sub.params, sub.auth, sub.ownerType, sub.ownerID, r.now())
	if err != nil {
		return fmt.Errorf("insert task: %w", err)
	}
	return nil
}

// wakeUp tells an idle worker that a task is queued.
func (r *Runner) wakeUp() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// checkRun applies the submission rules: valid content, runnable schemas, the
// pipeline's run_permission and the schema permissions the run needs.
func (r *Runner) checkRun(ctx context.Context, pl *store.Pipeline, schemas []string, dryrun bool, auth *model.Auth) error {
	if auth == nil {
		return model.Errorf(model.EInvalid, "no authorisation context")
	}
	// Every path (the API, the console, an event rule, a schedule, the runner when the
	// task starts) applies the checks of a direct run.
	if err := store.MayStartRuns(auth); err != nil {
		return err
	}
	if err := MayRun(auth, pl); err != nil {
		return err
	}
	if _, err := rules.Parse(pl.Content); err != nil {
		return store.RulesError("pipeline "+pl.Keyname+": invalid content: ", err)
	}
	if len(schemas) == 0 {
		return model.Errorf(model.EInvalid, "no schema given")
	}
	if len(schemas) > MaxSchemas {
		return model.Errorf(model.EInvalid, "too many schemas: %d (at most %d)", len(schemas), MaxSchemas)
	}
	for _, name := range schemas {
		s, err := r.db.Schema(ctx, name)
		if store.IsNotFound(err) {
			return model.Errorf(model.EInvalid, "unknown schema %s", clip.Quote(name))
		}
		if err != nil {
			return err
		}
		if err := Runnable(auth, s, dryrun); err != nil {
			return err
		}
	}
	return nil
}

func scanTask(row interface{ Scan(...any) error }) (*Task, *params, *model.Auth, error) {
	t := &Task{}
	var pj, aj, result string
	var started, finished, errText sql.NullString
	if err := row.Scan(&t.Handle, &t.Kind, &pj, &aj, &t.OwnerType, &t.OwnerID, &t.Status, &t.Progress.Total,
		&t.Progress.Done, &result, &errText, &t.CreatedAt, &started, &finished); err != nil {
		return nil, nil, nil, err
	}
	var p params
	if err := json.Unmarshal([]byte(pj), &p); err != nil {
		return nil, nil, nil, fmt.Errorf("task %s params: %w", t.Handle, err)
	}
	var a model.Auth
	if err := json.Unmarshal([]byte(aj), &a); err != nil {
		return nil, nil, nil, fmt.Errorf("task %s auth: %w", t.Handle, err)
	}
	t.Pipeline, t.Schemas, t.DryRun = p.Pipeline, p.Schemas, p.DryRun
	t.Submitter, t.principal = SubmitterOf(&a), principalOf(&a)
	if started.Valid {
		t.StartedAt = &started.String
	}
	if finished.Valid {
		t.FinishedAt = &finished.String
	}
	if errText.Valid {
		t.Error = &errText.String
	}
	if result != "" && result != "{}" {
		t.Result = &Result{}
		if err := json.Unmarshal([]byte(result), t.Result); err != nil {
			return nil, nil, nil, fmt.Errorf("task %s result: %w", t.Handle, err)
		}
	}
	if t.Progress.Total > 0 {
		t.Progress.Percent = float64(int64(float64(t.Progress.Done)*1000/float64(t.Progress.Total))) / 10
	} else if t.Status == StatusSucceeded {
		t.Progress.Percent = 100
	}
	return t, &p, &a, nil
}

const taskCols = `handle, kind, params, auth, owner_type, owner_id, status, progress_total, progress_done,
	result, error, created_at, started_at, finished_at`

// Get returns a task by handle.
func (r *Runner) Get(ctx context.Context, handle string) (*Task, error) {
	if strings.ContainsRune(handle, 0) {
		// No handle holds a NUL, and PostgreSQL refuses one in a query's text.
		return nil, model.Errorf(model.ENotFound, "task not found")
	}
	t, _, _, err := scanTask(table.ReadRow(ctx, r.db, "SELECT "+taskCols+" FROM tasks WHERE handle = ?", handle))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, model.Errorf(model.ENotFound, "task not found")
	}
	if err != nil {
		return nil, fmt.Errorf("read task: %w", err)
	}
	return t, nil
}

// SubmitterOf names the credential of an authorisation context as Task.Submitter does:
// an API key by its instance id when the context has it, else by kind and name.
func SubmitterOf(a *model.Auth) string {
	if a == nil || a.Kind == "" || a.Kind == "system" {
		return "system"
	}
	if a.Kind == model.AuthAPIKey && a.KeyID != 0 {
		return "apikey#" + strconv.FormatInt(a.KeyID, 10)
	}
	return a.Kind + ":" + a.Name
}

// principalOf names the credential of an authorisation context by its instance id:
// "apikey#ID", "user#ID", or SubmitterOf's name when it has no id (the system, or a
// context stored before ids were recorded, which no live credential matches).
func principalOf(a *model.Auth) string {
	if a != nil && a.Kind == model.AuthUser && a.UserID != 0 {
		return "user#" + strconv.FormatInt(a.UserID, 10)
	}
	return SubmitterOf(a)
}

// submittedBy is the SQL condition on a task's stored authorisation context (the
// auth column) that SubmitterOf(a) names: the same key id, or, for a context without
// one, the same kind and name and no key id.
func (r *Runner) submittedBy(a *model.Auth) (string, []any) {
	field := func(name string) string { return table.JSONValue(r.db, "auth", "'$."+name+"'") }
	switch {
	case SubmitterOf(a) == "system":
		return "coalesce(" + field("kind") + ", 'system') = 'system'", nil
	case a.Kind == model.AuthAPIKey && a.KeyID != 0:
		// The key id is a JSON number: read as a number on every engine (one JSON
		// access gives it as text), to compare with the integer argument.
		return field("kind") + " = 'apikey' AND CAST(" + field("key_id") + " AS BIGINT) = ?", []any{a.KeyID}
	}
	return field("kind") + " = ? AND " + field("name") + " = ? AND " + field("key_id") + " IS NULL",
		[]any{a.Kind, a.Name}
}

// List returns tasks newest first: those of one owner, or all when ownerType is "".
// status filters when not empty.
func (r *Runner) List(ctx context.Context, ownerType, ownerID, status string, limit int) ([]*Task, error) {
	return r.ListSubmitted(ctx, ownerType, ownerID, nil, status, limit)
}

// ListSubmitted is List restricted, when submitter is not nil, to the tasks that
// credential submitted.
func (r *Runner) ListSubmitted(ctx context.Context, ownerType, ownerID string, submitter *model.Auth, status string, limit int) ([]*Task, error) {
	var types []string
	if ownerType != "" {
		types = []string{ownerType}
	}
	return r.list(ctx, types, ownerID, submitter, status, limit)
}

// list is ListSubmitted for the owner id under any of ownerTypes (nil: every task).
func (r *Runner) list(ctx context.Context, ownerTypes []string, ownerID string, submitter *model.Auth, status string, limit int) ([]*Task, error) {
	q := "SELECT " + taskCols + " FROM tasks WHERE 1 = 1"
	var args []any
	if len(ownerTypes) > 0 {
		q += " AND owner_type IN (?" + strings.Repeat(", ?", len(ownerTypes)-1) + ") AND owner_id = ?"
		for _, t := range ownerTypes {
			args = append(args, t)
		}
		args = append(args, ownerID)
	}
	if submitter != nil {
		cond, more := r.submittedBy(submitter)
		q += " AND " + cond
		args = append(args, more...)
	}
	if status != "" {
		q += " AND status = ?"
		args = append(args, status)
	}
	q += " ORDER BY created_at DESC, " + table.RowOrder(r.db) + " DESC LIMIT ?"
	args = append(args, limit)
	rows, err := table.Read(ctx, r.db, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	defer rows.Close()
	out := []*Task{}
	for rows.Next() {
		t, _, _, err := scanTask(rows)
		if err != nil {
			return nil, fmt.Errorf("list tasks: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Cancel cancels a queued task at once, or asks a running one to stop after its
// current batch. Finished tasks are left as they are.
func (r *Runner) Cancel(ctx context.Context, handle string) (*Task, error) {
	err := r.db.WithTx(ctx, func(tx *store.Tx) error {
		if _, err := table.Exec(ctx, tx, `UPDATE tasks SET status = 'cancelled', finished_at = ?
			WHERE handle = ? AND status = 'queued'`, r.now(), handle); err != nil {
			return fmt.Errorf("cancel task: %w", err)
		}
		_, err := table.Exec(ctx, tx, "UPDATE tasks SET cancel_requested = 1 WHERE handle = ? AND status = 'running'", handle)
		if err != nil {
			return fmt.Errorf("cancel task: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r.Get(ctx, handle)
}

// Purge deletes finished tasks older than TASK_RETENTION_DAYS.
func (r *Runner) Purge(ctx context.Context) (int64, error) {
	days := r.db.ConfigInt(ctx, store.ConfigTaskRetentionDays)
	cutoff := r.db.Now().UTC().AddDate(0, 0, -days).Format(time.RFC3339)
	var n int64
	err := r.db.WithTx(ctx, func(tx *store.Tx) error {
		res, err := table.Exec(ctx, tx, `DELETE FROM tasks WHERE status IN ('succeeded', 'failed', 'cancelled')
			AND finished_at < ?`, cutoff)
		if err != nil {
			return fmt.Errorf("purge tasks: %w", err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return n, err
}
