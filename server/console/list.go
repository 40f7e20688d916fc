package console

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"dataservice/store"
	"dataservice/store/model"
)

// schemaPage: GET /data/private/<schema>/ — by its query the type-ahead lookup
// (do=lookup), an export, else the list (the create form, do=new, is a route of its own).
func (c *Console) schemaPage(w http.ResponseWriter, r *http.Request, q *req, sch *model.Schema) {
	qs := r.URL.Query()
	switch {
	case qs.Get("do") == "lookup":
		c.lookup(w, r, q, sch)
	case qs.Get("export") != "":
		c.export(w, r, q, sch)
	default:
		c.list(w, r, q, sch)
	}
}

type dataview struct {
	Keyname, Displayname string
	Columns              []string
}

// dataviews lists the `_dataview`s whose target_class is sch, and the one to use: the
// one named in the query, else `<schema>_default` (without the leading underscore of a
// built-in class), else all fields.
func (c *Console) dataviews(ctx context.Context, sch *model.Schema, chosen string) ([]dataview, dataview) {
	all := dataview{Keyname: "_all", Displayname: "All fields", Columns: []string{"keyname", "displayname"}}
	for _, f := range sch.Fields {
		if f.IsEnabled && f.Dataformat != "secret" {
			all.Columns = append(all.Columns, f.Keyname)
		}
	}
	all.Columns = append(all.Columns, "is_enabled")
	var views []dataview
	// Every list reads them: the store keeps them in memory until one changes.
	list, err := c.db.ClassInstances(ctx, "_dataview")
	if err != nil {
		c.log.Error("read dataviews", "error", err)
	}
	for _, in := range list {
		if t, _ := in.Data["target_class"].(string); t != sch.Keyname || !in.IsEnabled {
			continue
		}
		content, _ := in.Data["content"].(string)
		var doc struct {
			Columns []string `yaml:"columns"`
		}
		if yaml.Unmarshal([]byte(content), &doc) != nil || len(doc.Columns) == 0 {
			continue
		}
		v := dataview{Keyname: in.Keyname, Displayname: in.Displayname}
		for _, col := range doc.Columns {
			// A dataview never shows what the schema does not have, nor secrets.
			if f := sch.Field(col); (f != nil && f.Dataformat != "secret") || col == "keyname" || col == "displayname" || col == "is_enabled" {
				v.Columns = append(v.Columns, col)
			}
		}
		views = append(views, v)
	}
	views = append(views, all)
	want := []string{chosen, sch.Keyname + "_default", strings.TrimPrefix(sch.Keyname, "_") + "_default", "_all"}
	for _, name := range want {
		for _, v := range views {
			if name != "" && v.Keyname == name {
				return views, v
			}
		}
	}
	return views, all
}

type header struct {
	Title, Link, Mark string
}

type cell struct {
	Text, Link string
}

type listData struct {
	Schema     *model.Schema
	Views      []dataview
	View       dataview
	Headers    []header
	TotalExact bool
	// Rows are the table's rows, rendered here rather than by the template: a page of
	// rows is hundreds of cells, and a template's calls per cell cost more than
	// the rest of the page (listRows).
	Rows                              template.HTML
	Search                            string
	Total, Page, Pages, Size          int
	PrevURL, NextURL, BaseURL         string
	CanCreate, CanExport              bool
	ExportCSV, ExportJSON, ExportYAML string
	// Holds is the reference filter (?field=&value=: the instances that refer to one
	// instance), HoldsLabel its field's title; ClearURL is the list without its search
	// and filter, FirstURL its first page, for the empty states.
	Holds              *store.FieldValue
	HoldsLabel         string
	ClearURL, FirstURL string
	// PastEnd: the page asked for is after the last one.
	PastEnd bool
}

// holdsQuery reads the reference filter ?field=&value= (nil without a field).
func holdsQuery(qs url.Values) *store.FieldValue {
	f := strings.TrimSpace(qs.Get("field"))
	if f == "" {
		return nil
	}
	return &store.FieldValue{Field: f, Value: qs.Get("value")}
}

