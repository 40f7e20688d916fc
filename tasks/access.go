package tasks

import (
	"context"
	"strconv"
	"strings"

	"dataservice/store"
	"dataservice/store/model"
)

// Callers that run pipelines and read tasks (the HTTP API and the web console) make
// their requests through the functions of this file, so both apply the same checks in
// the same order and see the same tasks.

// PermRun is the permission that runs pipelines and reads their tasks.
const PermRun = store.PermPipelineRun

// Owner types of the tasks callers submit: the API's (as the seed names it) and the
// web console's. A user sees its tasks of both.
const (
	OwnerAPI     = "api"
	OwnerConsole = "console"
)

// RunRequest is a request to run a pipeline as a task.
type RunRequest struct {
	// Pipeline is the pipeline's keyname or id (digits only: an id first, then a keyname).
	Pipeline string
	// Schemas are the schema names; items are trimmed and empty ones dropped.
	Schemas []string
	DryRun  bool
	Auth    *model.Auth
	// OwnerType is OwnerAPI or OwnerConsole; the owner id is OwnerID(Auth).
	OwnerType string
}

// Start applies the run checks in the seed's order after the permission and method
// checks, then submits the task: the caller lacks p_pipeline_run (forbidden,
// "permission denied: ... needs p_pipeline_run"); the credential is read-only (forbidden, "API key is
// read-only"); no schema (invalid, "missing required parameter: schema"); no
// identifier (invalid, "missing pipeline identifier"); no such pipeline (not found,
// "pipeline not found"); the submission fails (invalid, with its message, or "failed
// to submit task" when it has none). It returns the pipeline and the task's handle.
func (r *Runner) Start(ctx context.Context, q RunRequest) (*store.Pipeline, string, error) {
	if q.Auth == nil {
		return nil, "", model.Errorf(model.EForbidden, "permission denied: running a pipeline needs %s", PermRun)
	}
	if err := store.MayStartRuns(q.Auth); err != nil {
		return nil, "", err
	}
	var schemas []string
	for _, s := range q.Schemas {
		if s = strings.TrimSpace(s); s != "" {
			schemas = append(schemas, s)
		}
	}
	if len(schemas) == 0 {
		return nil, "", model.Errorf(model.EInvalid, "missing required parameter: schema")
	}
	ident := strings.TrimSpace(q.Pipeline)
	if ident == "" {
		return nil, "", model.Errorf(model.EInvalid, "missing pipeline identifier")
	}
	pl, err := r.FindPipeline(ctx, ident)
	if err != nil {
		return nil, "", err
	}
	handle, err := r.Submit(ctx, Params{Pipeline: pl.Keyname, Schemas: schemas, DryRun: q.DryRun,
		Auth: q.Auth, OwnerType: q.OwnerType, OwnerID: OwnerID(q.Auth)})
	if err != nil {
		// A full disk is logged once per episode and its message (naming the file) is
		// the submission's: the seed answers a failed submission 400 with that message.
		err = r.db.NoSpace(err)
		msg := "failed to submit task" // the seed's text when the submission gives none
		if store.ErrorCode(err) != model.EInternal {
			if m := store.ErrorMessage(err); m != "" {
				msg = m
			}
		} else {
			r.log.Error("submit task", "pipeline", pl.Keyname, "error", err)
		}
		if list := store.ErrorProblems(err); len(list) > 1 {
			// Every problem (each bad rule of the content), still a 400 whose message is
			// the first one's.
			return nil, "", &model.Error{Code: model.EInvalid, Message: msg, Problems: list}
		}
		return nil, "", model.Errorf(model.EInvalid, "%s", msg)
	}
	return pl, handle, nil
}

// FindPipeline finds a pipeline by id or keyname: a text of digits only is looked up
// as an id first, then as a keyname; any other as a keyname.
func (r *Runner) FindPipeline(ctx context.Context, ident string) (*store.Pipeline, error) {
	notFound := model.Errorf(model.ENotFound, "pipeline not found")
	if len(ident) > 256 {
		return nil, notFound
	}
	if id, err := strconv.ParseInt(ident, 10, 64); err == nil && strings.Trim(ident, "0123456789") == "" {
		pl, err := r.db.PipelineByID(ctx, id)
		if err == nil || !store.IsNotFound(err) {
			return pl, err
		}
	}
	pl, err := r.db.PipelineByName(ctx, ident)
	if store.IsNotFound(err) {
		return nil, notFound
	}
	return pl, err
}

