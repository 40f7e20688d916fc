package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"dataservice/store"
	"dataservice/store/model"
)

// OwnerSchedule is the owner type of the tasks schedules submit; the owner id is the
// schedule's keyname.
const OwnerSchedule = "schedule"

// SchedulerOptions tune a Scheduler.
type SchedulerOptions struct {
	Logger *slog.Logger
	// Clock is the time schedules fall due by (default: the database's clock).
	Clock func() time.Time
	// MaxSleep caps the wait between two looks at the schedules, so a new or changed
	// schedule is noticed within it (default 1s).
	MaxSleep time.Duration
	// MissedAfter is how late a due run may be and still run as due; a run later than
	// that was missed (the service was down) and follows the schedule's missed-run
	// policy (default 1 minute).
	MissedAfter time.Duration
	// OnRun, when set, is told the result of each due run (RunSubmitted, RunSkipped,
	// RunFailed): metrics.
	OnRun func(result string)
}

// Scheduler submits the runs of the stored schedules (`_schedule`) as they fall due.
// Every node runs one; their write transactions serialize, and each due time is
// dealt with once across them.
type Scheduler struct {
	r   *Runner
	db  *store.DB
	o   SchedulerOptions
	log *slog.Logger
	// beforeRun, when set (tests only), is called with a schedule's keyname after
	// Tick read the schedules and before the schedule's due run is dealt with.
	beforeRun func(keyname string)
}

// NewScheduler returns a Scheduler submitting its runs to r.
func NewScheduler(r *Runner, o SchedulerOptions) *Scheduler {
	if o.Logger == nil {
		o.Logger = r.log
	}
	if o.Clock == nil {
		o.Clock = r.db.Now
	}
	if o.MaxSleep <= 0 {
		o.MaxSleep = time.Second
	}
	if o.MissedAfter <= 0 {
		o.MissedAfter = time.Minute
	}
	return &Scheduler{r: r, db: r.db, o: o, log: o.Logger}
}

// Run looks at the schedules until ctx ends, sleeping until the next due time across
// them, at most MaxSleep.
func (s *Scheduler) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		next, err := s.Tick(ctx, s.o.Clock())
		if err != nil && ctx.Err() == nil {
			s.log.Error("schedule tick", "error", err)
		}
		wait := s.o.MaxSleep
		if !next.IsZero() {
			if d := next.Sub(s.o.Clock()); d < wait {
				wait = max(d, 10*time.Millisecond)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	return nil
}

// spec is what a schedule's state is started for: a change of any part starts it
// again from the time of the change.
func spec(sc *store.Schedule) string {
	b, _ := json.Marshal([]any{strings.TrimSpace(sc.Cron), strings.TrimSpace(sc.Timezone), sc.IsEnabled})
	return string(b)
}

// Tick deals with every schedule at now: it starts the state of new and changed
// schedules from now, and for each enabled schedule whose next run fell due it
// submits the run (or skips it), each in its own transaction. It returns the earliest
// due time after now across the schedules (zero when none).
func (s *Scheduler) Tick(ctx context.Context, now time.Time) (time.Time, error) {
	scheds, err := s.db.Schedules(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("read schedules: %w", err)
	}
	states, err := readRuns(ctx, s.db)
	if err != nil {
		return time.Time{}, err
	}
	var next time.Time
	var errs []error
	for _, sc := range scheds {
		st := states[sc.Keyname]
		delete(states, sc.Keyname)
		n, err := s.tickOne(ctx, sc, st, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("schedule %s: %w", sc.Keyname, err))
		}
		if !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	if len(states) > 0 {
		gone := make([]string, 0, len(states))
		for k := range states {
			gone = append(gone, k)
		}
		if err := forgetRuns(ctx, s.db, gone); err != nil {
			errs = append(errs, err)
		}
	}
	return next, errors.Join(errs...)
}

// tickOne deals with one schedule whose committed state is st (nil: none yet) and
// returns its next due time after now.
func (s *Scheduler) tickOne(ctx context.Context, sc *store.Schedule, st *runState, now time.Time) (time.Time, error) {
	sp := spec(sc)
	if st == nil || st.Spec != sp {
		// New, changed, enabled or disabled: it starts from now, no back-fill.
		err := s.db.WithTx(ctx, func(tx *store.Tx) error {
			cur, err := runIn(ctx, tx, sc.Keyname)
			if err != nil {
				return err
			}
			if !sameRun(cur, st) {
				return errRaced
			}
			return startRun(ctx, tx, sc.Keyname, sp, now, now, cur)
		})
		if err != nil && !errors.Is(err, errRaced) {
			return time.Time{}, err
		}
		if err == nil {
			s.log.Info("schedule started", "schedule", sc.Keyname, "enabled", sc.IsEnabled)
			if _, perr := sc.Parse(); perr != nil && sc.IsEnabled {
				s.log.Warn("schedule cannot run", "schedule", sc.Keyname, "error", store.ErrorMessage(perr))
			}
		}
		return time.Time{}, nil // looked at again on the next tick
	}
	if !sc.IsEnabled {
		return time.Time{}, nil
	}
	cs, err := sc.Parse()
	if err != nil {
		// A write validates the expression and the zone; one this system refuses anyway
		// was logged when the schedule started, the listings show why, and it waits
		// for a change.
		return time.Time{}, nil
	}
	first := cs.Next(st.LastDue)
	if first.IsZero() || first.After(now) {
		return first, nil
	}
	// Later due times up to now are dealt with by this one run: recording now rather
	// than the last of them gives the same next due time for a cron, and counts an
	// interval from now for @every.
	due, missed := first, now.Sub(first) > s.o.MissedAfter
	if second := cs.Next(first); !second.IsZero() && !second.After(now) {
		due = now
	}
	if s.beforeRun != nil {
		s.beforeRun(sc.Keyname)
	}
	result, err := s.runDue(ctx, sc, st, due, now, missed)
	if errors.Is(err, errRaced) {
		return cs.Next(now), nil
	}
	if err != nil {
		return time.Time{}, err
	}
	if s.o.OnRun != nil {
		s.o.OnRun(result)
	}
	return cs.Next(now), nil
}

// sameRun reports whether a and b are the same state (both none, or the same row).
func sameRun(a, b *runState) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Spec == b.Spec && a.lastDue == b.lastDue
}

