package tasks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"dataservice/store"
)

// The scheduler owns its state table: one row per schedule, the last due time it
// dealt with and what it did then. A due run is submitted, and its row advanced, in
// one write transaction whose update is conditional on the row read, so across
// restarts, processes and PostgreSQL nodes each due time is dealt with once.
var runsTable = store.RegisterLayout("schedule_runs",
	// 1: the state of each schedule.
	`
CREATE TABLE IF NOT EXISTS schedule_runs (
	keyname     TEXT PRIMARY KEY,
	-- The cron expression, zone and enabled flag the state was started for: a schedule
	-- whose spec changed starts again from the time of the change (no back-fill).
	spec        TEXT NOT NULL,
	-- The last due time dealt with (UTC, fixed width so it compares as text).
	last_due    TEXT NOT NULL,
	-- What the scheduler did at last_due: submitted, skipped or failed; the last task
	-- it submitted (kept when a later due run submitted none), and why it skipped or
	-- failed.
	last_result TEXT NOT NULL DEFAULT '',
	last_task   TEXT NOT NULL DEFAULT '',
	last_error  TEXT NOT NULL DEFAULT '',
	updated_at  TEXT NOT NULL
);
`)

// Results of a due run (the metric's label values and schedule_runs.last_result).
const (
	RunSubmitted = "submitted"
	RunSkipped   = "skipped"
	RunFailed    = "failed"
)

// runState is a schedule's row of schedule_runs.
type runState struct {
	Keyname, Spec, Result, Task, Error string
	LastDue                            time.Time
	lastDue                            string // as stored: the update's condition
}

// dueTime formats due times with a fixed width so they compare as text.
func dueTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

const runCols = "keyname, spec, last_due, last_result, last_task, last_error"

func scanRun(row interface{ Scan(...any) error }) (*runState, error) {
	st := &runState{}
	if err := row.Scan(&st.Keyname, &st.Spec, &st.lastDue, &st.Result, &st.Task, &st.Error); err != nil {
		return nil, err
	}
	t, err := time.Parse(time.RFC3339Nano, st.lastDue)
	if err != nil {
		return nil, fmt.Errorf("schedule %s: last_due %q: %w", st.Keyname, st.lastDue, err)
	}
	st.LastDue = t
	return st, nil
}

// readRuns reads every schedule's state as committed.
func readRuns(ctx context.Context, db *store.DB) (map[string]*runState, error) {
	rows, err := runsTable.Read(ctx, db, "SELECT "+runCols+" FROM schedule_runs")
	if err != nil {
		return nil, fmt.Errorf("read schedule runs: %w", err)
	}
	defer rows.Close()
	out := map[string]*runState{}
	for rows.Next() {
		st, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("read schedule runs: %w", err)
		}
		out[st.Keyname] = st
	}
	return out, rows.Err()
}

// runIn reads one schedule's state inside tx (nil when it has none).
func runIn(ctx context.Context, tx *store.Tx, key string) (*runState, error) {
	st, err := scanRun(runsTable.QueryRow(ctx, tx, "SELECT "+runCols+" FROM schedule_runs WHERE keyname = ?", key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read schedule run %s: %w", key, err)
	}
	return st, nil
}

// errRaced says another scheduler dealt with the due time first.
var errRaced = errors.New("schedule state changed meanwhile")

// startRun records a schedule's state started at due for spec, over prev (nil: no
// row yet): the update is conditional on prev, errRaced when another scheduler wrote
// it meanwhile.
func startRun(ctx context.Context, tx *store.Tx, key, spec string, due, now time.Time, prev *runState) error {
	if prev == nil {
		res, err := runsTable.Exec(ctx, tx, `INSERT INTO schedule_runs(keyname, spec, last_due, updated_at)
			VALUES(?, ?, ?, ?) ON CONFLICT(keyname) DO NOTHING`, key, spec, dueTime(due), dueTime(now))
		return racedUnless(res, err, "start schedule "+key)
	}
	res, err := runsTable.Exec(ctx, tx, `UPDATE schedule_runs SET spec = ?, last_due = ?, last_result = '',
		last_task = '', last_error = '', updated_at = ? WHERE keyname = ? AND spec = ? AND last_due = ?`,
		spec, dueTime(due), dueTime(now), key, prev.Spec, prev.lastDue)
	return racedUnless(res, err, "restart schedule "+key)
}

// recordRun advances a schedule's state from prev to due with what was done.
func recordRun(ctx context.Context, tx *store.Tx, prev *runState, due, now time.Time, result, task, errText string) error {
	res, err := runsTable.Exec(ctx, tx, `UPDATE schedule_runs SET last_due = ?, last_result = ?, last_task = ?,
		last_error = ?, updated_at = ? WHERE keyname = ? AND spec = ? AND last_due = ?`,
		dueTime(due), result, task, errText, dueTime(now), prev.Keyname, prev.Spec, prev.lastDue)
	return racedUnless(res, err, "record schedule run "+prev.Keyname)
}

// racedUnless is errRaced unless the statement changed one row.
func racedUnless(res interface{ RowsAffected() (int64, error) }, err error, what string) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	} else if n != 1 {
		return errRaced
	}
	return nil
}

// forgetRuns deletes the state of schedules that no longer exist (deleted or
// renamed: a renamed schedule starts again under its new name).
func forgetRuns(ctx context.Context, db *store.DB, keys []string) error {
	return db.WithTx(ctx, func(tx *store.Tx) error {
		for _, k := range keys {
			if _, err := runsTable.Exec(ctx, tx, "DELETE FROM schedule_runs WHERE keyname = ?", k); err != nil {
				return fmt.Errorf("forget schedule %s: %w", k, err)
			}
		}
		return nil
	})
}