// MayRun reports (nil) whether auth may run pl: it must be enabled and auth must hold
// its run_permission when it has one. The submission checks it too.
func MayRun(auth *model.Auth, pl *store.Pipeline) error {
	if auth == nil {
		auth = &model.Auth{} // no context holds no permission
	}
	return store.MayRunPipeline(auth, pl)
}

// Runnable reports (nil) whether a run by auth may name schema s: built-in classes
// other than _user cannot be run; auth must read s, and for a real run update it.
func Runnable(auth *model.Auth, s *model.Schema, dryrun bool) error {
	return store.RunnableBy(auth, s, dryrun)
}

// OwnerID is the owner id of the tasks auth submits: its user's id as text, or
// "system" when it has no user.
func OwnerID(auth *model.Auth) string {
	if auth == nil || auth.UserID == 0 {
		return "system"
	}
	return strconv.FormatInt(auth.UserID, 10)
}

// visibleTo reports whether auth may see t: callers holding every permission see
// every task; a user sees the tasks it submitted through the API or the console,
// whichever of its credentials it used; keys without a user all have the owner id
// "system", so for them the submitting key itself must match (by its id: a key
// revoked and created again under the same name is another key). A schedule's run
// is seen by the credential it ran as, by its id.
func visibleTo(t *Task, auth *model.Auth) bool {
	if auth.HasAll() {
		return true
	}
	if t.OwnerType == OwnerSchedule {
		// A scheduled run acts as the schedule's author: that credential sees it, known
		// by its id (a user or key deleted and made again under the same name is
		// another principal).
		return t.principal == principalOf(auth)
	}
	if t.OwnerType != OwnerAPI && t.OwnerType != OwnerConsole {
		return false
	}
	owner := OwnerID(auth)
	return t.OwnerID == owner && (owner != "system" || t.Submitter == SubmitterOf(auth))
}

// GetFor returns the task when auth may see it; anyone else gets the same not-found
// error as for a missing task.
func (r *Runner) GetFor(ctx context.Context, handle string, auth *model.Auth) (*Task, error) {
	notFound := model.Errorf(model.ENotFound, "task not found")
	if len(handle) > 64 {
		return nil, notFound
	}
	t, err := r.Get(ctx, handle)
	if store.IsNotFound(err) {
		return nil, notFound
	}
	if err != nil {
		return nil, err
	}
	if !visibleTo(t, auth) {
		return nil, notFound
	}
	return t, nil
}

// ListFor lists the tasks auth may see, newest first: every task for callers holding
// every permission, else their own. status filters when not empty.
func (r *Runner) ListFor(ctx context.Context, auth *model.Auth, status string, limit int) ([]*Task, error) {
	if auth.HasAll() {
		return r.ListSubmitted(ctx, "", "", nil, status, limit)
	}
	owner := OwnerID(auth)
	if owner == "system" {
		return r.ListSubmitted(ctx, OwnerAPI, owner, auth, status, limit)
	}
	// A user's tasks, whichever of its credentials submitted them, API or console.
	return r.list(ctx, []string{OwnerAPI, OwnerConsole}, owner, nil, status, limit)
}

// CancelFor cancels a task auth may see (as Cancel): it needs p_pipeline_run
// (forbidden, "permission denied: ... needs p_pipeline_run") and a credential that is not read-only.
func (r *Runner) CancelFor(ctx context.Context, handle string, auth *model.Auth) (*Task, error) {
	if !auth.Has(PermRun) {
		return nil, model.Errorf(model.EForbidden, "permission denied: cancelling a task needs %s", PermRun)
	}
	if auth != nil && auth.ReadOnly {
		return nil, model.Errorf(model.EForbidden, "API key is read-only")
	}
	t, err := r.GetFor(ctx, handle, auth)
	if err != nil {
		return nil, err
	}
	return r.Cancel(ctx, t.Handle)
}
