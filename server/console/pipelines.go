package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"gopkg.in/yaml.v3"

	"dataservice/server/httperror"
	"dataservice/store"
	"dataservice/store/model"
	"dataservice/tasks"
)

// The pipeline tool: /data/private/pipeline/ lists the pipelines, /data/private/pipeline/<name>/
// shows one (its rules, the content editor, the run form). Reading the list needs
// p_data_access, as GET /api/pipelines/ does; the description and rules are instance
// data of `_pipeline`, shown to those who may read it; editing needs what a write to
// `_pipeline` needs (p_pipeline_admin); running goes through tasks.Runner.Start, the
// run path of POST /api/pipelines/<name>/.

type pipelineRow struct {
	Keyname, Displayname, Description, RunPermission string
	Enabled, CanRun                                  bool
}

type pipelineListData struct {
	Rows     []pipelineRow
	CanRead  bool
	TasksURL string
}

type ruleRow struct {
	Position int
	Name     string
	Args     string
}

type schemaOption struct {
	Keyname, Displayname string
	DryRunOnly, Selected bool
}

type pipelineData struct {
	Pipeline   *store.Pipeline
	Instance   *store.Instance
	Self       string
	CanRead    bool
	CanEdit    bool
	Content    string
	ContentErr string
	// ContentRows is the editor's height.
	ContentRows int
	Rules       []ruleRow
	RulesErr    string
	// The run form: shown when the user may run the pipeline (RunRefusal says why not).
	CanRun     bool
	RunRefusal string
	Schemas    []schemaOption
	DryRun     bool
	RunErr     string
	// DryRunOnly: every schema offered allows the user only a dry run, so the form
	// starts with the dry run ticked.
	DryRunOnly bool
}

// pipelineSchema is the `_pipeline` class, whose permissions decide what the pages show.
func (c *Console) pipelineSchema(ctx context.Context) (*model.Schema, error) {
	return c.db.Schema(ctx, "_pipeline")
}

// mayRun reports (nil) whether auth may run pl, as the run path decides it.
func mayRun(auth *model.Auth, pl *store.Pipeline) error {
	if !auth.Has(tasks.PermRun) {
		return model.Errorf(model.EForbidden, "running pipelines needs %s", tasks.PermRun)
	}
	return tasks.MayRun(auth, pl)
}

// pipelineList: GET /data/private/pipeline/.
func (c *Console) pipelineList(w http.ResponseWriter, r *http.Request, q *req) {
	ctx := r.Context()
	sch, err := c.pipelineSchema(ctx)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	d := pipelineListData{CanRead: model.CanRead(q.auth, sch)}
	if q.auth.Has(tasks.PermRun) {
		d.TasksURL = "/data/private/task/"
	}
	err = c.db.EachInstance(ctx, "_pipeline", func(in *store.Instance) error {
		pl := store.PipelineOf(in)
		row := pipelineRow{Keyname: in.Keyname, Enabled: in.IsEnabled, CanRun: mayRun(q.auth, pl) == nil}
		if pl.RunPermission != nil {
			row.RunPermission = *pl.RunPermission
		}
		if d.CanRead { // instance data of _pipeline, as the API's list leaves them out
			row.Displayname = in.Displayname
			row.Description, _ = in.Data["description"].(string)
		}
		d.Rows = append(d.Rows, row)
		return nil
	})
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	c.render(w, r, q, http.StatusOK, "pipelines", "Pipelines", d)
}

// pipelinePage: /data/private/pipeline/<name>/ — GET shows it; POST ?do=edit saves the
// content, POST ?do=run runs it.
func (c *Console) pipelinePage(w http.ResponseWriter, r *http.Request, q *req) {
	ctx := r.Context()
	name := q.ps.ByName("name")
	sch, err := c.pipelineSchema(ctx)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	pl, err := c.runner.FindPipeline(ctx, name)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	in, err := c.db.InstanceByID(ctx, "_pipeline", pl.ID)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	d := &pipelineData{Pipeline: pl, Instance: in, Self: "/data/private/pipeline/" + url.PathEscape(pl.Keyname) + "/",
		CanRead: model.CanRead(q.auth, sch), CanEdit: model.CanWrite(q.auth, sch, model.ActionUpdate),
		Content: pl.Content}
	if err := mayRun(q.auth, pl); err != nil {
		d.RunRefusal = store.ErrorMessage(err)
	} else {
		d.CanRun = true
	}
	status := http.StatusOK
	switch do := r.URL.Query().Get("do"); {
	case r.Method == http.MethodGet:
	case do == "edit":
		if !d.CanEdit {
			c.forbidden(w, r, q, model.WritePermission(sch, model.ActionUpdate))
			return
		}
		if status = c.savePipeline(ctx, w, r, q, sch, in, d); status == 0 {
			return
		}
	case do == "run":
		if !d.CanRun {
			c.errorPage(w, r, q, http.StatusForbidden, "You may not run this pipeline: "+d.RunRefusal+".")
			return
		}
		if status = c.runPipeline(ctx, w, r, q, pl, d); status == 0 {
			return
		}
	default:
		c.errorPage(w, r, q, http.StatusNotFound, "not found")
		return
	}
	if d.CanRead {
		d.Rules, d.RulesErr = ruleRows(pl.Content)
	}
	d.ContentRows = min(max(strings.Count(d.Content, "\n")+3, 6), 30)
	if d.CanRun {
		if d.Schemas, err = c.runnableSchemas(ctx, q.auth, r.PostForm["schema"]); err != nil {
			c.fail(w, r, q, err)
			return
		}
		d.DryRunOnly = len(d.Schemas) > 0
		for _, s := range d.Schemas {
			d.DryRunOnly = d.DryRunOnly && s.DryRunOnly
		}
		if r.Method == http.MethodGet && d.DryRunOnly {
			d.DryRun = true
		}
	}
	c.render(w, r, q, status, "pipeline", pl.Keyname, d)
}

