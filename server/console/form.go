package console

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"dataservice/server/httperror"
	"dataservice/store"
	"dataservice/store/model"
)

// formField is one input of a create or edit form, with the user's input and its error.
type formField struct {
	Name, Label, Help, Widget string
	Multi, Required           bool
	Values                    []string
	Checked                   bool
	Min, Max, Step            string
	Options                   []string
	Lookup, Target            string
	Error                     string
	// Choices are the checkboxes of a multi-valued field with fixed values (widget
	// "checkboxes"); Example is a sample value shown under the input.
	Choices []choice
	Example string
}

type formData struct {
	Schema               *model.Schema
	New                  bool
	Keyname, Displayname string
	KeynameLocked        bool
	Enabled              bool
	Fields               []*formField
	Error, KeyError      string
	Action, Cancel       string
}

// widget picks the input for a field's dataformat.
func widget(f *model.Field) (w string, min, max, step string) {
	switch f.Dataformat {
	case "text":
		return "textarea", "", "", ""
	case "int", "float":
		step = "1"
		if f.Dataformat == "float" {
			step = "any"
		}
		for _, b := range strings.Fields(f.DataformatExt) {
			op, num, _ := strings.Cut(b, "_")
			switch op {
			case "gte", "gt":
				min = num
			case "lte", "lt":
				max = num
			}
		}
		return "number", min, max, step
	case "boolean":
		return "checkbox", "", "", ""
	case "date":
		return "date", "", "", ""
	case "datetime":
		return "datetime", "", "", ""
	case "ipv4":
		return "ipv4", "", "", ""
	case "enumerate":
		return "select", "", "", ""
	case "schema", "user", "group":
		return "ref", "", "", ""
	}
	return "text", "", "", ""
}

// formFields builds the inputs of sch filled from values (stored values or the
// posted ones). Secret fields are never prefilled; external fields are computed.
func (c *Console) formFields(ctx context.Context, sch *model.Schema, values map[string]any) []*formField {
	var out []*formField
	for _, f := range sch.Fields {
		if !f.IsEnabled || f.Dataformat == "external" {
			continue
		}
		ff := &formField{Name: f.Keyname, Label: f.Displayname, Help: f.Description, Multi: f.IsMulti(),
			Required: f.CardinalMin > 0}
		if ff.Label == "" {
			ff.Label = f.Keyname
		}
		ff.Widget, ff.Min, ff.Max, ff.Step = widget(f)
		hint := hintOf(sch, f)
		if hint.Help != "" {
			ff.Help = hint.Help
		}
		ff.Example = hint.Example
		switch {
		case f.Dataformat == "secret":
			ff.Widget = "secret"
			ff.Multi = false
			ff.Help = secretHelp(f, false)
		case readOnlyField(sch, f):
			ff.Widget = "readonly"
			ff.Required = false
			ff.Help = "Written by the service on every save: the user, API key or system that saved it last, whose permissions it acts with."
		case len(hint.Choices) > 0 && ff.Multi:
			ff.Widget = "checkboxes"
		case len(hint.Choices) > 0:
			ff.Widget = "select"
			ff.Options = slices.Clone(hint.Choices)
		}
		if f.Dataformat == "text" && f.DataformatExt != "" {
			ff.Help = strings.TrimSpace(ff.Help + " (" + strings.ToUpper(strings.TrimSpace(f.DataformatExt)) + ")")
		}
		if t := refTarget(f); t != "" {
			ff.Target = t
			ff.Lookup = "/data/private/" + url.PathEscape(t) + "/?do=lookup"
		}
		if ff.Widget == "select" && f.Dataformat == "enumerate" {
			if in, err := c.db.Instance(ctx, "_enumerate", strings.TrimSpace(f.DataformatExt)); err == nil {
				for v := range store.EnumValues(in) {
					ff.Options = append(ff.Options, v)
				}
				sort.Strings(ff.Options)
			}
		}
		v := values[f.Keyname]
		if f.Dataformat != "secret" {
			switch x := v.(type) {
			case []any:
				for _, it := range x {
					ff.Values = append(ff.Values, text(it))
				}
			case []string:
				ff.Values = x
			case nil:
			default:
				ff.Values = []string{text(x)}
			}
		}
		switch ff.Widget {
		case "checkbox":
			b, _ := model.BoolWord(strings.Join(ff.Values, ""))
			ff.Checked = b
		case "checkboxes":
			ff.Choices = choicesOf(hint.Choices, ff.Values)
		case "select":
			if len(hint.Choices) == 0 {
				break
			}
			// A stored value the list does not offer stays selectable, so saving the
			// form keeps it (the store names it when it is invalid).
			for _, v := range ff.Values {
				if v != "" && !slices.Contains(ff.Options, v) {
					ff.Options = append(ff.Options, v)
				}
			}
		}
		if len(ff.Values) == 0 || ff.Multi {
			ff.Values = append(ff.Values, "") // an empty input to add one more value
		}
		out = append(out, ff)
	}
	return out
}

