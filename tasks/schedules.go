package tasks

import (
	"context"
	"time"

	"dataservice/store"
	"dataservice/store/model"
)

// NextShown is how many next due times a schedule's listing shows.
const NextShown = 3

// ScheduleStatus is a schedule as listings show it (the API, the CLI, the console):
// its definition, its next due times and its last due run.
type ScheduleStatus struct {
	Keyname  string   `json:"keyname" yaml:"keyname"`
	Pipeline string   `json:"pipeline" yaml:"pipeline"`
	Schemas  []string `json:"schemas" yaml:"schemas"`
	Cron     string   `json:"cron" yaml:"cron"`
	Timezone string   `json:"timezone" yaml:"timezone"`
	DryRun   bool     `json:"dryrun" yaml:"dryrun"`
	Missed   string   `json:"missed" yaml:"missed"`
	Enabled  bool     `json:"enabled" yaml:"enabled"`
	Author   string   `json:"author" yaml:"author"`
	// Next are the next due times (in UTC; Timezone says where the expression is
	// read): none when the schedule is disabled or its expression does not parse.
	Next []time.Time `json:"next_runs" yaml:"next_runs"`
	// Problem says why a stored schedule cannot run (an expression or zone this
	// system refuses), else "".
	Problem string `json:"problem,omitempty" yaml:"problem,omitempty"`
	// LastDue is the last due time dealt with, nil before the first.
	LastDue *time.Time `json:"last_due" yaml:"last_due"`
	// LastResult is what was done then (RunSubmitted, RunSkipped, RunFailed), LastTask
	// the last task the schedule submitted (kept through later skips and failures),
	// LastError why it was skipped or failed.
	LastResult string `json:"last_result" yaml:"last_result"`
	LastTask   string `json:"last_task" yaml:"last_task"`
	LastError  string `json:"last_error" yaml:"last_error"`
}

// ListSchedules lists every schedule (in id order) with its next due times after now
// and its last due run.
func ListSchedules(ctx context.Context, db *store.DB, now time.Time) ([]*ScheduleStatus, error) {
	scheds, err := db.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	states, err := readRuns(ctx, db)
	if err != nil {
		return nil, err
	}
	out := make([]*ScheduleStatus, 0, len(scheds))
	for _, sc := range scheds {
		v := &ScheduleStatus{Keyname: sc.Keyname, Pipeline: sc.Pipeline, Schemas: sc.Schemas, Cron: sc.Cron,
			Timezone: sc.Timezone, DryRun: sc.DryRun, Missed: sc.Missed, Enabled: sc.IsEnabled, Author: sc.Author,
			Next: []time.Time{}}
		if v.Schemas == nil {
			v.Schemas = []string{}
		}
		if v.Timezone == "" {
			v.Timezone = "UTC"
		}
		st := states[sc.Keyname]
		current := st != nil && st.Spec == spec(sc)
		if current && st.Result != "" {
			// A state only started (a new or changed schedule) has dealt with no run.
			due := st.LastDue
			v.LastDue, v.LastResult, v.LastTask, v.LastError = &due, st.Result, st.Task, st.Error
		}
		cs, err := sc.Parse()
		if err != nil {
			v.Problem = store.ErrorMessage(err)
		} else if sc.IsEnabled {
			v.Next = nextTimes(cs, st, current, now)
		}
		out = append(out, v)
	}
	return out, nil
}

// nextTimes are the next NextShown due times: counted from the last due time the
// scheduler dealt with (an interval counts from it), or from now when it has none or
// the next one is already past (it is about to run).
func nextTimes(cs *model.CronSchedule, st *runState, current bool, now time.Time) []time.Time {
	from := now
	if current && !cs.Next(st.LastDue).Before(now) {
		from = st.LastDue
	}
	list := cs.NextTimes(from, NextShown)
	for i := range list {
		list[i] = list[i].UTC()
	}
	return list
}
