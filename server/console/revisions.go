package console

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"dataservice/internal/clip"
	"dataservice/store"
	"dataservice/store/model"
)

// The revisions page shows this many revisions, and reads at most revisionScan rows
// of the history for one page: a filter that matches little, or a history of classes
// the user may not read, ends a page early with a link to search on.
const (
	revisionPage = 50
	revisionScan = 5000
)

// revisionActions are the actions a revision records, as the filter offers them.
var revisionActions = []string{string(model.ActionCreate), string(model.ActionUpdate), string(model.ActionDelete),
	string(model.ActionRename), string(model.ActionEnable), string(model.ActionDisable)}

type revisionFilterForm struct {
	Class, Keyname, Author, Action, From, To string
}

type revisionsData struct {
	Filter  revisionFilterForm
	Classes []string
	Actions []string
	Error   string
	Rows    []revisionListRow
	// NextURL is the next (older) page; Partial says the page ended because the scan
	// budget ran out, not because it was full.
	NextURL, FirstURL string
	Partial           bool
	ScannedTo         int64
}

type revisionListRow struct {
	store.Revision
	DiffURL, ObjectURL string
	Changes            []diffRow
}

// revisionReader reports whether auth may read the revisions of a class: schema
// revisions with p_schema_import, permission revisions with p_permission_import, an
// instance class when the user may read its schema. A class whose schema no longer
// exists is readable only by callers holding every permission (who could read it,
// whatever its read permission was).
func (c *Console) revisionReader(ctx context.Context, auth *model.Auth) func(cls string) bool {
	readable := map[string]bool{}
	return func(cls string) bool {
		ok, seen := readable[cls]
		if seen {
			return ok
		}
		switch cls {
		case "_schema":
			ok = auth.Has("p_schema_import")
		case "_permission":
			ok = auth.Has("p_permission_import")
		default:
			sch, err := c.db.Schema(ctx, cls)
			switch {
			case err == nil:
				ok = model.CanRead(auth, sch)
			case store.IsNotFound(err):
				ok = auth.HasAll()
			}
		}
		readable[cls] = ok
		return ok
	}
}

// revisions: GET /data/private/revision/?class=&keyname=&author=&action=&from=&to=&before=
// — the newest revisions the user may read, filtered, revisionPage a page, keyset by id.
func (c *Console) revisions(w http.ResponseWriter, r *http.Request, q *req) {
	ctx := r.Context()
	qs := r.URL.Query()
	d := revisionsData{Actions: revisionActions, Filter: revisionFilterForm{
		Class: strings.TrimSpace(qs.Get("class")), Keyname: strings.TrimSpace(qs.Get("keyname")),
		Author: strings.TrimSpace(qs.Get("author")), Action: qs.Get("action"),
		From: strings.TrimSpace(qs.Get("from")), To: strings.TrimSpace(qs.Get("to"))}}
	allowed := c.revisionReader(ctx, q.auth)
	if d.Classes = c.readableClasses(ctx, q.auth, allowed); d.Classes == nil {
		d.Classes = []string{}
	}
	f, msg := d.Filter.filter()
	if msg != "" {
		d.Error = msg
		c.render(w, r, q, http.StatusBadRequest, "revisions", "Revisions", d)
		return
	}
	if b := qs.Get("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			d.Error = "before: not a revision number"
			c.render(w, r, q, http.StatusBadRequest, "revisions", "Revisions", d)
			return
		}
		f.Before = n
		d.FirstURL = d.Filter.url(0)
	}
	revs, next, err := c.db.FindRevisions(ctx, f, revisionPage, revisionScan, allowed)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	schemas := map[string]*model.Schema{}
	for _, rv := range revs {
		row := revisionListRow{Revision: rv, DiffURL: revisionURL(rv.ID)}
		sch, seen := schemas[rv.Classname]
		if !seen {
			if s, err := c.db.Schema(ctx, rv.Classname); err == nil && rv.Classname != "_schema" && rv.Classname != "_permission" {
				sch = s
			}
			schemas[rv.Classname] = sch
		}
		for _, dr := range revisionRows(rv, sch, statesOf(rv)) {
			if dr.Changed {
				row.Changes = append(row.Changes, dr)
			}
		}
		if rv.Action != string(model.ActionDelete) && rv.Classname != "_schema" && rv.Classname != "_permission" {
			row.ObjectURL = link(rv.Classname, rv.Keyname)
		}
		d.Rows = append(d.Rows, row)
	}
	if next != 0 {
		d.NextURL = d.Filter.url(next)
		d.Partial = len(revs) < revisionPage
		d.ScannedTo = next
	}
	c.render(w, r, q, http.StatusOK, "revisions", "Revisions", d)
}

func revisionURL(id int64) string {
	return "/data/private/revision/" + strconv.FormatInt(id, 10) + "/"
}

// filter turns the form into a store filter; msg names what is wrong with it.
func (f revisionFilterForm) filter() (store.RevisionFilter, string) {
	out := store.RevisionFilter{Classname: f.Class, Keyname: f.Keyname, Author: f.Author}
	if f.Action != "" {
		ok := false
		for _, a := range revisionActions {
			ok = ok || a == f.Action
		}
		if !ok {
			return out, "action: " + clip.Quote(f.Action) + " is not one of " + strings.Join(revisionActions, ", ")
		}
		out.Action = f.Action
	}
	var from, to time.Time
	var err error
	if f.From != "" {
		if from, err = time.Parse(time.DateOnly, f.From); err != nil {
			return out, "from: " + clip.Quote(f.From) + " is not a date (YYYY-MM-DD)"
		}
		out.Since = from.Format(time.RFC3339)
	}
	if f.To != "" {
		if to, err = time.Parse(time.DateOnly, f.To); err != nil {
			return out, "to: " + clip.Quote(f.To) + " is not a date (YYYY-MM-DD)"
		}
		out.Until = to.AddDate(0, 0, 1).Format(time.RFC3339) // the whole day
	}
	if f.From != "" && f.To != "" && to.Before(from) {
		return out, "to: " + f.To + " is before from: " + f.From
	}
	return out, ""
}

// url is the page of the filter starting below revision before (0: the newest).
func (f revisionFilterForm) url(before int64) string {
	v := url.Values{}
	for _, kv := range [][2]string{{"class", f.Class}, {"keyname", f.Keyname}, {"author", f.Author},
		{"action", f.Action}, {"from", f.From}, {"to", f.To}} {
		if kv[1] != "" {
			v.Set(kv[0], kv[1])
		}
	}
	if before > 0 {
		v.Set("before", strconv.FormatInt(before, 10))
	}
	if len(v) == 0 {
		return "/data/private/revision/"
	}
	return "/data/private/revision/?" + v.Encode()
}

// readableClasses are the classes the class filter suggests: the schemas whose
// revisions the user may read, and _schema and _permission with their permissions.
func (c *Console) readableClasses(ctx context.Context, auth *model.Auth, allowed func(string) bool) []string {
	var out []string
	for _, cls := range []string{"_schema", "_permission"} {
		if allowed(cls) {
			out = append(out, cls)
		}
	}
	names, err := c.db.SchemaNames(ctx)
	if err != nil {
		c.log.Error("list schemas", "error", err)
		return out
	}
	for _, n := range names {
		if allowed(n) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
