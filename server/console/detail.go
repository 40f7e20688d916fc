package console

import (
	"context"
	"encoding/json"
	"html/template"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"dataservice/server/httperror"
	"dataservice/store"
	"dataservice/store/model"
)

type detailField struct {
	Label, Name string
	Cells       []cell
}

type revisionRow struct {
	store.Revision
	Changes []change
}

type change struct {
	Key, Old, New string
}

type originRow struct {
	Permission, Role, RoleLink, Via, ViaLink string
}

type detailData struct {
	Schema       *model.Schema
	Instance     *store.Instance
	Fields       []detailField
	ReferencedBy []refGroup
	Revisions    []revisionRow
	// FieldRows and RevisionRows are Fields and Revisions rendered (htmlrows.go), Page
	// the whole content (detailHTML).
	FieldRows, RevisionRows, Page                template.HTML
	CanUpdate, CanDelete, CanRename, CanPassword bool
	IsUser, AllPerms                             bool
	Origins                                      []originRow
	Self, ListURL                                string
}

// instancePage dispatches /data/private/<schema>/<keyname>/ by ?do=.
func (c *Console) instancePage(w http.ResponseWriter, r *http.Request, q *req, sch *model.Schema) {
	ctx := r.Context()
	in, err := c.db.Instance(ctx, sch.Keyname, q.ps.ByName("key"))
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	do := r.URL.Query().Get("do")
	switch {
	case do == "edit":
		c.editPage(w, r, q, sch, in)
	case do == "rename":
		c.renamePage(w, r, q, sch, in)
	case do == "delete":
		c.deletePage(w, r, q, sch, in)
	case do == "password" && sch.Keyname == "_user":
		c.passwordPage(w, r, q, sch, in)
	case (do == "enable" || do == "disable") && r.Method == http.MethodPost:
		c.enable(w, r, q, sch, in, do)
	case do != "" || r.Method != http.MethodGet:
		c.errorPage(w, r, q, http.StatusBadRequest, "unknown action")
	default:
		c.detail(w, r, q, sch, in)
	}
}

// detail: GET /data/private/<schema>/<keyname>/ — every field, references as links,
// what refers here, the revisions, and the actions the user may use.
func (c *Console) detail(w http.ResponseWriter, r *http.Request, q *req, sch *model.Schema, in *store.Instance) {
	ctx := r.Context()
	doc := c.db.InstanceDocAs(ctx, q.auth, sch, in)
	d := detailData{Schema: sch, Instance: in, Self: link(sch.Keyname, in.Keyname),
		ListURL:   "/data/private/" + url.PathEscape(sch.Keyname) + "/",
		CanUpdate: model.CanWrite(q.auth, sch, model.ActionUpdate), CanDelete: model.CanWrite(q.auth, sch, model.ActionDelete)}
	d.CanRename = d.CanUpdate && q.auth.Has("p_keyname_rename")
	d.IsUser = sch.Keyname == "_user"
	d.CanPassword = d.IsUser && d.CanUpdate
	for _, f := range sch.Fields {
		if !f.IsEnabled || (f.Dataformat == "secret" && f.DataformatExt != "encrypted") {
			continue
		}
		df := detailField{Label: f.Displayname, Name: f.Keyname}
		if df.Label == "" {
			df.Label = f.Keyname
		}
		if f.Dataformat == "secret" {
			// An encrypted secret (a webhook's signing key) is never shown; whether one
			// is set is what its operator needs to know.
			df.Cells = []cell{{Text: "not set"}}
			if v, _ := in.Data[f.Keyname].(string); v != "" {
				df.Cells = []cell{{Text: "set (never shown)"}}
			}
			d.Fields = append(d.Fields, df)
			continue
		}
		v := doc.Vals[f.Keyname]
		items, isList := v.([]any)
		if !isList {
			items = []any{v}
		}
		for _, it := range items {
			if it == nil {
				continue
			}
			cl := cellOf(sch, f.Keyname, it)
			if f.Dataformat == "ipv4" && cl.Link == "" {
				cl.Link = c.ipamLink(ctx, q.auth, cl.Text)
			}
			df.Cells = append(df.Cells, cl)
		}
		d.Fields = append(d.Fields, df)
	}
	var err error
	if d.ReferencedBy, err = c.referenceGroups(ctx, q.auth, sch.Keyname, in.Keyname); err != nil {
		c.fail(w, r, q, err)
		return
	}
	revs, err := c.db.Revisions(ctx, sch.Keyname, in.Keyname, 20)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	for _, rv := range revs {
		d.Revisions = append(d.Revisions, revisionRow{Revision: rv, Changes: changes(rv)})
	}
	if d.IsUser {
		all, origins, err := c.db.PermissionOrigins(ctx, in.Keyname)
		if err != nil {
			c.fail(w, r, q, err)
			return
		}
		d.AllPerms = all
		for _, o := range origins {
			row := originRow{Permission: o.Permission, Role: o.Role, RoleLink: link("_role", o.Role), Via: o.Via}
			if o.Via != "" {
				row.ViaLink = link("_group", o.Via)
			}
			d.Origins = append(d.Origins, row)
		}
	}
	d.FieldRows, d.RevisionRows = fieldsHTML(d.Fields), revisionsHTML(d.Revisions)
	title := in.Keyname
	if in.Displayname != "" && in.Displayname != in.Keyname {
		title = in.Displayname + " (" + in.Keyname + ")"
	}
	d.Page = detailHTML(&d, title, q.sess.CSRF)
	c.render(w, r, q, http.StatusOK, "detail", title, d)
}

