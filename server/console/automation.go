package console

import (
	"context"
	"net/url"
	"time"

	"dataservice/internal/clip"
	"dataservice/store/model"
	"dataservice/tasks"
)

// automationClass is a built-in class that makes the service act on its own (event
// rules, schedules): the sidebar and the dashboard link to its data pages for those
// who may read it, whether or not a `_home` entry does.
type automationClass struct {
	Class, Title, Description, Icon string
}

var automationClasses = []automationClass{
	{Class: "_eventrule", Title: "Event rules", Description: "Webhooks and pipelines run when data changes", Icon: "fa-bolt"},
	{Class: "_schedule", Title: "Schedules", Description: "Pipelines run on a timer", Icon: "fa-clock-o"},
}

// automationLinks are the entries of the automation classes auth may read that no
// `_home` entry already links to (sidebar section "Tools", dashboard section
// "Automation"); in the sidebar, a tool of the class's title replaces its link (the
// dashboard shows no tools, so it keeps the class's tile and count).
func (c *Console) automationLinks(ctx context.Context, auth *model.Auth, linked map[string]bool, inSidebar bool) []homeEntry {
	if !auth.Has("p_data_access") {
		return nil
	}
	var out []homeEntry
	for _, a := range automationClasses {
		u := "/data/private/" + url.PathEscape(a.Class) + "/"
		if linked[u] || inSidebar && toolTitled(a.Title) {
			continue
		}
		sch, err := c.db.Schema(ctx, a.Class)
		if err != nil || !model.CanRead(auth, sch) {
			continue
		}
		out = append(out, homeEntry{Keyname: a.Class, Displayname: a.Title, Description: a.Description, URL: u, Icon: a.Icon,
			Sidebar: "Tools", Dashboard: "Automation"})
	}
	return out
}

// toolTitled reports whether a tool of that title exists (a tool of its own for a
// class replaces the class's link).
func toolTitled(title string) bool {
	for i := range tools {
		if tools[i].Title == title {
			return true
		}
	}
	return false
}

// failedTask is a failed task on the dashboard.
type failedTask struct {
	URL, Short, Pipeline, FinishedAt, Error string
}

// failures are what the dashboard shows of what went wrong: the newest recent failed
// tasks the user may see, and the dead events for those who may open the events tool.
type failures struct {
	Tasks []failedTask
	// Dead and Pending count the events; EventsURL is the events tool, "" for a user
	// who may not open it.
	Dead, Pending int
	EventsURL     string
}

const (
	// dashboardFailedTasks is how many failed tasks the dashboard lists at most.
	dashboardFailedTasks = 5
	// recentFailure is how long a failed task stays on the dashboard after it ended.
	recentFailure = 7 * 24 * time.Hour
)

// failuresFor reads the dashboard's failures for auth: nil when there are none (the
// dashboard then shows no failures section).
func (c *Console) failuresFor(ctx context.Context, auth *model.Auth) *failures {
	f := &failures{}
	if t := toolNamed("task"); t != nil && t.allowed(auth) && c.runner != nil {
		list, err := c.runner.ListFor(ctx, auth, tasks.StatusFailed, dashboardFailedTasks)
		if err != nil {
			c.log.Error("read failed tasks", "error", err)
		}
		since := c.db.Now().Add(-recentFailure)
		for _, t := range list {
			row := failedTask{URL: taskURL(t.Handle), Short: shortHandle(t.Handle), Pipeline: t.Pipeline}
			if t.FinishedAt != nil {
				row.FinishedAt = *t.FinishedAt
				if at, err := time.Parse(time.RFC3339, *t.FinishedAt); err == nil && at.Before(since) {
					continue
				}
			}
			if t.Error != nil {
				row.Error = clip.Text(*t.Error)
			}
			f.Tasks = append(f.Tasks, row)
		}
	}
	c.eventFailures(ctx, auth, f)
	if len(f.Tasks) == 0 && f.Dead == 0 {
		return nil
	}
	return f
}
