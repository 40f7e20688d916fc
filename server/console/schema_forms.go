package console

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"dataservice/internal/clip"
	"dataservice/store"
	"dataservice/store/model"
)

// The schema tool's forms: create a schema, add or change a field, delete a field.
// Each posts twice: the first post (step=preview) shows what the change does to the
// existing instances and writes nothing; the second (step=apply) loads the change as a
// `_schema` entry through the store's load, with the user's permissions, so it is
// checked and recorded (a `_schema` revision) exactly as a loaded file's would be. The
// preview carries a digest of the change and of the schema it was computed on: an apply
// whose form or schema differs from what was previewed shows the new preview instead.

// schemaPreview is what a change would do, shown before it is applied.
type schemaPreview struct {
	// Effects say what the change does to the existing instances, one sentence each
	// (codeSpans of fieldEffects' text).
	Effects []template.HTML
	// Digest identifies the previewed change (applyDigest); the apply button posts it.
	Digest string
}

// applyDigest identifies a change to sch: the entry that makes it and the schema's
// definition it was previewed on.
func applyDigest(sch *model.Schema, entry map[string]any) string {
	h := sha256.New()
	if sch != nil {
		h.Write([]byte(model.MustJSON(sch.Doc())))
	}
	h.Write([]byte{0})
	h.Write([]byte(model.MustJSON(entry)))
	return hex.EncodeToString(h.Sum(nil))
}

// loadSchemaEntry loads one `_schema` entry (a copy of entry: the load takes its map)
// as the user, or dry-runs it. It returns the load's outcome counts, or the message
// of the entry's error (msg) with its status.
func (c *Console) loadSchemaEntry(r *http.Request, q *req, entry map[string]any, dry bool) (res *store.LoadResult, status int, msg string) {
	e := model.NewEntry(cloneEntry(entry))
	res, err := c.db.Load(r.Context(), []*model.Entry{e}, store.LoadOptions{Auth: q.auth, DryRun: dry})
	if err != nil {
		status, _, msg = c.refusal(r, err)
		return nil, status, msg
	}
	if res.Errors > 0 && len(res.Messages) > 0 {
		return res, http.StatusBadRequest, res.Messages[0].Message
	}
	return res, http.StatusOK, ""
}

// cloneEntry copies an entry map one level down (a field's attribute mapping too).
func cloneEntry(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			v = model.CloneMap(sub)
		}
		out[k] = v
	}
	return out
}

// changeableSchema is readableSchema for the forms: the user must also hold the
// permission to change schemas, and the schema must not be built-in (the built-in
// files define those; a load refuses to change them).
func (c *Console) changeableSchema(w http.ResponseWriter, r *http.Request, q *req) (*model.Schema, bool) {
	if !canChangeSchemas(q.auth) {
		c.forbidden(w, r, q, model.ClassPermission(schemaToolName))
		return nil, false
	}
	sch, ok := c.readableSchema(w, r, q)
	if !ok {
		return nil, false
	}
	if sch.IsBuiltin || strings.HasPrefix(sch.Keyname, "_") {
		c.errorPage(w, r, q, http.StatusForbidden, fmt.Sprintf("Schema %s is built-in: only the built-in files define it.", sch.Keyname))
		return nil, false
	}
	return sch, true
}

// newSchemaForm is the create form's input.
type newSchemaForm struct {
	Keyname, Displayname, Description, KeynameMode string
	Error                                          string
	// Problems are the invalid values by input name.
	Problems map[string]string
	Preview  *schemaPreview
}

// problemsMessage is a form's message for its invalid values: the problem itself when
// there is one, else how many there are (each is shown at its input).
func problemsMessage(probs map[string]string) string {
	if len(probs) == 1 {
		for _, m := range probs {
			return m
		}
	}
	return fmt.Sprintf("%d values of the form are not valid; each is named at its input.", len(probs))
}

