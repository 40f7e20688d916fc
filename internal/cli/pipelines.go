package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"dataservice/store"
	"dataservice/store/model"
	"dataservice/tasks"
)

func setupPipelineList(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, false)
	return reading(c, func(ctx context.Context, db *store.DB) error {
		list, err := db.Pipelines(ctx)
		if err != nil {
			return err
		}
		for _, p := range list {
			rp := "-"
			if p.RunPermission != nil {
				rp = *p.RunPermission
			}
			fmt.Fprintf(c.stdout, "%d\t%s\trun_permission=%s\n", p.ID, p.Keyname, rp)
		}
		return nil
	})
}

func setupPipelineRun(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, false)
	schemas := fs.String("schema", "", "comma-separated schema names (required)")
	dryrun := fs.Bool("dryrun", false, "compute and report, write nothing")
	wait := fs.Bool("wait", false, "run the task here, show progress and the result")
	return func(ctx context.Context, args []string) error {
		names := splitList(*schemas)
		if len(names) == 0 {
			return &usageError{c.find("pipeline run"), "--schema is required"}
		}
		return c.pipelineRun(ctx, args[0], names, *dryrun, *wait)
	}
}

// pipelineRun submits a task and, with wait, runs it in this process.
func (c *cli) pipelineRun(ctx context.Context, name string, schemas []string, dryrun, wait bool) error {
	var pw *progressWriter
	if wait {
		pw = newProgressWriter(c.stdout)
		c.stderr = pw.logs(c.stderr)
	}
	db, s, log, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	runner := tasks.New(db, tasks.Options{Logger: log, Workers: s.Workers, Lease: s.TaskLease})
	handle, err := runner.Submit(ctx, tasks.Params{Pipeline: name, Schemas: schemas, DryRun: dryrun,
		Auth: model.SystemAuth(), OwnerType: "cli", OwnerID: "system"})
	if err != nil {
		return fmt.Errorf("%s", store.ErrorMessage(err))
	}
	fmt.Fprintf(c.stdout, "task %s submitted\n", handle)
	if !wait {
		fmt.Fprintln(c.stdout, "a running server's workers process it; \"dataservice task wait "+handle+
			"\" follows it, --wait runs it here")
		return nil
	}
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	// The run writes for long: this process runs the search index's catch-up beside it,
	// as serve does, and leaves what is still listed when it ends to the next serve.
	caughtUp := make(chan struct{})
	go func() {
		defer close(caughtUp)
		db.RunSearchCatchUp(runCtx, log)
	}()
	defer func() {
		stopRun()
		<-caughtUp
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runner.RunOne(runCtx, handle)
	}()
	t, err := c.watch(ctx, runner, handle, done, pw, true)
	if err != nil {
		return err
	}
	return c.taskOutcome(t)
}

// taskOutcome prints a finished task's result and turns it into the exit status:
// 1 failed or cancelled, 3 succeeded with errors.
func (c *cli) taskOutcome(t *tasks.Task) error {
	printResult(c, t)
	switch {
	case t.Status != tasks.StatusSucceeded:
		return exitError(exitFailure)
	case t.Result != nil && t.Result.Errors > 0:
		return exitError(exitTaskErrors)
	}
	return nil
}

