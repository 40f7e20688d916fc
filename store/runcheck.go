package store

import (
	"context"
	"strings"

	"dataservice/internal/clip"
	"dataservice/store/model"
)

// The checks of this file decide whether a principal may run a pipeline. A direct run
// (the API, the console), a run an event rule submits, a schedule's run and the task
// runner when the task starts all apply them, and so does the validation of an event
// rule or a schedule (its writer must be able to run what it arms), so no path runs a
// pipeline that its principal could not run directly.

// PermPipelineRun is the permission every pipeline run needs.
const PermPipelineRun = "p_pipeline_run"

// MayStartRuns reports (nil) whether auth may run pipelines at all: it holds
// p_pipeline_run and is not a read-only key. nil auth holds every permission.
func MayStartRuns(auth *model.Auth) error {
	if auth == nil {
		return nil
	}
	if !auth.Has(PermPipelineRun) {
		return model.Errorf(model.EForbidden, "permission denied: running a pipeline needs %s", PermPipelineRun)
	}
	if auth.ReadOnly {
		return model.Errorf(model.EForbidden, "API key is read-only")
	}
	return nil
}

// MayRunPipeline reports (nil) whether auth may run pl: it must be enabled and auth
// must hold its run_permission when it has one. nil auth holds every permission.
func MayRunPipeline(auth *model.Auth, pl *Pipeline) error {
	if !pl.IsEnabled {
		return model.Errorf(model.EInvalid, "pipeline %s is disabled", pl.Keyname)
	}
	if auth != nil && pl.RunPermission != nil && !auth.Has(*pl.RunPermission) {
		return model.Errorf(model.EInvalid, "permission denied: pipeline %s needs %s", pl.Keyname, *pl.RunPermission)
	}
	return nil
}

// RunnableBy reports (nil) whether a run by auth may name schema s: built-in classes
// other than _user cannot be run; auth must read s, and for a real run (not dryrun)
// update it. nil auth holds every permission.
func RunnableBy(auth *model.Auth, s *model.Schema, dryrun bool) error {
	if strings.HasPrefix(s.Keyname, "_") && s.Keyname != "_user" {
		return model.Errorf(model.EInvalid, "schema %s cannot be run (built-in class)", clip.Quote(s.Keyname))
	}
	if !model.CanRead(auth, s) {
		return model.Errorf(model.EInvalid, "permission denied: reading %s needs %s", s.Keyname, model.ReadPermission(s))
	}
	if !dryrun && !model.CanWrite(auth, s, model.ActionUpdate) {
		return model.Errorf(model.EInvalid, "permission denied: updating %s needs %s", s.Keyname, model.WritePermission(s, model.ActionUpdate))
	}
	return nil
}

// checkAuthored applies the checks of an event rule's or a schedule's new state that
// depend on its writer (auth; nil: every permission); old is the stored state (nil
// for a create). Other classes pass.
func (tx *Tx) checkAuthored(ctx context.Context, auth *model.Auth, s *model.Schema, old, next *Instance) error {
	switch {
	case tx.migration:
		return nil
	case s.Keyname == EventRuleClass:
		return tx.checkEventRule(ctx, auth, s, old, next)
	case s.Keyname == ScheduleClass && next.IsEnabled:
		sc := ScheduleOf(next)
		if err := tx.checkArmedRun(ctx, auth, sc.Pipeline, sc.Schemas, sc.DryRun); err != nil {
			var probs model.Problems
			if perr := probs.Add("pipeline", err); perr != nil {
				return perr
			}
			return probs.Err()
		}
	}
	return nil
}

// checkArmedRun refuses (invalid) the write of an event rule or a schedule
// whose pipeline its writer (auth; nil: every permission) could not run now over the
// schemas it names: p_pipeline_run, a credential that is not read-only, the pipeline
// enabled and its run_permission held, each schema readable and, unless dryrun,
// updatable. The pipeline and the schemas are read as this transaction sees them;
// ones that do not exist are the class checks' to name, so they pass here.
func (tx *Tx) checkArmedRun(ctx context.Context, auth *model.Auth, pipeline string, schemas []string, dryrun bool) error {
	if pipeline == "" || auth == nil {
		return nil
	}
	refuse := func(err error) error {
		return model.Errorf(model.EInvalid, "pipeline: the writer could not run pipeline %s: %s", clip.Quote(pipeline), ErrorMessage(err))
	}
	if err := MayStartRuns(auth); err != nil {
		return refuse(err)
	}
	in, err := tx.Instance(ctx, "_pipeline", pipeline)
	if IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := MayRunPipeline(auth, PipelineOf(in)); err != nil {
		return refuse(err)
	}
	for _, name := range schemas {
		s, err := tx.Schema(ctx, name)
		if IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		if err := RunnableBy(auth, s, dryrun); err != nil {
			return refuse(err)
		}
	}
	return nil
}