// schemaNew: /data/private/_schema/?do=new — GET the form to create a schema, POST its
// preview, then its creation (a `_schema` entry loaded with _action init).
func (c *Console) schemaNew(w http.ResponseWriter, r *http.Request, q *req) {
	if !canChangeSchemas(q.auth) {
		c.forbidden(w, r, q, model.ClassPermission(schemaToolName))
		return
	}
	d := &newSchemaForm{KeynameMode: "edit"}
	if r.Method == http.MethodGet {
		c.render(w, r, q, http.StatusOK, "schema_new", "New schema", d)
		return
	}
	d.Keyname = strings.TrimSpace(r.PostFormValue("keyname"))
	d.Displayname = strings.TrimSpace(r.PostFormValue("displayname"))
	d.Description = strings.TrimSpace(r.PostFormValue("description"))
	d.KeynameMode = strings.TrimSpace(r.PostFormValue("keyname_mode"))
	entry := map[string]any{"classname": schemaToolName, "keyname": d.Keyname, "_action": string(model.ActionInit)}
	if d.KeynameMode != "" { // empty: the load's default, edit
		entry["keyname_mode"] = d.KeynameMode
	}
	if d.Displayname != "" {
		entry["displayname"] = d.Displayname
	}
	if d.Description != "" {
		entry["_options"] = map[string]any{"description": d.Description}
	}
	refuse := func(status int, msg string) {
		d.Error = msg
		c.render(w, r, q, status, "schema_new", "New schema", d)
	}
	// The keyname mode is checked on its own (with the load's code) as well as by the
	// load, which stops at the keyname's problem: a form with both names both.
	d.Problems = map[string]string{}
	if d.KeynameMode != "" {
		if err := (&model.Schema{Keyname: d.Keyname, Options: map[string]any{}}).SetAttr("keyname_mode", d.KeynameMode); err != nil {
			d.Problems["keyname_mode"] = store.ErrorMessage(err)
		}
	}
	if d.Keyname == "" {
		d.Problems["keyname"] = "The keyname is empty."
		refuse(http.StatusBadRequest, problemsMessage(d.Problems))
		return
	}
	if _, err := c.db.Schema(r.Context(), d.Keyname); err == nil {
		refuse(http.StatusConflict, fmt.Sprintf("A schema %s exists already.", clip.Quote(d.Keyname)))
		return
	}
	digest := applyDigest(nil, entry)
	apply := r.PostFormValue("step") == "apply" && r.PostFormValue("previewed") == digest
	res, status, msg := c.loadSchemaEntry(r, q, entry, !apply)
	if msg != "" {
		// The entry holds only the keyname, labels and mode: a refusal that is not the
		// mode's is the keyname's.
		if mode := d.Problems["keyname_mode"]; mode == "" || !strings.Contains(msg, mode) {
			d.Problems["keyname"] = msg
		}
		refuse(status, problemsMessage(d.Problems))
		return
	}
	if res.Created != 1 {
		// _action init leaves an existing schema alone: one was created meanwhile.
		refuse(http.StatusConflict, fmt.Sprintf("A schema %s exists already.", clip.Quote(d.Keyname)))
		return
	}
	if apply {
		http.Redirect(w, r, schemaURL(d.Keyname)+"?done=created", http.StatusSeeOther)
		return
	}
	d.Preview = &schemaPreview{Digest: digest, Effects: codeSpans([]string{
		fmt.Sprintf("Creates the schema `%s`, without fields and without instances: add its fields on its page.", d.Keyname)})}
	c.render(w, r, q, http.StatusOK, "schema_new", "New schema", d)
}

// fieldForm is the add, change and delete forms' input.
type fieldForm struct {
	Schema *model.Schema
	// Mode is "add", "change" or "delete".
	Mode                                          string
	Name, Displayname, Description, Dataformat    string
	Ext, CardinalMin, CardinalMax, Default, Order string
	Enabled                                       bool
	Dataformats                                   []string
	Action, Cancel, Error                         string
	// Problems are the invalid values by input name (fieldProblems).
	Problems map[string]string
	Preview  *schemaPreview
}

// fieldProblems checks each of a field form's values on its own, with the code the load
// uses (Schema.ApplyField on a copy of sch), so a form with several invalid values names
// every one in a single answer: the load stops at the first. A number is checked with
// the bounds that cannot conflict (cardinal_max 0 is no maximum), so only its own value
// can be refused; the dataformat with its extension. Whether the numbers fit together (a
// minimum above the maximum) is checked afterwards, on the whole definition.
func fieldProblems(sch *model.Schema, name string, attrs map[string]any) map[string]string {
	checks := []struct {
		input string
		attrs map[string]any
	}{
		{"dataformat", map[string]any{"dataformat": attrs["dataformat"], "dataformat_ext": attrs["dataformat_ext"]}},
		{"cardinal_min", map[string]any{"cardinal_min": attrs["cardinal_min"], "cardinal_max": 0}},
		{"cardinal_max", map[string]any{"cardinal_max": attrs["cardinal_max"], "cardinal_min": 0}},
		{"order", map[string]any{"order": attrs["order"]}},
	}
	// A bad name would refuse every check below: it is the one problem named.
	if _, err := sch.Clone().ApplyField(name, map[string]any{}, 0); err != nil {
		return map[string]string{"keyname": store.ErrorMessage(err)}
	}
	out := map[string]string{}
	for _, c := range checks {
		if v, ok := attrs[c.input]; !ok || v == nil {
			continue // left out: the field keeps its value
		}
		if a, ok := attrs["_action"]; ok {
			c.attrs["_action"] = a
		}
		if _, err := sch.Clone().ApplyField(name, c.attrs, 0); err != nil {
			out[c.input] = store.ErrorMessage(err)
		}
	}
	return out
}

