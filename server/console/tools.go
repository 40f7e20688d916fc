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
	// Documents marks a tool whose forms carry load documents: its requests may be as
	// large as the API's (Options.MaxBody) instead of 1 MiB.
	Documents bool
	// OnePage marks a tool with no pages below its own: any longer path is 404.
	OnePage bool
	// Serve answers the tool's pages; rest is the path after the tool's name, without
	// its leading and trailing slashes ("" for the tool's own page).
	Serve func(c *Console, w http.ResponseWriter, r *http.Request, q *req, rest string)
}

// tools are the console's tools, in sidebar order. A tool adds itself to the list in
// init (a package variable would form an initialization cycle through the pages).
var tools []tool

func init() {
	tools = []tool{
		{Name: "revision", Title: "Revisions", Icon: "fa-history", Serve: (*Console).revisionTool},
		{Name: "ipam", Title: "IPAM", Icon: "fa-sitemap", Serve: (*Console).ipamTool},
		{Name: "pipeline", Title: "Pipelines", Icon: "fa-cogs", Serve: (*Console).pipelineTool},
		{Name: "task", Title: "Tasks", Icon: "fa-tasks", Serve: (*Console).taskTool,
			Allowed: func(a *model.Auth) bool { return a.Has(tasks.PermRun) }},
		{Name: "import", Title: "Import", Icon: "fa-upload", Documents: true, OnePage: true, Serve: (*Console).importTool,
			Allowed: func(a *model.Auth) bool { return a.Has("p_data_import") }},
		{Name: "code_editor", Title: "Code editor", Icon: "fa-code", Documents: true, OnePage: true, Serve: (*Console).codeEditor,
			Allowed: func(a *model.Auth) bool { return a.Has("p_code_editor") }},
		{Name: "configuration", Title: "Configuration", Icon: "fa-cog", Allowed: confViewer, OnePage: true,
			Serve: (*Console).configurationTool},
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

func (t *tool) allowed(auth *model.Auth) bool {
	return auth.Has("p_data_access") && (t.Allowed == nil || t.Allowed(auth))
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