// runDue deals with one due run of sc in one write transaction: it re-reads the state
// (another node may have dealt with it: errRaced) and the schedule itself (deleted,
// disabled, or its cron or zone changed since Tick read it: errRaced, and the next tick
// forgets or starts it again), skips the run when the schedule's previous run is still
// queued or running or when it was missed and the policy is skip, else submits it as
// the schedule's author as the transaction reads it (a pipeline or author changed
// meanwhile is the one used); then it records due.
func (s *Scheduler) runDue(ctx context.Context, sc *store.Schedule, st *runState, due, now time.Time, missed bool) (string, error) {
	var result, handle, reason string
	err := s.db.WithTx(ctx, func(tx *store.Tx) error {
		cur, err := runIn(ctx, tx, sc.Keyname)
		if err != nil {
			return err
		}
		if !sameRun(cur, st) {
			return errRaced
		}
		in, err := tx.Instance(ctx, store.ScheduleClass, sc.Keyname)
		if store.IsNotFound(err) {
			return errRaced
		}
		if err != nil {
			return fmt.Errorf("read schedule: %w", err)
		}
		if sc = store.ScheduleOf(in); spec(sc) != st.Spec {
			return errRaced
		}
		result, handle, reason = RunSkipped, "", ""
		var busy int
		if err := table.QueryRow(ctx, tx, `SELECT count(*) FROM tasks WHERE owner_type = ? AND owner_id = ?
			AND status IN ('queued', 'running')`, OwnerSchedule, sc.Keyname).Scan(&busy); err != nil {
			return fmt.Errorf("count schedule tasks: %w", err)
		}
		switch {
		case busy > 0:
			reason = "the previous run is still queued or running"
		case missed && sc.Missed == model.MissedSkip:
			reason = "missed while the service was down (missed: skip)"
		default:
			handle, err = s.submit(ctx, tx, sc)
			if code := store.ErrorCode(err); err != nil && (code == model.EInternal || code == model.EDiskFull) {
				return err // rolled back: the next tick tries again
			}
			if err != nil {
				result, reason = RunFailed, store.ErrorMessage(err)
			} else {
				result = RunSubmitted
			}
		}
		task := handle
		if task == "" {
			task = cur.Task // the last run's task stays shown (for an overlap, the one still going)
		}
		return recordRun(ctx, tx, cur, due, now, result, task, reason)
	})
	if err != nil {
		return "", err
	}
	attrs := []any{"schedule", sc.Keyname, "due", due.UTC().Format(time.RFC3339), "result", result}
	switch result {
	case RunSubmitted:
		s.r.wakeUp()
		s.log.Info("schedule run submitted", append(attrs, "handle", handle, "missed", missed)...)
	default:
		s.log.Warn("schedule run not submitted", append(attrs, "reason", reason)...)
	}
	return result, nil
}

// submit queues sc's pipeline run in tx as its author, whose rights are read now.
func (s *Scheduler) submit(ctx context.Context, tx *store.Tx, sc *store.Schedule) (string, error) {
	auth, err := s.db.AuthOf(ctx, sc.Author, sc.AuthorID)
	if err != nil {
		return "", err
	}
	return s.r.SubmitTx(ctx, tx, Params{Pipeline: sc.Pipeline, Schemas: sc.Schemas, DryRun: sc.DryRun,
		Auth: auth, OwnerType: OwnerSchedule, OwnerID: sc.Keyname})
}
