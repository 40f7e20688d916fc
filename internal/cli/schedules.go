package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
	// The IANA zone database inside the binary (about 450 kB): schedules name zones,
	// and appliances and minimal containers often have no /usr/share/zoneinfo. The
	// system's database is still used first when it exists.
	_ "time/tzdata"

	"github.com/spf13/pflag"

	"dataservice/store"
	"dataservice/store/model"
	"dataservice/tasks"
)

func setupScheduleList(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, false)
	return reading(c, func(ctx context.Context, db *store.DB) error {
		list, err := tasks.ListSchedules(ctx, db, db.Now())
		if err != nil {
			return err
		}
		if len(list) == 0 {
			fmt.Fprintln(c.stderr, "no schedules")
			return nil
		}
		w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NAME\tENABLED\tCRON\tTIMEZONE\tMISSED\tPIPELINE\tSCHEMAS\tDRYRUN\tNEXT RUNS\tLAST\tLAST TASK")
		for _, sc := range list {
			fmt.Fprintf(w, "%s\t%v\t%s\t%s\t%s\t%s\t%s\t%v\t%s\t%s\t%s\n", sc.Keyname, sc.Enabled, sc.Cron, sc.Timezone,
				sc.Missed, sc.Pipeline, strings.Join(sc.Schemas, ","), sc.DryRun, nextRuns(sc), dash(sc.LastResult),
				dash(sc.LastTask))
		}
		return w.Flush()
	})
}

// nextRuns shows a schedule's next run times in its own zone (with the offset), or
// why there are none.
func nextRuns(sc *tasks.ScheduleStatus) string {
	switch {
	case sc.Problem != "":
		return "cannot run: " + sc.Problem
	case !sc.Enabled:
		return "- (disabled)"
	case len(sc.Next) == 0:
		return "-"
	}
	loc, err := model.LoadZone(sc.Timezone)
	if err != nil {
		loc = time.UTC
	}
	out := make([]string, len(sc.Next))
	for i, t := range sc.Next {
		out[i] = t.In(loc).Format(time.RFC3339)
	}
	return strings.Join(out, " ")
}

// dash is s, or "-" when it is empty (a table cell is never blank).
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
