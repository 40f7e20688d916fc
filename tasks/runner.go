package tasks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"dataservice/store"
	"dataservice/store/model"
)

// Run starts the workers and blocks until ctx ends; it then waits for running tasks to
// commit their current batch and hands them back to the queue. It purges old tasks at
// start and daily, and old revisions (PurgeRevisions).
func (r *Runner) Run(ctx context.Context) error {
	if n, err := r.Purge(ctx); err != nil {
		r.log.Error("purge tasks", "error", err)
	} else if n > 0 {
		r.log.Info("purged finished tasks", "count", n)
	}
	r.purgeRevisions(ctx)
	var wg sync.WaitGroup
	for i := 0; i < r.o.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.work(ctx, "")
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(24 * time.Hour)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if _, err := r.Purge(ctx); err != nil {
					r.log.Error("purge tasks", "error", err)
				}
				r.purgeRevisions(ctx)
			}
		}
	}()
	wg.Wait()
	return nil
}

// RunOne processes only the task handle (claiming it when it is queued or its lease
// expired) and returns when it is finished or ctx ends. The CLI uses it to run its own
// task when no server is running.
func (r *Runner) RunOne(ctx context.Context, handle string) error {
	r.work(ctx, handle)
	return ctx.Err()
}

// work claims and runs tasks until ctx ends (or, with only set, until that task is done).
func (r *Runner) work(ctx context.Context, only string) {
	for ctx.Err() == nil {
		claimed, lease, err := r.claim(ctx, only)
		if err != nil && ctx.Err() == nil {
			r.log.Error("claim task", "error", err)
		}
		if claimed != "" {
			r.execute(ctx, claimed, lease)
			continue
		}
		if only != "" {
			t, err := r.Get(ctx, only)
			if err != nil || t.Finished() {
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-r.wake:
		case <-time.After(r.o.Poll):
		}
	}
}

// claim takes one queued task, or a running one whose lease expired, with one UPDATE ... RETURNING.
// The lease it returns names this claim alone (the runner's id and a claim number):
// when a worker's lease expires and another worker of the same runner takes the task
// over, the first worker's next batch must find the lease no longer its own.
//
// The subquery picking the task ends with the table's SkipLocked: on PostgreSQL it
// is FOR UPDATE SKIP LOCKED, so the picked row is locked until the claim commits and
// a row another node's claim holds is passed over rather than waited for (without it,
// a claim that waited would re-check the locked row, find it running and take
// nothing although other tasks were queued). Every write transaction also takes the
// store's global writer lock on PostgreSQL, so today two claims never overlap and
// SKIP LOCKED passes over nothing; it keeps claims correct across nodes without
// relying on that lock (a claim reads the row under its own row lock and never
// blocks on a row another transaction holds). Leases and take-over are the same on
// both engines: the lease column, not the row lock, says who holds a running task.
func (r *Runner) claim(ctx context.Context, only string) (handle, lease string, err error) {
	lease = r.id + "#" + strconv.FormatUint(r.claims.Add(1), 10)
	// Leases are instants of the database's clock like every other time a row holds
	// (in production it is the wall clock, which every process sharing the file reads;
	// nodes sharing a PostgreSQL database each read their own host's, kept in step by
	// NTP: docs/postgres.md).
	ts := r.db.Now().UTC()
	cond := "(status = 'queued' OR (status = 'running' AND lease_until < ?))"
	args := []any{lease, leaseTime(ts.Add(r.o.Lease)), r.now(), leaseTime(ts)}
	q := `UPDATE tasks SET status = 'running', lease_owner = ?, lease_until = ?, started_at = COALESCE(started_at, ?)
		WHERE handle = (SELECT handle FROM tasks WHERE ` + cond
	if only != "" {
		q += " AND handle = ?"
		args = append(args, only)
	}
	q += " ORDER BY created_at, " + table.RowOrder(r.db) + " LIMIT 1" + table.SkipLocked(r.db) + ") RETURNING handle"
	err = r.db.WithTx(ctx, func(tx *store.Tx) error {
		return table.QueryRow(ctx, tx, q, args...).Scan(&handle)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", nil
	}
	return handle, lease, err
}

// leaseTime formats lease instants with a fixed width so they compare as text.
func leaseTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// execute runs a claimed task to its end, recovering from panics.
func (r *Runner) execute(ctx context.Context, handle, lease string) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("task panicked", "handle", handle, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			r.finish(context.WithoutCancel(ctx), handle, lease, StatusFailed, "internal error")
		}
	}()
	t, p, auth, err := r.load(context.WithoutCancel(ctx), handle)
	if err != nil {
		r.log.Error("load task", "handle", handle, "error", err)
		r.finish(context.WithoutCancel(ctx), handle, lease, StatusFailed, "internal error")
		return
	}
	r.log.Info("task start", "handle", handle, "pipeline", p.Pipeline, "schemas", p.Schemas, "dryrun", p.DryRun)
	status, msg := r.runPipeline(ctx, t, p, auth, lease)
	switch status {
	case "":
		// Stopped by shutdown or a lost lease: the task stays resumable.
		r.log.Info("task interrupted; it resumes from its checkpoint", "handle", handle)
		return
	default:
		r.finish(context.WithoutCancel(ctx), handle, lease, status, msg)
		r.log.Info("task end", "handle", handle, "status", status)
	}
}

func (r *Runner) load(ctx context.Context, handle string) (*Task, *params, *model.Auth, error) {
	return scanTask(table.ReadRow(ctx, r.db, "SELECT "+taskCols+" FROM tasks WHERE handle = ?", handle))
}

// finish records a final status, if the task is still held under lease.
func (r *Runner) finish(ctx context.Context, handle, lease, status, msg string) {
	var errText any
	if msg != "" {
		errText = msg
	}
	err := r.db.WithTx(ctx, func(tx *store.Tx) error {
		_, err := table.Exec(ctx, tx, `UPDATE tasks SET status = ?, error = ?, finished_at = ?, lease_owner = '',
			lease_until = '' WHERE handle = ? AND lease_owner = ? AND status = 'running'`, status, errText, r.now(), handle, lease)
		return err
	})
	if err != nil {
		r.log.Error("finish task", "handle", handle, "error", err)
	}
}

// release hands a running task back to the queue (graceful shutdown).
func (r *Runner) release(ctx context.Context, handle, lease string) {
	err := r.db.WithTx(ctx, func(tx *store.Tx) error {
		_, err := table.Exec(ctx, tx, `UPDATE tasks SET status = 'queued', lease_owner = '', lease_until = ''
			WHERE handle = ? AND lease_owner = ? AND status = 'running'`, handle, lease)
		return err
	})
	if err != nil {
		r.log.Error("release task", "handle", handle, "error", err)
	}
}
