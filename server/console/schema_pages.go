package console

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"dataservice/internal/clip"
	"dataservice/store"
	"dataservice/store/model"
)

// The schema tool, /data/private/_schema/: the schemas' definitions, read with
// p_data_access (and each schema's read permission, as its instances are), changed with
// the permission a `_schema` load needs. Every change is a `_schema` load entry run
// through the store's load (schema_forms.go), so a console change and a loaded file
// cannot differ in what they check or record.

// schemaToolName is the tool's path segment: the classname of schema definitions.
const schemaToolName = "_schema"

// schemaRoot is the URL of the tool's list page.
const schemaRoot = "/data/private/" + schemaToolName + "/"

// schemaURL is the URL of a schema's definition page.
func schemaURL(name string) string { return schemaRoot + name + "/" }

// canChangeSchemas reports whether auth may change schema definitions: the permission
// a `_schema` load entry needs.
func canChangeSchemas(auth *model.Auth) bool {
	return auth.Has(model.ClassPermission(schemaToolName))
}

// schemaRoutes are the tool's pages; a route with ?do= comes before the page it is a
// form of, as pick takes the first route that matches.
func schemaToolRoutes() []route[pageFunc] {
	return []route[pageFunc]{
		{Path: "", Do: "new", Methods: getPost, Serve: (*Console).schemaNew},
		{Path: "", Methods: get, Serve: (*Console).schemaList},
		{Path: ":name", Do: "field", Methods: getPost, Serve: (*Console).schemaField},
		{Path: ":name", Do: "delete_field", Methods: getPost, Serve: (*Console).schemaDeleteField},
		{Path: ":name", Methods: get, Serve: (*Console).schemaDetail},
	}
}

type schemaListRow struct {
	Keyname, Displayname, Description, Count string
	Fields                                   int
	Enabled, Builtin                         bool
}

type schemaListData struct {
	Schemas   []schemaListRow
	CanChange bool
}

// schemaList: GET /data/private/_schema/ — every schema the user may read, with its
// number of fields and of instances.
func (c *Console) schemaList(w http.ResponseWriter, r *http.Request, q *req) {
	ctx := r.Context()
	names, err := c.db.SchemaNames(ctx)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	d := schemaListData{CanChange: canChangeSchemas(q.auth)}
	for _, n := range names {
		sch, err := c.db.Schema(ctx, n)
		if err != nil {
			c.fail(w, r, q, err)
			return
		}
		if !model.CanRead(q.auth, sch) {
			continue
		}
		count, err := c.db.CountInstances(ctx, n)
		if err != nil {
			c.fail(w, r, q, err)
			return
		}
		d.Schemas = append(d.Schemas, schemaListRow{Keyname: sch.Keyname, Displayname: sch.Displayname,
			Description: sch.Description, Count: thousands(count), Fields: len(sch.Fields), Enabled: sch.IsEnabled, Builtin: sch.IsBuiltin})
	}
	// User-defined schemas first, the built-in classes after them.
	sort.SliceStable(d.Schemas, func(i, j int) bool {
		if d.Schemas[i].Builtin != d.Schemas[j].Builtin {
			return !d.Schemas[i].Builtin
		}
		return d.Schemas[i].Keyname < d.Schemas[j].Keyname
	})
	c.render(w, r, q, http.StatusOK, "schema_list", "Schemas", d)
}

// schemaRef is one reference between schemas: a field of From pointing at To.
type schemaRef struct {
	From, Field, Dataformat, To, Via string
	// Link is To's definition page when the user may read it.
	Link string
}

type schemaFieldRow struct {
	*model.Field
	Default, Options string
	// Values is how many instances hold a value for the field.
	Values string
}

type schemaDetailData struct {
	Schema    *model.Schema
	Count     string
	Fields    []schemaFieldRow
	Options   string
	Dataviews []dataview
	Out, In   []schemaRef
	CanChange bool
	// Builtin schemas are changed only by the built-in files, never by a form.
	Builtin bool
}

// readableSchema reads the schema named by the route and checks the user may read it;
// it answers itself (404, 403) when not.
func (c *Console) readableSchema(w http.ResponseWriter, r *http.Request, q *req) (*model.Schema, bool) {
	name := q.ps.ByName("name")
	sch, err := c.db.Schema(r.Context(), name)
	if store.IsNotFound(err) {
		c.errorPage(w, r, q, http.StatusNotFound, fmt.Sprintf("There is no schema %s.", clip.Quote(name)))
		return nil, false
	}
	if err != nil {
		c.fail(w, r, q, err)
		return nil, false
	}
	if !model.CanRead(q.auth, sch) {
		c.forbidden(w, r, q, model.ReadPermission(sch))
		return nil, false
	}
	return sch, true
}