// posted reads a form's field values: lists for multi-valued fields (empty inputs
// dropped), the checkbox as true/false, secrets only when typed. Read-only fields are
// never read from a form (the store writes them).
func posted(r *http.Request, sch *model.Schema) map[string]any {
	out := map[string]any{}
	for _, f := range sch.Fields {
		if !f.IsEnabled || f.Dataformat == "external" || readOnlyField(sch, f) {
			continue
		}
		vals := r.PostForm["f_"+f.Keyname]
		switch {
		case f.Dataformat == "boolean":
			out[f.Keyname] = checked(r, "f_"+f.Keyname)
		case f.Dataformat == "secret":
			if len(vals) > 0 && vals[0] != "" {
				out[f.Keyname] = vals[0]
			}
		case f.IsMulti():
			l := []any{}
			for _, v := range vals {
				if strings.TrimSpace(v) != "" {
					l = append(l, v)
				}
			}
			out[f.Keyname] = l
		default:
			v := ""
			if len(vals) > 0 {
				v = vals[0]
			}
			// A datetime-local input leaves out zero seconds.
			if f.Dataformat == "datetime" && len(v) == len("2006-01-02T15:04") {
				v += ":00"
			}
			out[f.Keyname] = v
		}
	}
	return out
}

// fieldError puts a problem next to the field of the form it is about (its field, or
// the field its message names: "field X: ..."), the message without that name; it
// returns false when the problem is about no field of the form.
func fieldError(fields []*formField, p model.Problem) bool {
	for _, ff := range fields {
		named := "field " + ff.Name + ":"
		if p.Field != ff.Name && !strings.HasPrefix(p.Message, named) {
			continue
		}
		msg := p.Message
		for _, prefix := range []string{named, ff.Name + ":"} {
			if strings.HasPrefix(msg, prefix) {
				msg = strings.TrimSpace(strings.TrimPrefix(msg, prefix))
				break
			}
		}
		ff.Error = joinError(ff.Error, msg)
		return true
	}
	return false
}

// createPage: GET/POST /data/private/<schema>/?do=new.
func (c *Console) createPage(w http.ResponseWriter, r *http.Request, q *req, sch *model.Schema) {
	if !model.CanWrite(q.auth, sch, model.ActionCreate) {
		c.forbidden(w, r, q, model.WritePermission(sch, model.ActionCreate))
		return
	}
	ctx := r.Context()
	d := formData{Schema: sch, New: true, Enabled: true, Action: "?do=new", Cancel: "/data/private/" + url.PathEscape(sch.Keyname) + "/"}
	if r.Method == http.MethodGet {
		defaults := map[string]any{}
		for _, f := range sch.Fields {
			if f.Default != nil {
				defaults[f.Keyname] = f.Default
			}
		}
		d.Fields = c.formFields(ctx, sch, defaults)
		c.render(w, r, q, http.StatusOK, "form", "New "+sch.Keyname, d)
		return
	}
	vals := posted(r, sch)
	d.Keyname = strings.TrimSpace(r.PostFormValue("keyname"))
	d.Displayname = r.PostFormValue("displayname")
	d.Enabled = checked(r, "is_enabled")
	d.Fields = c.formFields(ctx, sch, vals)
	key := d.Keyname
	if key == "" && strings.HasPrefix(sch.KeynameMode, "hexip") {
		// The keyname is derived from the address in displayname.
		if hex, err := model.HexIP(strings.TrimSpace(d.Displayname)); err == nil {
			key = hex
		}
	}
	if key != "" {
		if _, err := c.db.Instance(ctx, sch.Keyname, key); err == nil {
			d.KeyError = "an instance with this keyname exists already"
			// The values' problems too (a dry run of the create checks them), so one
			// answer names every one.
			try := wanted(sch, nil, key, d.Displayname, d.Enabled, vals)
			_, err := c.db.Apply(ctx, store.Write{Schema: sch, New: try, Action: model.ActionCreate}, store.ApplyOptions{Auth: q.auth, DryRun: true})
			if err != nil && store.Aborts(err) {
				c.fail(w, r, q, err)
				return
			}
			d.addProblems(err)
			c.render(w, r, q, http.StatusConflict, "form", "New "+sch.Keyname, d)
			return
		}
	}
	next := wanted(sch, nil, key, d.Displayname, d.Enabled, vals)
	if _, err := c.apply(ctx, q.auth, sch, nil, next, model.ActionCreate); err != nil {
		c.formError(w, r, q, &d, "New "+sch.Keyname, err)
		return
	}
	http.Redirect(w, r, link(sch.Keyname, key)+"?done=created", http.StatusSeeOther)
}

// formError re-renders a form with the store's error next to its field, with the
// API's status for its code.
func (c *Console) formError(w http.ResponseWriter, r *http.Request, q *req, d *formData, title string, err error) {
	if store.Aborts(err) {
		c.fail(w, r, q, err)
		return
	}
	d.addProblems(err)
	c.render(w, r, q, httperror.Status(err), "form", title, d)
}

// addProblems shows every problem of err (nil: none) at once, each next to its field.
func (d *formData) addProblems(err error) {
	if err == nil {
		return
	}
	for _, p := range store.ErrorProblems(err) {
		msg := p.Message
		switch {
		case fieldError(d.Fields, p):
		case p.Field == "keyname" || p.Field == "displayname" || strings.Contains(msg, "keyname"):
			d.KeyError = joinError(d.KeyError, msg)
		default:
			d.Error = joinError(d.Error, msg)
		}
	}
}

// joinError adds msg to the errors shown in one place.
func joinError(shown, msg string) string {
	if shown == "" {
		return msg
	}
	return shown + "; " + msg
}

// checked reads a checkbox that follows a hidden "false" input of the same name.
func checked(r *http.Request, name string) bool {
	for _, v := range r.PostForm[name] {
		if v == "true" {
			return true
		}
	}
	return false
}