// referencedBy is store.DB.ReferencedBy keeping only the referrers whose schema auth
// may read: a referrer's keyname and displayname are data of its schema.
func (c *Console) referencedBy(ctx context.Context, auth *model.Auth, cls, key string, limit int) ([]store.Reference, error) {
	refs, err := c.db.ReferencedBy(ctx, cls, key, limit)
	if err != nil {
		return nil, err
	}
	readable := map[string]bool{}
	out := refs[:0]
	for _, r := range refs {
		ok, seen := readable[r.Classname]
		if !seen {
			s, err := c.db.Schema(ctx, r.Classname)
			ok = err == nil && model.CanRead(auth, s)
			readable[r.Classname] = ok
		}
		if ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// changes lists the keys that differ between a revision's two records. A delta row's
// before holds only the changed parts (the data keys the old object did not hold listed
// under "absent": such a key shows as empty, as a key missing from a whole record), its
// after the whole object: its changes are the keys its before names.
func changes(rv store.Revision) []change {
	flat := func(s string) map[string]string {
		out := map[string]string{}
		// Numbers as written (json.Number): a float64 would print a million as 1e+06.
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		if s == "" || dec.Decode(&m) != nil {
			return out
		}
		for k, v := range m {
			if rv.Delta && k == "absent" {
				if list, ok := v.([]any); ok {
					for _, dk := range list {
						if name, ok := dk.(string); ok {
							out[name] = ""
						}
					}
				}
				continue
			}
			if k == "data" {
				if dm, ok := v.(map[string]any); ok {
					for dk, dv := range dm {
						out[dk] = text(dv)
					}
					continue
				}
			}
			out[k] = text(v)
		}
		return out
	}
	b, a := flat(rv.Before), flat(rv.After)
	keys := map[string]bool{}
	for k := range b {
		keys[k] = true
	}
	if !rv.Delta {
		for k := range a {
			keys[k] = true
		}
	}
	var out []change
	for k := range keys {
		if b[k] != a[k] {
			out = append(out, change{Key: k, Old: b[k], New: a[k]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// editPage: GET/POST ?do=edit — the form prefilled; a post updates with the user's rights.
func (c *Console) editPage(w http.ResponseWriter, r *http.Request, q *req, sch *model.Schema, in *store.Instance) {
	if !model.CanWrite(q.auth, sch, model.ActionUpdate) {
		c.forbidden(w, r, q, model.WritePermission(sch, model.ActionUpdate))
		return
	}
	ctx := r.Context()
	self := link(sch.Keyname, in.Keyname)
	d := formData{Schema: sch, Keyname: in.Keyname, KeynameLocked: true, Displayname: in.Displayname,
		Enabled: in.IsEnabled, Action: "?do=edit", Cancel: self}
	title := "Edit " + in.Keyname
	if r.Method == http.MethodGet {
		d.Fields = c.formFields(ctx, sch, c.db.InstanceDocAs(ctx, q.auth, sch, in).Vals)
		d.stored(sch, in)
		c.render(w, r, q, http.StatusOK, "form", title, d)
		return
	}
	vals := posted(r, sch)
	d.Displayname = r.PostFormValue("displayname")
	d.Enabled = checked(r, "is_enabled")
	d.Fields = c.formFields(ctx, sch, vals)
	d.stored(sch, in)
	next := wanted(sch, in, in.Keyname, d.Displayname, d.Enabled, vals)
	outcome, err := c.apply(ctx, q.auth, sch, in, next, model.ActionUpdate)
	if err != nil {
		c.formError(w, r, q, &d, title, err)
		return
	}
	done := "updated"
	if outcome.Result == store.OutUnchanged {
		done = "unchanged"
	}
	http.Redirect(w, r, self+"?done="+done, http.StatusSeeOther)
}

// enable: POST ?do=enable|disable.
func (c *Console) enable(w http.ResponseWriter, r *http.Request, q *req, sch *model.Schema, in *store.Instance, do string) {
	if !model.CanWrite(q.auth, sch, model.ActionUpdate) {
		c.forbidden(w, r, q, model.WritePermission(sch, model.ActionUpdate))
		return
	}
	if _, err := c.apply(r.Context(), q.auth, sch, in, nil, model.Action(do)); err != nil {
		c.fail(w, r, q, err)
		return
	}
	http.Redirect(w, r, link(sch.Keyname, in.Keyname)+"?done="+do+"d", http.StatusSeeOther)
}

type confirmData struct {
	Schema   *model.Schema
	Instance *store.Instance
	Self     string
	NewKey   string
	Error    string
	Refs     []store.Reference
	Report   *renameReport
}

// renameReport is what the rename page shows after renaming.
type renameReport struct {
	From, To  string
	Referrers int
	More      bool
}

// deletePage: GET ?do=delete asks, POST deletes.
func (c *Console) deletePage(w http.ResponseWriter, r *http.Request, q *req, sch *model.Schema, in *store.Instance) {
	if !model.CanWrite(q.auth, sch, model.ActionDelete) {
		c.forbidden(w, r, q, model.WritePermission(sch, model.ActionDelete))
		return
	}
	ctx := r.Context()
	self := link(sch.Keyname, in.Keyname)
	if r.Method == http.MethodGet {
		refs, err := c.referencedBy(ctx, q.auth, sch.Keyname, in.Keyname, 100)
		if err != nil {
			c.fail(w, r, q, err)
			return
		}
		c.render(w, r, q, http.StatusOK, "delete", "Delete "+in.Keyname, confirmData{Schema: sch, Instance: in, Self: self, Refs: refs})
		return
	}
	if _, err := c.apply(ctx, q.auth, sch, in, nil, model.ActionDelete); err != nil {
		c.render(w, r, q, httperror.Status(err), "delete", "Delete "+in.Keyname, confirmData{Schema: sch, Instance: in, Self: self, Error: store.ErrorMessage(err)})
		return
	}
	http.Redirect(w, r, "/data/private/"+url.PathEscape(sch.Keyname)+"/?done=deleted", http.StatusSeeOther)
}

// renamePage: GET ?do=rename asks for the new keyname (showing what refers here), POST
// renames and shows the cascade report.
func (c *Console) renamePage(w http.ResponseWriter, r *http.Request, q *req, sch *model.Schema, in *store.Instance) {
	if !model.CanWrite(q.auth, sch, model.ActionUpdate) {
		c.forbidden(w, r, q, model.WritePermission(sch, model.ActionUpdate))
		return
	}
	if !q.auth.Has(model.PermKeynameRename) {
		c.forbidden(w, r, q, model.PermKeynameRename)
		return
	}
	ctx := r.Context()
	d := confirmData{Schema: sch, Instance: in, Self: link(sch.Keyname, in.Keyname)}
	refs, err := c.referencedBy(ctx, q.auth, sch.Keyname, in.Keyname, 100)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	d.Refs = refs
	if r.Method == http.MethodGet {
		c.render(w, r, q, http.StatusOK, "rename", "Rename "+in.Keyname, d)
		return
	}
	d.NewKey = strings.TrimSpace(r.PostFormValue("new_keyname"))
	// A rename is an update whose keyname differs: the store rewrites every reference
	// in the same transaction.
	next := wanted(sch, in, d.NewKey, in.Displayname, in.IsEnabled, nil)
	if _, err := c.apply(ctx, q.auth, sch, in, next, model.ActionUpdate); err != nil {
		if store.Aborts(err) {
			c.fail(w, r, q, err)
			return
		}
		d.Error = store.ErrorMessage(err)
		c.render(w, r, q, httperror.Status(err), "rename", "Rename "+in.Keyname, d)
		return
	}
	// What refers to the new keyname now: the references that followed.
	after, err := c.referencedBy(ctx, q.auth, sch.Keyname, d.NewKey, 1000)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	rep := &renameReport{From: in.Keyname, To: d.NewKey, Referrers: len(after), More: len(after) == 1000}
	d.Report = rep
	d.Self = link(sch.Keyname, rep.To)
	c.render(w, r, q, http.StatusOK, "rename", "Renamed "+rep.From, d)
}

type passwordData struct {
	Instance *store.Instance
	Self     string
	Error    string
}

// passwordPage: GET/POST ?do=password on a user — the new password typed twice.
func (c *Console) passwordPage(w http.ResponseWriter, r *http.Request, q *req, sch *model.Schema, in *store.Instance) {
	if !model.CanWrite(q.auth, sch, model.ActionUpdate) {
		c.forbidden(w, r, q, model.WritePermission(sch, model.ActionUpdate))
		return
	}
	d := passwordData{Instance: in, Self: link(sch.Keyname, in.Keyname)}
	if r.Method == http.MethodGet {
		c.render(w, r, q, http.StatusOK, "password", "Password of "+in.Keyname, d)
		return
	}
	p1, p2 := r.PostFormValue("password"), r.PostFormValue("password2")
	switch {
	case p1 == "":
		d.Error = "Type the new password."
	case p1 != p2:
		d.Error = "The two passwords differ."
	case len(p1) > 1024:
		d.Error = "The password is longer than 1024 bytes."
	}
	if d.Error != "" {
		c.render(w, r, q, http.StatusBadRequest, "password", "Password of "+in.Keyname, d)
		return
	}
	next := wanted(sch, in, in.Keyname, in.Displayname, in.IsEnabled, map[string]any{"password": p1})
	if _, err := c.apply(r.Context(), q.auth, sch, in, next, model.ActionUpdate); err != nil {
		d.Error = store.ErrorMessage(err)
		c.render(w, r, q, httperror.Status(err), "password", "Password of "+in.Keyname, d)
		return
	}
	http.Redirect(w, r, d.Self+"?done=password", http.StatusSeeOther)
}