// pageSize reads page and size from the query within DATA_DEFAULT_SIZE/DATA_MAX_SIZE.
func (c *Console) pageSize(ctx context.Context, qs url.Values) (page, size int) {
	maxSize := c.db.ConfigInt(ctx, store.ConfigDataMaxSize)
	size = min(c.db.ConfigInt(ctx, store.ConfigDataDefaultSize), maxSize)
	if n, err := strconv.Atoi(qs.Get("size")); err == nil && n >= 1 {
		size = min(n, maxSize)
	}
	page = 1
	if n, err := strconv.Atoi(qs.Get("page")); err == nil && n >= 1 && n <= 1_000_000 {
		page = n
	}
	return page, size
}

// list: GET /data/private/<schema>/ — a page of instances in the chosen dataview.
func (c *Console) list(w http.ResponseWriter, r *http.Request, q *req, sch *model.Schema) {
	ctx := r.Context()
	qs := r.URL.Query()
	views, view := c.dataviews(ctx, sch, qs.Get("view"))
	search := strings.TrimSpace(qs.Get("search"))
	if len(search) > 256 {
		search = search[:256]
	}
	page, size := c.pageSize(ctx, qs)
	sort := qs.Get("sort")
	holds := holdsQuery(qs)
	res, err := c.db.ListInstances(ctx, sch, store.ListQuery{Search: search, Holds: holds, Offset: (page - 1) * size, Limit: size, Sort: sort})
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	total := res.Count
	d := listData{Schema: sch, Views: views, View: view, Search: search, Total: total, TotalExact: res.CountExact,
		Page: page, Size: size, CanCreate: model.CanWrite(q.auth, sch, model.ActionCreate), CanExport: q.auth.Has("p_data_export"),
		Holds: holds}
	d.Pages = max(1, (total+size-1)/size)
	d.PastEnd = len(res.Instances) == 0 && page > 1
	if holds != nil {
		d.HoldsLabel = columnTitle(sch, holds.Field)
	}
	base := url.Values{}
	if qs.Get("view") != "" {
		base.Set("view", view.Keyname)
	}
	d.ClearURL = "?" + base.Encode()
	if search != "" {
		base.Set("search", search)
	}
	if holds != nil {
		base.Set("field", holds.Field)
		base.Set("value", holds.Value)
	}
	d.FirstURL = "?" + base.Encode()
	for _, col := range view.Columns {
		// Each header sorts by its column; a second click reverses.
		v := maps.Clone(base)
		next, mark := col, ""
		switch sort {
		case col:
			next, mark = "-"+col, "asc"
		case "-" + col:
			mark = "desc"
		}
		v.Set("sort", next)
		d.Headers = append(d.Headers, header{Title: columnTitle(sch, col), Link: "?" + v.Encode(), Mark: mark})
	}
	if sort != "" {
		base.Set("sort", sort)
	}
	d.Rows = c.listRows(ctx, q.auth, sch, view.Columns, res.Instances)
	at := func(p int) string {
		v := url.Values{}
		for k, l := range base {
			v[k] = l
		}
		v.Set("page", strconv.Itoa(p))
		if qs.Get("size") != "" {
			v.Set("size", strconv.Itoa(size))
		}
		return "?" + v.Encode()
	}
	if page > 1 {
		d.PrevURL = at(page - 1)
	}
	if page < d.Pages {
		d.NextURL = at(page + 1)
	}
	for _, f := range []string{"csv", "json", "yaml"} {
		v := url.Values{"export": {f}, "view": {view.Keyname}}
		if search != "" {
			v.Set("search", search)
		}
		if holds != nil {
			v.Set("field", holds.Field)
			v.Set("value", holds.Value)
		}
		if sort != "" {
			v.Set("sort", sort)
		}
		switch f {
		case "csv":
			d.ExportCSV = "?" + v.Encode()
		case "json":
			d.ExportJSON = "?" + v.Encode()
		default:
			d.ExportYAML = "?" + v.Encode()
		}
	}
	title := sch.Displayname
	if title == "" {
		title = sch.Keyname
	}
	c.render(w, r, q, http.StatusOK, "list", title, d)
}

func columnTitle(sch *model.Schema, col string) string {
	if f := sch.Field(col); f != nil && f.Displayname != "" {
		return f.Displayname
	}
	switch col {
	case "keyname":
		return "Keyname"
	case "displayname":
		return "Display name"
	case "is_enabled":
		return "Enabled"
	}
	return col
}