// watch follows the task until it is finished, drawing one progress line. done closes
// when the local runner stops (nil when another process runs the task). With cancel,
// the first interrupt (ctx ends) cancels the task and keeps waiting for it to stop
// after its current batch, and a second interrupt returns at once; without, the first
// interrupt stops watching and leaves the task alone.
func (c *cli) watch(ctx context.Context, runner *tasks.Runner, handle string, done <-chan struct{}, pw *progressWriter, cancel bool) (*tasks.Task, error) {
	if pw == nil {
		pw = newProgressWriter(c.stdout)
	}
	bg := context.WithoutCancel(ctx)
	interrupted := ctx.Done()
	var again chan os.Signal
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var meter rateMeter
	for {
		t, err := runner.Get(bg, handle)
		if err != nil {
			pw.end()
			return nil, err
		}
		meter.add(time.Now(), t.Progress.Done)
		pw.show(progressLine(t, &meter), t.Finished())
		if t.Finished() {
			pw.end()
			return t, nil
		}
		select {
		case <-interrupted:
			interrupted = nil
			if !cancel {
				pw.end()
				fmt.Fprintf(c.stderr, "stopped waiting; task %s goes on (\"dataservice task cancel %s\" cancels it)\n", handle, handle)
				return nil, exitError(exitFailure)
			}
			again = make(chan os.Signal, 1)
			signal.Notify(again, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(again)
			if _, err := runner.Cancel(bg, handle); err != nil {
				pw.end()
				return nil, err
			}
			pw.end()
			fmt.Fprintf(c.stderr, "interrupted: cancelling task %s (it stops after its current batch; "+
				"press Ctrl-C again to exit at once)\n", handle)
		case <-again:
			pw.end()
			fmt.Fprintf(c.stderr, "exiting: task %s was asked to cancel; \"dataservice task show %s\" shows where it stopped\n",
				handle, handle)
			return nil, exitError(exitFailure)
		case <-done:
			done = nil
		case <-tick.C:
		}
	}
}

// progressLine is "running  40.0% 48000/120000  9600/s  ETA 7s"; before the task
// has counted its instances it says so instead of showing 0/0.
func progressLine(t *tasks.Task, m *rateMeter) string {
	if t.Status == tasks.StatusQueued {
		return "queued: waiting for a worker"
	}
	if t.Progress.Total == 0 && !t.Finished() {
		return "running: counting instances"
	}
	line := fmt.Sprintf("%s %5.1f%% %d/%d", t.Status, t.Progress.Percent, t.Progress.Done, t.Progress.Total)
	if rate := m.rate(); rate > 0 {
		line += fmt.Sprintf("  %.0f/s", rate)
		if !t.Finished() && t.Progress.Total > t.Progress.Done {
			eta := time.Duration(float64(t.Progress.Total-t.Progress.Done) / rate * float64(time.Second))
			line += "  ETA " + eta.Round(time.Second).String()
		}
	}
	if t.Result != nil && t.Result.Errors > 0 {
		line += fmt.Sprintf("  errors %d", t.Result.Errors)
	}
	return line
}

// rateMeter estimates instances per second from the first moving sample.
type rateMeter struct {
	t0, t1 time.Time
	d0, d1 int64
}

func (m *rateMeter) add(at time.Time, done int64) {
	if m.t0.IsZero() || done == 0 {
		m.t0, m.d0 = at, done
	}
	m.t1, m.d1 = at, done
}

func (m *rateMeter) rate() float64 {
	if el := m.t1.Sub(m.t0).Seconds(); el > 0.2 && m.d1 > m.d0 {
		return float64(m.d1-m.d0) / el
	}
	return 0
}

// printResult prints a finished task: errors first when there are any, then the counters.
func printResult(c *cli, t *tasks.Task) {
	r := t.Result
	if r != nil && r.Errors > 0 {
		fmt.Fprintf(c.stdout, "task %s %s with %d errors\n", t.Handle, t.Status, r.Errors)
		shown := r.ErrorMessages
		if len(shown) > 5 {
			shown = shown[:5]
		}
		for _, m := range shown {
			fmt.Fprintf(c.stdout, "error: %s\n", m)
		}
		if int64(len(shown)) < r.Errors {
			fmt.Fprintf(c.stdout, "... %d more (dataservice task show %s lists up to 100)\n", r.Errors-int64(len(shown)), t.Handle)
		}
	} else {
		fmt.Fprintf(c.stdout, "task %s %s\n", t.Handle, t.Status)
	}
	if t.Error != nil {
		fmt.Fprintf(c.stdout, "error: %s\n", *t.Error)
	}
	if r != nil {
		prefix := ""
		if t.DryRun {
			prefix = "dry run: "
		}
		if r.Errors > 0 {
			fmt.Fprintf(c.stdout, "%serrors %d, scanned %d, updated %d, deleted %d, disabled %d, enabled %d, unchanged %d, discarded %d\n",
				prefix, r.Errors, r.Scanned, r.Updated, r.Deleted, r.Disabled, r.Enabled, r.Unchanged, r.Discarded)
			return
		}
		fmt.Fprintf(c.stdout, "%sscanned %d, updated %d, deleted %d, disabled %d, enabled %d, unchanged %d, discarded %d, errors 0\n",
			prefix, r.Scanned, r.Updated, r.Deleted, r.Disabled, r.Enabled, r.Unchanged, r.Discarded)
	}
}
