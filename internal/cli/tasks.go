package cli

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"dataservice/store"
	"dataservice/tasks"
)

// taskRunner opens the database and returns a Runner over it (only to read, cancel
// and follow tasks: it never starts workers); readOnly accepts a read-only file.
func (c *cli) taskRunner(ctx context.Context, readOnly bool) (*store.DB, *tasks.Runner, error) {
	open := func() (*store.DB, *settings, *slog.Logger, error) { return c.open(ctx) }
	if readOnly {
		open = func() (*store.DB, *settings, *slog.Logger, error) { return c.openRead(ctx) }
	}
	db, s, log, err := open()
	if err != nil {
		return nil, nil, err
	}
	return db, tasks.New(db, tasks.Options{Logger: log, Workers: s.Workers, Lease: s.TaskLease}), nil
}

func setupTaskList(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, false)
	status := fs.String("status", "", "only tasks with this status: queued, running, succeeded, failed or cancelled")
	limit := fs.Int("limit", 20, "at most this many tasks (1 to 1000)")
	return func(ctx context.Context, _ []string) error {
		switch *status {
		case "", tasks.StatusQueued, tasks.StatusRunning, tasks.StatusSucceeded, tasks.StatusFailed, tasks.StatusCancelled:
		default:
			return &usageError{c.find("task list"), fmt.Sprintf("--status %q: not queued, running, succeeded, failed or cancelled", *status)}
		}
		if *limit < 1 || *limit > 1000 {
			return &usageError{c.find("task list"), fmt.Sprintf("--limit %d: not from 1 to 1000", *limit)}
		}
		db, runner, err := c.taskRunner(ctx, true)
		if err != nil {
			return err
		}
		defer db.Close()
		list, err := runner.List(ctx, "", "", *status, *limit)
		if err != nil {
			return err
		}
		if len(list) == 0 {
			fmt.Fprintln(c.stderr, "no tasks")
			return nil
		}
		fmt.Fprintln(c.stdout, "HANDLE\tSTATUS\tERRORS\tPROGRESS\tPIPELINE\tSCHEMAS\tDRYRUN\tCREATED\tOWNER")
		for _, t := range list {
			errs := "-"
			if t.Result != nil {
				errs = fmt.Sprint(t.Result.Errors)
			}
			fmt.Fprintf(c.stdout, "%s\t%s\t%s\t%d/%d\t%s\t%s\t%v\t%s\t%s:%s\n", t.Handle, t.Status, errs,
				t.Progress.Done, t.Progress.Total, t.Pipeline, strings.Join(t.Schemas, ","), t.DryRun, t.CreatedAt,
				t.OwnerType, t.OwnerID)
		}
		return nil
	}
}

func setupTaskShow(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, false)
	return func(ctx context.Context, args []string) error {
		db, runner, err := c.taskRunner(ctx, true)
		if err != nil {
			return err
		}
		defer db.Close()
		t, err := runner.Get(ctx, args[0])
		if err != nil {
			return fmt.Errorf("%s", store.ErrorMessage(err))
		}
		c.printTask(t)
		return nil
	}
}

// printTask prints a task: its status line, errors first when there are any, then the
// counters, times and the changes it recorded.
func (c *cli) printTask(t *tasks.Task) {
	if !t.Finished() {
		fmt.Fprintf(c.stdout, "task %s %s %.1f%% %d/%d\n", t.Handle, t.Status, t.Progress.Percent, t.Progress.Done, t.Progress.Total)
		if t.Result != nil && t.Result.Errors > 0 {
			fmt.Fprintf(c.stdout, "errors so far %d\n", t.Result.Errors)
		}
	} else {
		printResult(c, t)
	}
	fmt.Fprintf(c.stdout, "pipeline %s, schemas %s, dryrun %v, owner %s:%s\n", t.Pipeline, strings.Join(t.Schemas, ","),
		t.DryRun, t.OwnerType, t.OwnerID)
	fmt.Fprintf(c.stdout, "created %s, started %s, finished %s\n", t.CreatedAt, orDash(deref(t.StartedAt)), orDash(deref(t.FinishedAt)))
	if t.Result == nil {
		return
	}
	if t.Result.Errors > 5 {
		for _, m := range t.Result.ErrorMessages[min(5, len(t.Result.ErrorMessages)):] {
			fmt.Fprintf(c.stdout, "error: %s\n", m)
		}
	}
	const shownChanges = 10
	for i, ch := range t.Result.Changes {
		if i == shownChanges {
			fmt.Fprintf(c.stdout, "... %d more changes recorded (GET /api/tasks/%s/ lists up to 100)\n",
				len(t.Result.Changes)-shownChanges, t.Handle)
			break
		}
		line := fmt.Sprintf("change: %s %s %s", ch.Action, ch.Classname, ch.Keyname)
		if ch.NewKey != "" {
			line += " -> " + ch.NewKey
		}
		fields := make([]string, 0, len(ch.Fields))
		for f := range ch.Fields {
			fields = append(fields, f)
		}
		sort.Strings(fields)
		for _, f := range fields {
			line += fmt.Sprintf(" %s: %v -> %v", f, orDash(ch.Fields[f].Old), orDash(ch.Fields[f].New))
		}
		fmt.Fprintln(c.stdout, line)
	}
}

func deref(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func setupTaskCancel(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, false)
	return func(ctx context.Context, args []string) error {
		db, runner, err := c.taskRunner(ctx, false)
		if err != nil {
			return err
		}
		defer db.Close()
		before, err := runner.Get(ctx, args[0])
		if err != nil {
			return fmt.Errorf("%s", store.ErrorMessage(err))
		}
		if before.Finished() {
			return fmt.Errorf("task %s already finished: %s", before.Handle, before.Status)
		}
		t, err := runner.Cancel(ctx, args[0])
		if err != nil {
			return err
		}
		if t.Status == tasks.StatusCancelled {
			fmt.Fprintf(c.stdout, "task %s cancelled\n", t.Handle)
		} else {
			fmt.Fprintf(c.stdout, "task %s: cancel requested; it stops after its current batch (\"dataservice task wait %s\")\n",
				t.Handle, t.Handle)
		}
		return nil
	}
}

func setupTaskWait(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, false)
	timeout := fs.Duration("timeout", 0, "give up (exit 1, the task goes on) after this long, e.g. 10m; 0 waits until it finishes")
	return func(ctx context.Context, args []string) error {
		if *timeout < 0 {
			return &usageError{c.find("task wait"), "--timeout: negative"}
		}
		pw := newProgressWriter(c.stdout)
		c.stderr = pw.logs(c.stderr)
		db, runner, err := c.taskRunner(ctx, true)
		if err != nil {
			return err
		}
		defer db.Close()
		if _, err := runner.Get(ctx, args[0]); err != nil {
			return fmt.Errorf("%s", store.ErrorMessage(err))
		}
		var expired <-chan time.Time
		if *timeout > 0 {
			tm := time.NewTimer(*timeout)
			defer tm.Stop()
			expired = tm.C
		}
		type watched struct {
			t   *tasks.Task
			err error
		}
		res := make(chan watched, 1)
		go func() {
			t, err := c.watch(ctx, runner, args[0], nil, pw, false)
			res <- watched{t, err}
		}()
		select {
		case w := <-res:
			if w.err != nil {
				return w.err
			}
			return c.taskOutcome(w.t)
		case <-expired:
			pw.end()
			return fmt.Errorf("task %s still not finished after %s (a running \"dataservice serve\" processes queued tasks)",
				args[0], *timeout)
		}
	}
}