// schemaDetail: GET /data/private/_schema/<name>/ — a schema's attributes, its fields
// with their options and the number of instances holding a value, its dataviews, and
// the references between it and other schemas.
func (c *Console) schemaDetail(w http.ResponseWriter, r *http.Request, q *req) {
	ctx := r.Context()
	sch, ok := c.readableSchema(w, r, q)
	if !ok {
		return
	}
	count, err := c.db.CountInstances(ctx, sch.Keyname)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	d := schemaDetailData{Schema: sch, Count: thousands(count), CanChange: canChangeSchemas(q.auth), Builtin: sch.IsBuiltin,
		Options: optionText(sch.Options)}
	var stored []string // the fields holding values (external ones are computed)
	for _, f := range sch.Fields {
		if f.Dataformat != "external" {
			stored = append(stored, f.Keyname)
		}
	}
	held, err := c.db.FieldValueCounts(ctx, sch.Keyname, stored)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	for _, f := range sch.Fields {
		row := schemaFieldRow{Field: f, Options: optionText(f.Options)}
		if f.Default != nil {
			row.Default = model.MustJSON(f.Default)
		}
		if f.Dataformat != "external" {
			row.Values = thousands(held[f.Keyname])
		}
		d.Fields = append(d.Fields, row)
	}
	if dv, err := c.db.Schema(ctx, "_dataview"); err == nil && model.CanRead(q.auth, dv) {
		views, _ := c.dataviews(ctx, sch, "")
		for _, v := range views {
			if v.Keyname != "_all" { // the list's own choice of every field, no `_dataview`
				d.Dataviews = append(d.Dataviews, v)
			}
		}
	}
	if d.Out, d.In, err = c.schemaRefs(ctx, q.auth, sch); err != nil {
		c.fail(w, r, q, err)
		return
	}
	c.render(w, r, q, http.StatusOK, "schema_detail", sch.Keyname, d)
}

// optionText is a field's or schema's options (the attributes kept as given) as
// key: value text, keys sorted.
func optionText(opts map[string]any) string {
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		v, ok := model.ScalarText(opts[k])
		if !ok {
			v = model.MustJSON(opts[k])
		}
		parts = append(parts, k+": "+v)
	}
	return strings.Join(parts, ", ")
}

// fieldTarget is the schema a field's values name (refTarget), with `_enumerate` for
// an enumerate field (via: the enumeration); an external field names none but says
// through which field it reads.
func fieldTarget(f *model.Field) (target, via string) {
	switch f.Dataformat {
	case "enumerate":
		return "_enumerate", strings.TrimSpace(f.DataformatExt)
	case "external":
		if ext := strings.Fields(f.DataformatExt); len(ext) >= 2 {
			return "", "through " + ext[0] + ", its field " + ext[1]
		}
	}
	return refTarget(f), ""
}

// schemaRefs lists the references out of sch (its fields naming instances of other
// schemas, and its external fields) and into it (the fields of the schemas the user
// may read whose values name instances of sch).
func (c *Console) schemaRefs(ctx context.Context, auth *model.Auth, sch *model.Schema) (out, in []schemaRef, err error) {
	names, err := c.db.SchemaNames(ctx)
	if err != nil {
		return nil, nil, err
	}
	readable := map[string]bool{}
	var others []*model.Schema
	for _, n := range names {
		s, err := c.db.Schema(ctx, n)
		if err != nil {
			return nil, nil, err
		}
		readable[n] = model.CanRead(auth, s)
		if readable[n] {
			others = append(others, s)
		}
	}
	linkTo := func(n string) string {
		if readable[n] {
			return schemaURL(n)
		}
		return ""
	}
	for _, f := range sch.Fields {
		to, via := fieldTarget(f)
		if to == "" && via == "" {
			continue
		}
		out = append(out, schemaRef{From: sch.Keyname, Field: f.Keyname, Dataformat: f.Dataformat, To: to, Via: via, Link: linkTo(to)})
	}
	for _, s := range others {
		for _, f := range s.Fields {
			if to, _ := fieldTarget(f); to == sch.Keyname {
				in = append(in, schemaRef{From: s.Keyname, Field: f.Keyname, Dataformat: f.Dataformat, To: sch.Keyname, Link: schemaURL(s.Keyname)})
			}
		}
	}
	return out, in, nil
}
