package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"dataservice/rules"
	"dataservice/store"
	"dataservice/tasks"
)

// pipelineTransform compiles a stored pipeline for use at load time: its rules run on
// each entry before the entry is loaded.
func pipelineTransform(ctx context.Context, db *store.DB, name string) (rules.Transform, error) {
	pl, err := db.PipelineByName(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("pipeline %q not found", name)
	}
	tf, err := rules.LoadTransform(pl.Content, db.Now)
	if err != nil {
		return nil, fmt.Errorf("pipeline %s: %v", name, err)
	}
	return tf, nil
}

// pipeline runs "pipeline list" and "pipeline run NAME --schema a,b [--dryrun] [--wait]".
func (c *cli) pipeline(ctx context.Context, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return fmt.Errorf("usage: dataservice pipeline list | pipeline run NAME --schema a,b [--dryrun] [--wait]")
	}
	sub, args := args[0], args[1:]
	var f settingFlags
	fs := c.flags("pipeline "+sub, &f)
	var schemas *string
	var dryrun, wait *bool
	switch sub {
	case "list":
	case "run":
		schemas = fs.String("schema", "", "comma-separated schema names")
		dryrun = fs.Bool("dryrun", false, "compute and report, write nothing")
		wait = fs.Bool("wait", false, "run the task here, show progress and the result")
	default:
		return fmt.Errorf("unknown pipeline command %q (list, run)", sub)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if sub == "list" {
		if fs.NArg() != 0 {
			return fmt.Errorf("usage: dataservice pipeline list")
		}
	} else if fs.NArg() != 1 {
		return fmt.Errorf("usage: dataservice pipeline run NAME --schema a,b [--dryrun] [--wait]")
	}
	db, s, log, err := c.open(ctx, &f, false)
	if err != nil {
		return err
	}
	defer db.Close()
	if sub == "list" {
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
	}
	names := splitList(*schemas)
	if len(names) == 0 {
		return fmt.Errorf("--schema is required")
	}
	runner := tasks.New(db, tasks.Options{Logger: log, Workers: s.Workers, Lease: s.TaskLease})
	handle, err := runner.Submit(ctx, tasks.Params{Pipeline: fs.Arg(0), Schemas: names, DryRun: *dryrun,
		Auth: store.SystemAuth(), OwnerType: "cli", OwnerID: "system"})
	if err != nil {
		return fmt.Errorf("%s", store.ErrorMessage(err))
	}
	fmt.Fprintf(c.stdout, "task %s submitted\n", handle)
	if !*wait {
		fmt.Fprintln(c.stdout, "a running server's workers process it; use --wait to run it here")
		return nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runner.RunOne(ctx, handle)
	}()
	t, err := c.watch(ctx, runner, handle, done)
	if err != nil {
		return err
	}
	printResult(c, t)
	if t.Status != tasks.StatusSucceeded {
		return exitError(1)
	}
	return nil
}

// watch polls the task until it is finished, drawing progress.
func (c *cli) watch(ctx context.Context, runner *tasks.Runner, handle string, done <-chan struct{}) (*tasks.Task, error) {
	tty := false
	if f, ok := c.stdout.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	last := ""
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		t, err := runner.Get(context.WithoutCancel(ctx), handle)
		if err != nil {
			return nil, err
		}
		line := fmt.Sprintf("%s %5.1f%% %d/%d", t.Status, t.Progress.Percent, t.Progress.Done, t.Progress.Total)
		if tty {
			width := 30
			filled := int(t.Progress.Percent / 100 * float64(width))
			fmt.Fprintf(c.stdout, "\r[%s%s] %s", strings.Repeat("#", filled), strings.Repeat("-", width-filled), line)
		} else if line != last {
			fmt.Fprintln(c.stdout, line)
		}
		last = line
		if t.Finished() {
			if tty {
				fmt.Fprintln(c.stdout)
			}
			return t, nil
		}
		select {
		case <-done:
			if ctx.Err() != nil {
				return nil, fmt.Errorf("interrupted: task %s resumes at the next start", handle)
			}
		case <-tick.C:
		}
	}
}

func printResult(c *cli, t *tasks.Task) {
	fmt.Fprintf(c.stdout, "task %s %s\n", t.Handle, t.Status)
	if t.Error != nil {
		fmt.Fprintf(c.stdout, "error: %s\n", *t.Error)
	}
	if r := t.Result; r != nil {
		prefix := ""
		if t.DryRun {
			prefix = "dry run: "
		}
		fmt.Fprintf(c.stdout, "%sscanned %d, updated %d, deleted %d, disabled %d, enabled %d, unchanged %d, discarded %d, errors %d\n",
			prefix, r.Scanned, r.Updated, r.Deleted, r.Disabled, r.Enabled, r.Unchanged, r.Discarded, r.Errors)
		for _, m := range r.ErrorMessages {
			fmt.Fprintf(c.stdout, "error: %s\n", m)
		}
	}
}