// schemaField: /data/private/_schema/<name>/?do=field[&field=F] — GET the form to add a
// field (or to change F), POST its preview, then the change.
func (c *Console) schemaField(w http.ResponseWriter, r *http.Request, q *req) {
	sch, ok := c.changeableSchema(w, r, q)
	if !ok {
		return
	}
	name := r.URL.Query().Get("field")
	old := sch.Field(name)
	if name != "" && old == nil {
		c.errorPage(w, r, q, http.StatusNotFound, fmt.Sprintf("Schema %s has no field %s.", sch.Keyname, clip.Quote(name)))
		return
	}
	d := &fieldForm{Schema: sch, Mode: "add", Dataformats: model.Dataformats(), Cancel: schemaURL(sch.Keyname),
		Action: schemaURL(sch.Keyname) + "?do=field"}
	title := "Add a field to " + sch.Keyname
	if old != nil {
		d.Mode, title = "change", "Change field "+old.Keyname+" of "+sch.Keyname
		d.Action += "&field=" + url.QueryEscape(old.Keyname)
	}
	if r.Method == http.MethodGet {
		d.fill(sch, old)
		c.render(w, r, q, http.StatusOK, "schema_field", title, d)
		return
	}
	d.read(r, old)
	refuse := func(status int, msg string) {
		d.Error = msg
		c.render(w, r, q, status, "schema_field", title, d)
	}
	attrs := d.attrs(old)
	if old == nil {
		switch {
		case d.Name == "":
			refuse(http.StatusBadRequest, "The field's keyname is empty.")
			return
		case sch.Field(d.Name) != nil:
			refuse(http.StatusConflict, fmt.Sprintf("Schema %s has a field %s already: change it on the schema's page.", sch.Keyname, clip.Quote(d.Name)))
			return
		}
	}
	if probs := fieldProblems(sch, d.Name, attrs); len(probs) > 0 {
		d.Problems = probs
		refuse(http.StatusBadRequest, problemsMessage(probs))
		return
	}
	// The new definition, computed by the code the load uses, for the preview.
	next := sch.Clone()
	if _, err := next.ApplyField(d.Name, model.CloneMap(attrs), 0); err != nil {
		refuse(http.StatusBadRequest, store.ErrorMessage(err))
		return
	}
	entry := map[string]any{"classname": schemaToolName, "keyname": sch.Keyname, "_action": string(model.ActionUpdate), d.Name: attrs}
	digest := applyDigest(sch, entry)
	apply := r.PostFormValue("step") == "apply" && r.PostFormValue("previewed") == digest
	res, status, msg := c.loadSchemaEntry(r, q, entry, !apply)
	if msg != "" {
		refuse(status, msg)
		return
	}
	if apply {
		done := "updated"
		if res.Unchanged == 1 {
			done = "unchanged"
		}
		http.Redirect(w, r, schemaURL(sch.Keyname)+"?done="+done, http.StatusSeeOther)
		return
	}
	effects, err := c.fieldEffects(r, sch, old, next.Field(d.Name))
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	if res.Unchanged == 1 {
		effects = []string{"Nothing changes: the definition is the one the field has."}
		digest = ""
	}
	d.Preview = &schemaPreview{Effects: codeSpans(effects), Digest: digest}
	c.render(w, r, q, http.StatusOK, "schema_field", title, d)
}