// text renders a stored value for display.
func text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []any:
		parts := make([]string, len(x))
		for i, it := range x {
			parts[i] = text(it)
		}
		return strings.Join(parts, ", ")
	case map[string]any:
		b, _ := json.Marshal(x)
		return string(b)
	}
	return fmt.Sprint(v)
}

// refTarget is the class a reference field points at, or "".
func refTarget(f *model.Field) string {
	switch f.Dataformat {
	case "schema":
		if w := strings.Fields(f.DataformatExt); len(w) > 0 {
			return w[0]
		}
	case "user":
		return "_user"
	case "group":
		return "_group"
	}
	return ""
}

func cellOf(sch *model.Schema, col string, v any) cell {
	c := cell{Text: text(v)}
	if f := sch.Field(col); f != nil {
		if t := refTarget(f); t != "" {
			if s, ok := v.(string); ok && s != "" {
				c.Link = link(t, s)
			}
		}
	}
	return c
}

// exportLimit bounds one export (the API's load and export tools handle more).
const exportLimit = 100_000

// export: GET /data/private/<schema>/?export=csv|json|yaml — the current view (its
// search, all pages) in CSV (the view's columns) or the load format (JSON or YAML).
func (c *Console) export(w http.ResponseWriter, r *http.Request, q *req, sch *model.Schema) {
	if !q.auth.Has("p_data_export") {
		c.forbidden(w, r, q, "p_data_export")
		return
	}
	ctx := r.Context()
	qs := r.URL.Query()
	format := qs.Get("export")
	if format != "csv" && format != "json" && format != "yaml" {
		c.errorPage(w, r, q, http.StatusBadRequest, "export must be csv, json or yaml")
		return
	}
	_, view := c.dataviews(ctx, sch, qs.Get("view"))
	search := strings.TrimSpace(qs.Get("search"))
	var docs []*model.Doc
	const batch = 2000
	lq := store.ListQuery{Search: search, Holds: holdsQuery(qs), Limit: batch, Sort: qs.Get("sort")}
	for len(docs) < exportLimit {
		res, err := c.db.ListInstances(ctx, sch, lq)
		if err != nil {
			c.fail(w, r, q, err)
			return
		}
		for _, in := range res.Instances {
			docs = append(docs, c.db.InstanceDocAs(ctx, q.auth, sch, in))
		}
		if len(res.Instances) < batch {
			break
		}
		// The id cursor when in id order, else the next offset.
		if res.Next > 0 {
			lq.After = res.Next
		} else {
			lq.Offset += batch
		}
	}
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.%s"`, sch.Keyname, format))
	switch format {
	case "csv":
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		cw := csv.NewWriter(w)
		// The delimiter the import tool and /api/rawfile/ default to, so the file loads
		// back with the defaults (the setting is checked to be one character when set).
		if d, _ := utf8.DecodeRuneInString(c.db.ConfigValue(ctx, store.ConfigCSVDelimiter)); d != utf8.RuneError {
			cw.Comma = d
		}
		cw.Write(view.Columns)
		for _, d := range docs {
			rec := make([]string, len(view.Columns))
			for i, col := range view.Columns {
				rec[i] = text(d.Vals[col])
			}
			cw.Write(rec)
		}
		cw.Flush()
	case "json":
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		b, err := json.MarshalIndent(docs, "", "  ")
		if err != nil {
			c.log.Error("export json", "error", err)
			return
		}
		w.Write(b)
	default:
		w.Header().Set("Content-Type", "application/yaml; charset=utf-8")
		enc := yaml.NewEncoder(w)
		enc.SetIndent(2)
		if err := enc.Encode(docs); err != nil {
			c.log.Error("export yaml", "error", err)
		}
		enc.Close()
	}
}

// lookup: GET /data/private/<schema>/?do=lookup&q= — up to 20 keynames and
// displaynames matching q, for the type-ahead of reference fields.
func (c *Console) lookup(w http.ResponseWriter, r *http.Request, q *req, sch *model.Schema) {
	term := strings.TrimSpace(r.URL.Query().Get("q"))
	if len(term) > 256 {
		term = term[:256]
	}
	list, _, err := c.db.SearchInstances(r.Context(), sch, term, 0, 20)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	type item struct {
		Keyname     string `json:"keyname"`
		Displayname string `json:"displayname"`
	}
	out := []item{}
	for _, in := range list {
		out = append(out, item{in.Keyname, in.Displayname})
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	json.NewEncoder(w).Encode(out)
}
