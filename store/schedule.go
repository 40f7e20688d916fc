package store

import (
	"context"
	"errors"
	"strings"

	"dataservice/internal/clip"
	"dataservice/store/model"
)

// ScheduleClass is the built-in class of schedules: pipelines run on a timer.
const ScheduleClass = "_schedule"

// Schedule is a stored `_schedule` instance.
type Schedule struct {
	ID        int64
	Keyname   string
	Pipeline  string
	Schemas   []string
	Cron      string
	Timezone  string // "" stands for UTC
	DryRun    bool
	Missed    string // model.MissedRunOnce or model.MissedSkip
	Author    string // the last writer (model.Auth.Author's form)
	AuthorID  int64  // the last writer's instance id (model.Auth.AuthorID)
	IsEnabled bool
}

// ScheduleOf reads a `_schedule` instance as a Schedule.
func ScheduleOf(in *Instance) *Schedule {
	s := &Schedule{ID: in.ID, Keyname: in.Keyname, IsEnabled: in.IsEnabled, Schemas: stringList(in.Data["schemas"])}
	s.Pipeline, _ = model.ScalarText(in.Data["pipeline"])
	s.Cron, _ = model.ScalarText(in.Data["cron"])
	s.Timezone, _ = model.ScalarText(in.Data["timezone"])
	s.Missed, _ = model.ScalarText(in.Data["missed"])
	if s.Missed == "" {
		s.Missed = model.MissedRunOnce
	}
	s.Author, _ = model.ScalarText(in.Data[AuthorField])
	s.AuthorID = authorIDOf(in)
	s.DryRun, _ = in.Data["dryrun"].(bool)
	return s
}

// Parse is the schedule's cron expression in its time zone.
func (s *Schedule) Parse() (*model.CronSchedule, error) {
	loc, err := model.LoadZone(s.Timezone)
	if err != nil {
		return nil, err
	}
	return model.ParseCron(s.Cron, loc)
}

// Schedules lists every schedule in id order.
func (db *DB) Schedules(ctx context.Context) ([]*Schedule, error) {
	out := []*Schedule{}
	err := db.EachInstance(ctx, ScheduleClass, func(in *Instance) error {
		out = append(out, ScheduleOf(in))
		return nil
	})
	return out, err
}

// classChecks adds to verr (the field validation's refusal of in, or nil) the
// problems of a schedule's fields taken together, so a form shows every one at once:
// the cron expression parses in the time zone, the zone loads, the missed-run policy
// is known, the pipeline and the schemas exist (as this transaction sees them, so one
// load may create a pipeline and its schedule). Other classes pass verr through.
func (tx *Tx) classChecks(ctx context.Context, s *model.Schema, in *Instance, verr error) error {
	if s.Keyname != ScheduleClass || tx.migration || in == nil {
		return verr
	}
	var probs model.Problems
	refused := map[string]bool{} // the fields whose own validation refused them
	if verr != nil {
		var e *model.Error
		if !errors.As(verr, &e) || e.Code == model.EInternal || e.Code == model.EDiskFull {
			return verr
		}
		if err := probs.Add("", verr); err != nil {
			return err
		}
		for _, p := range ErrorProblems(verr) {
			refused[p.Field] = true
		}
	}
	add := func(field string, err error) error {
		if err == nil || refused[field] {
			return nil // the field's own refusal says enough
		}
		return probs.Add(field, err)
	}
	text := func(k string) string { v, _ := model.ScalarText(in.Data[k]); return strings.TrimSpace(v) }
	loc, zerr := model.LoadZone(text("timezone"))
	if err := add("timezone", zerr); err != nil {
		return err
	}
	if zerr == nil && text("cron") != "" {
		_, err := model.ParseCron(text("cron"), loc)
		if err := add("cron", err); err != nil {
			return err
		}
	}
	if err := add("missed", model.CheckMissed(text("missed"))); err != nil {
		return err
	}
	// What the schedule names must exist only while it is enabled: a schedule whose
	// pipeline or schema was deleted can still be disabled or edited; enabling it checks
	// them again.
	if name := text("pipeline"); name != "" && in.IsEnabled {
		if err := add("pipeline", tx.knownInstance(ctx, "_pipeline", "pipeline", name)); err != nil {
			return err
		}
	}
	for _, name := range stringList(in.Data["schemas"]) {
		if !in.IsEnabled {
			break
		}
		if err := add("schemas", tx.runnableSchema(ctx, name)); err != nil {
			return err
		}
	}
	probs.SortBy(s.FieldIndex)
	return probs.Err()
}

// knownInstance refuses (invalid) a name that no instance of cls holds.
func (tx *Tx) knownInstance(ctx context.Context, cls, what, name string) error {
	_, err := tx.Instance(ctx, cls, name)
	if IsNotFound(err) {
		return model.Errorf(model.EInvalid, "unknown %s %s", what, clip.Quote(name))
	}
	return err
}

// runnableSchema refuses (invalid) a schema a pipeline run cannot name: one that does
// not exist, or a built-in class other than _user.
func (tx *Tx) runnableSchema(ctx context.Context, name string) error {
	if strings.HasPrefix(name, "_") && name != "_user" {
		return model.Errorf(model.EInvalid, "schema %s cannot be run (built-in class)", clip.Quote(name))
	}
	_, err := tx.Schema(ctx, name)
	if IsNotFound(err) {
		return model.Errorf(model.EInvalid, "unknown schema %s", clip.Quote(name))
	}
	return err
}
