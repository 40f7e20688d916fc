package console

import (
	"net/http"
	"strings"

	"dataservice/store/model"
	"dataservice/tasks"
)

// tool is a console tool served under /data/private/<Name>/. A tool's name takes
// precedence over a schema or page of the same name: the built-in dashboard entries
// promise these URLs. Every tool also needs p_data_access, as every data page does.
type tool struct {
	Name  string
	Title string
	Icon  string
	// Allowed reports whether auth may open the tool; nil allows every caller with
	// p_data_access. A caller without it gets 403, and no sidebar link.
	Allowed func(auth *model.Auth) bool
	// Needs names the permission Allowed asks for, for the 403 page.
	Needs string
	// Documents marks a tool whose forms carry load documents: its requests may be as
	// large as the API's (Options.MaxBody) instead of 1 MiB.
	Documents bool
	// NoRunner is the message of the 503 the tool answers, on every path, when the
	// console has no task runner; "" for a tool that needs none.
	NoRunner string
	// Routes are the tool's pages, below /data/private/<Name>/; a path no route has
	// is 404, a method no route of the path answers is 405 (pick).
	Routes []route[pageFunc]
}

// tools are the console's tools, in sidebar order. A tool adds itself to the list in
// init (a package variable would form an initialization cycle through the pages).
var tools []tool

func init() {
	tools = []tool{
		{Name: "revision", Title: "Revisions", Icon: "fa-history", Routes: []route[pageFunc]{
			{Path: "", Methods: get, Serve: (*Console).revisions},
			{Path: ":id", Methods: getPost, Serve: (*Console).revisionDiff},
		}},
		{Name: "ipam", Title: "IPAM", Icon: "fa-sitemap", Routes: []route[pageFunc]{
			{Path: "", Methods: get, Serve: ipamPage((*Console).ipamSubnets)},
			{Path: "vlan", Methods: get, Serve: ipamPage((*Console).ipamVLANs)},
			{Path: "find", Methods: get, Serve: ipamPage((*Console).ipamFind)},
			{Path: "*cidr", Methods: get, Serve: ipamPage((*Console).ipamSubnet)},
		}},
		{Name: "pipeline", Title: "Pipelines", Icon: "fa-cogs",
			NoRunner: "Pipelines cannot run here: the task runner is not available.", Routes: []route[pageFunc]{
				{Path: "", Methods: get, Serve: (*Console).pipelineList},
				{Path: ":name", Methods: getPost, Serve: (*Console).pipelinePage},
			}},
		{Name: "task", Title: "Tasks", Icon: "fa-tasks", Allowed: func(a *model.Auth) bool { return a.Has(tasks.PermRun) }, Needs: tasks.PermRun,
			NoRunner: "Tasks cannot be shown here: the task runner is not available.", Routes: []route[pageFunc]{
				{Path: "", Methods: get, Serve: (*Console).taskList},
				{Path: ":handle", Methods: get, Serve: (*Console).taskPage},
				{Path: ":handle/progress", Methods: get, Serve: (*Console).taskProgress},
				{Path: ":handle/cancel", Methods: post, Serve: (*Console).taskCancel},
			}},
		{Name: "schedule", Title: "Schedules", Icon: "fa-clock-o", Allowed: mayReadSchedules, Needs: "p_data_read", Routes: []route[pageFunc]{
			{Path: "", Methods: get, Serve: (*Console).scheduleList},
		}},
		{Name: eventToolName, Title: "Events", Icon: "fa-bolt", Allowed: func(a *model.Auth) bool { return a.Has("p_event_admin") }, Needs: "p_event_admin",
			Routes: []route[pageFunc]{
				{Path: "", Methods: get, Serve: (*Console).eventList},
				{Path: ":id/redeliver", Methods: post, Serve: (*Console).eventRedeliver},
			}},
		{Name: "import", Title: "Import", Icon: "fa-upload", Documents: true,
			Allowed: func(a *model.Auth) bool { return a.Has("p_data_import") }, Needs: "p_data_import", Routes: []route[pageFunc]{
				{Path: "", Methods: getPost, Serve: (*Console).importTool},
			}},
		{Name: "code_editor", Title: "Code editor", Icon: "fa-code", Documents: true,
			Allowed: func(a *model.Auth) bool { return a.Has("p_code_editor") }, Needs: "p_code_editor", Routes: []route[pageFunc]{
				{Path: "", Methods: getPost, Serve: (*Console).codeEditor},
			}},
		{Name: "configuration", Title: "Configuration", Icon: "fa-cog", Allowed: confViewer, Needs: "p_conf_view or p_conf_admin", Routes: []route[pageFunc]{
			{Path: "", Methods: getPost, Serve: (*Console).configurationTool},
		}},
		{Name: schemaToolName, Title: "Schemas", Icon: "fa-database", Routes: schemaToolRoutes()},
	}
}

// bodyLimit is the largest request body r may send, and whether r goes to a tool that
// takes documents: such a tool's limit is the API's, else it is 1 MiB.
func (c *Console) bodyLimit(r *http.Request) (int64, bool) {
	if t := toolOfURL(r.URL.Path); t != nil && t.Documents {
		return c.maxBody, true
	}
	return 1 << 20, false
}

// toolOfURL is the tool a console URL ("/data/private/<tool>/...") opens, or nil.
func toolOfURL(u string) *tool {
	rest, ok := strings.CutPrefix(u, "/data/private/")
	if !ok {
		return nil
	}
	name, _, _ := strings.Cut(rest, "/")
	return toolNamed(name)
}

// toolNamed is the tool served under /data/private/<name>/, or nil.
func toolNamed(name string) *tool {
	for i := range tools {
		if tools[i].Name == name {
			return &tools[i]
		}
	}
	return nil
}

// serve answers /data/private/<Name>/<rest>/ once the user may open the tool: 503
// without the task runner the tool needs, else the route of rest (pick).
func (t *tool) serve(c *Console, w http.ResponseWriter, r *http.Request, q *req, rest string) {
	if t.NoRunner != "" && c.runner == nil {
		c.errorPage(w, r, q, http.StatusServiceUnavailable, t.NoRunner)
		return
	}
	if serve, ok := pick(c, w, r, q, t.Routes, rest); ok {
		serve(c, w, r, q)
	}
}

func (t *tool) allowed(auth *model.Auth) bool {
	return auth.Has("p_data_access") && (t.Allowed == nil || t.Allowed(auth))
}

// need names the permission auth lacks to open the tool.
func (t *tool) need(auth *model.Auth) string {
	if !auth.Has("p_data_access") || t.Needs == "" {
		return "p_data_access"
	}
	return t.Needs
}

// toolLinks are the sidebar links of the tools auth may open that no `_home` entry
// already links to.
func toolLinks(auth *model.Auth, linked map[string]bool) []homeEntry {
	var out []homeEntry
	for i := range tools {
		t := &tools[i]
		u := "/data/private/" + t.Name + "/"
		if linked[u] || !t.allowed(auth) {
			continue
		}
		out = append(out, homeEntry{Keyname: t.Name, Displayname: t.Title, URL: u, Icon: t.Icon, Sidebar: "Tools"})
	}
	return out
}