// schemaDeleteField: /data/private/_schema/<name>/?do=delete_field&field=F — GET shows
// what deleting F does (the preview), POST deletes it.
func (c *Console) schemaDeleteField(w http.ResponseWriter, r *http.Request, q *req) {
	sch, ok := c.changeableSchema(w, r, q)
	if !ok {
		return
	}
	name := r.URL.Query().Get("field")
	f := sch.Field(name)
	if f == nil {
		c.errorPage(w, r, q, http.StatusNotFound, fmt.Sprintf("Schema %s has no field %s.", sch.Keyname, clip.Quote(name)))
		return
	}
	d := &fieldForm{Schema: sch, Mode: "delete", Name: f.Keyname, Cancel: schemaURL(sch.Keyname),
		Action: schemaURL(sch.Keyname) + "?do=delete_field&field=" + url.QueryEscape(f.Keyname)}
	title := "Delete field " + f.Keyname + " of " + sch.Keyname
	entry := map[string]any{"classname": schemaToolName, "keyname": sch.Keyname, "_action": string(model.ActionUpdate),
		f.Keyname: map[string]any{"_action": string(model.ActionDelete)}}
	digest := applyDigest(sch, entry)
	if r.Method == http.MethodPost && r.PostFormValue("previewed") == digest {
		if _, status, msg := c.loadSchemaEntry(r, q, entry, false); msg != "" {
			d.Error = msg
			c.render(w, r, q, status, "schema_field", title, d)
			return
		}
		http.Redirect(w, r, schemaURL(sch.Keyname)+"?done=deleted", http.StatusSeeOther)
		return
	}
	// No dry-run load here: a deletion's dry run copies every row of the class into
	// the dry run's private database (as the real statement touches them all), which
	// at a million instances costs far more than this count. The load's checks on a
	// field deletion are those made above (permission, a schema that is no built-in,
	// an existing field).
	effects, err := c.fieldEffects(r, sch, f, nil)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	dependents, err := c.fieldDependents(r.Context(), q.auth, sch, f.Keyname)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	effects = append(effects, dependents...)
	d.Preview = &schemaPreview{Effects: codeSpans(effects), Digest: digest}
	c.render(w, r, q, http.StatusOK, "schema_field", title, d)
}

// fill sets the form from the field's definition (nil: a new field's defaults, last).
func (d *fieldForm) fill(sch *model.Schema, f *model.Field) {
	if f == nil {
		last := 0
		for _, x := range sch.Fields {
			last = max(last, x.Order)
		}
		d.Dataformat, d.CardinalMin, d.CardinalMax, d.Order, d.Enabled = "string", "0", "1", fmt.Sprint(last+10), true
		return
	}
	d.Name, d.Displayname, d.Description, d.Dataformat, d.Ext = f.Keyname, f.Displayname, f.Description, f.Dataformat, f.DataformatExt
	d.CardinalMin, d.CardinalMax, d.Order, d.Enabled = fmt.Sprint(f.CardinalMin), fmt.Sprint(f.CardinalMax), fmt.Sprint(f.Order), f.IsEnabled
	if f.Default != nil {
		d.Default, _ = model.ScalarText(f.Default)
	}
}

// read sets the form from the post (a change keeps the field's name).
func (d *fieldForm) read(r *http.Request, old *model.Field) {
	v := func(k string) string { return strings.TrimSpace(r.PostFormValue(k)) }
	d.Name = v("keyname")
	if old != nil {
		d.Name = old.Keyname
	}
	d.Displayname, d.Description, d.Dataformat, d.Ext = v("displayname"), v("description"), v("dataformat"), v("dataformat_ext")
	d.CardinalMin, d.CardinalMax, d.Default, d.Order = v("cardinal_min"), v("cardinal_max"), v("default"), v("order")
	d.Enabled = checked(r, "is_enabled")
}

// attrs is the field's mapping in a `_schema` entry. An empty number keeps the
// field's value (a new field's default); an empty default clears the field's.
func (d *fieldForm) attrs(old *model.Field) map[string]any {
	a := map[string]any{"displayname": d.Displayname, "description": d.Description, "dataformat": d.Dataformat,
		"dataformat_ext": d.Ext, "is_enabled": d.Enabled}
	for k, v := range map[string]string{"cardinal_min": d.CardinalMin, "cardinal_max": d.CardinalMax, "order": d.Order} {
		if v != "" {
			a[k] = v
		}
	}
	oldText, oldScalar := "", false
	if old != nil && old.Default != nil {
		oldText, oldScalar = model.ScalarText(old.Default)
	}
	switch {
	case oldScalar && d.Default == oldText:
		// Unchanged: left out, so the default keeps its type (42 stays a number).
	case d.Default != "":
		a["default"] = d.Default
	case oldScalar:
		a["default"] = nil // the form showed it: emptied, it is cleared
	}
	if old != nil {
		a["_action"] = string(model.ActionUpdate)
	}
	return a
}

// codeSpans escapes each text and shows its `quoted` names as code.
func codeSpans(texts []string) []template.HTML {
	out := make([]template.HTML, len(texts))
	for i, t := range texts {
		parts := strings.Split(html.EscapeString(t), "`")
		var b strings.Builder
		for j, p := range parts {
			switch {
			case j%2 == 0:
				b.WriteString(p)
			case j == len(parts)-1: // an unpaired backquote: kept as written
				b.WriteString("`" + p)
			default:
				b.WriteString("<code>" + p + "</code>")
			}
		}
		out[i] = template.HTML(b.String())
	}
	return out
}