// savePipeline: POST ?do=edit — the content through the store's apply path (the same
// validation as a load: the failing rule's position is named). It answers (0) with a
// redirect, or returns the status to re-render with the error and the text kept.
func (c *Console) savePipeline(ctx context.Context, w http.ResponseWriter, r *http.Request, q *req, sch *model.Schema, in *store.Instance, d *pipelineData) int {
	d.Content = strings.ReplaceAll(r.PostFormValue("content"), "\r\n", "\n")
	content := d.Content
	if strings.TrimSpace(content) == "" {
		content = "[]" // no rules (an empty value would remove the field)
	}
	next := wanted(sch, in, in.Keyname, in.Displayname, in.IsEnabled, map[string]any{"content": content})
	if _, err := c.apply(ctx, q.auth, sch, in, next, model.ActionUpdate); err != nil {
		if store.Aborts(err) {
			c.fail(w, r, q, err)
			return 0
		}
		d.ContentErr = store.ErrorText(err)
		return httperror.Status(err)
	}
	http.Redirect(w, r, d.Self+"?done=updated", http.StatusSeeOther)
	return 0
}

// runPipeline: POST ?do=run — tasks.Runner.Start with the chosen schemas and dry-run
// flag, the console as owner type; on success the task page.
func (c *Console) runPipeline(ctx context.Context, w http.ResponseWriter, r *http.Request, q *req, pl *store.Pipeline, d *pipelineData) int {
	d.DryRun = checked(r, "dryrun")
	_, handle, err := c.runner.Start(ctx, tasks.RunRequest{Pipeline: pl.Keyname, Schemas: r.PostForm["schema"],
		DryRun: d.DryRun, Auth: q.auth, OwnerType: tasks.OwnerConsole})
	if err != nil {
		if store.Aborts(err) {
			c.fail(w, r, q, err)
			return 0
		}
		d.RunErr = store.ErrorText(err)
		return httperror.Status(err)
	}
	http.Redirect(w, r, taskURL(handle), http.StatusSeeOther)
	return 0
}

// runnableSchemas are the schemas a run by auth may name (at least as a dry run), with
// those in chosen selected.
func (c *Console) runnableSchemas(ctx context.Context, auth *model.Auth, chosen []string) ([]schemaOption, error) {
	names, err := c.db.SchemaNames(ctx)
	if err != nil {
		return nil, err
	}
	sel := map[string]bool{}
	for _, n := range chosen {
		sel[n] = true
	}
	var out []schemaOption
	for _, n := range names {
		s, err := c.db.Schema(ctx, n)
		if err != nil {
			return nil, err
		}
		if tasks.Runnable(auth, s, true) != nil {
			continue
		}
		out = append(out, schemaOption{Keyname: s.Keyname, Displayname: s.Displayname, Selected: sel[s.Keyname],
			DryRunOnly: tasks.Runnable(auth, s, false) != nil})
	}
	return out, nil
}

// ruleRows lists a content's rules, numbered from 1 as validation messages count them,
// each as its name and its arguments in YAML flow style.
func ruleRows(content string) ([]ruleRow, string) {
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(content), &root); err != nil {
		return nil, "The content is not valid YAML."
	}
	if len(root.Content) == 0 {
		return nil, ""
	}
	seq := root.Content[0]
	if seq.Kind != yaml.SequenceNode {
		return nil, "The content is not a list of rules."
	}
	out := make([]ruleRow, 0, len(seq.Content))
	for i, item := range seq.Content {
		row := ruleRow{Position: i + 1}
		if item.Kind == yaml.MappingNode && len(item.Content) == 2 {
			row.Name = item.Content[0].Value
			row.Args = flow(item.Content[1])
		} else {
			row.Args = flow(item)
		}
		out = append(out, row)
	}
	return out, ""
}

// flow is n in YAML flow style on one line.
func flow(n *yaml.Node) string {
	c := *n
	c.Style |= yaml.FlowStyle
	b, err := yaml.Marshal(&c)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
