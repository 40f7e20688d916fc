package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"dataservice/internal/clip"
	"dataservice/store"
	"dataservice/store/model"
)

// homeEntry is a `_home` entry: a dashboard tile and a sidebar link.
type homeEntry struct {
	Keyname, Displayname, Description, URL, Icon string
	Dashboard, Sidebar                           string
	Order                                        int
	Count                                        string
}

type navSection struct {
	Name    string
	Entries []homeEntry
}

// homeEntries lists the enabled `_home` entries auth may see (their permission), in
// order. Entries without a permission are shown to every signed-in user.
func (c *Console) homeEntries(ctx context.Context, auth *model.Auth) []homeEntry {
	var out []homeEntry
	// Every page's sidebar reads them: the store keeps them in memory until one changes.
	list, err := c.db.ClassInstances(ctx, "_home")
	if err != nil {
		c.log.Error("read dashboard entries", "error", err)
	}
	for _, in := range list {
		if !in.IsEnabled {
			continue
		}
		str := func(k string) string { s, _ := in.Data[k].(string); return s }
		if p := str("permission"); p != "" && !auth.Has(p) {
			continue
		}
		if t := toolOfURL(str("url")); t != nil && !t.allowed(auth) {
			continue // a tool the user may not open (it also needs p_data_access)
		}
		order, _ := strconv.Atoi(fmt.Sprint(in.Data["order"]))
		out = append(out, homeEntry{Keyname: in.Keyname, Displayname: in.Displayname, Description: str("description"),
			URL: str("url"), Icon: str("icon"), Dashboard: str("dashboard_section"), Sidebar: str("sidebar_section"), Order: order})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Order != out[j].Order {
			return out[i].Order < out[j].Order
		}
		return out[i].Keyname < out[j].Keyname
	})
	return out
}

// group groups entries by section (by sec), sections in the order of their first entry.
func group(list []homeEntry, sec func(homeEntry) string) []navSection {
	var out []navSection
	at := map[string]int{}
	for _, e := range list {
		s := sec(e)
		i, ok := at[s]
		if !ok {
			i = len(out)
			at[s] = i
			out = append(out, navSection{Name: s})
		}
		out[i].Entries = append(out[i].Entries, e)
	}
	return out
}

func (c *Console) sidebar(ctx context.Context, auth *model.Auth) []navSection {
	list := c.homeEntries(ctx, auth)
	linked := map[string]bool{}
	for _, e := range list {
		linked[e.URL] = true
	}
	list = append(list, toolLinks(auth, linked)...)
	list = append(list, c.automationLinks(ctx, auth, linked, true)...)
	return group(list, func(e homeEntry) string { return e.Sidebar })
}

// dashboardData is the dashboard: its tiles by section, and what failed.
type dashboardData struct {
	Sections []navSection
	Failures *failures
}

// dashboard: GET / — tiles the user may see, grouped by dashboard section, with counts.
func (c *Console) dashboard(w http.ResponseWriter, r *http.Request, q *req) {
	if r.URL.Path != "/" {
		c.errorPage(w, r, q, http.StatusNotFound, "not found")
		return
	}
	ctx := r.Context()
	list := c.homeEntries(ctx, q.auth)
	linked := map[string]bool{}
	for _, e := range list {
		linked[e.URL] = true
	}
	list = append(list, c.automationLinks(ctx, q.auth, linked, false)...)
	for i := range list {
		list[i].Count = c.tileCount(ctx, q.auth, list[i].URL)
	}
	d := dashboardData{Sections: group(list, func(e homeEntry) string { return e.Dashboard }), Failures: c.failuresFor(ctx, q.auth)}
	c.render(w, r, q, http.StatusOK, "dashboard", "Dashboard", d)
}

// tileCount is the count a tile shows: instances of the schema it points at, or the
// number of readable schemas for the data tile.
func (c *Console) tileCount(ctx context.Context, auth *model.Auth, u string) string {
	rest, ok := strings.CutPrefix(u, "/data/private/")
	if !ok || !auth.Has("p_data_access") {
		return ""
	}
	name := strings.Trim(rest, "/")
	if name == "" {
		groups, err := c.schemaGroups(ctx, auth, "", false)
		if err != nil {
			return ""
		}
		n := 0
		for _, g := range groups {
			n += len(g.Schemas)
		}
		return plural(n, "schema")
	}
	sch, err := c.db.Schema(ctx, name)
	if err != nil || !model.CanRead(auth, sch) {
		return ""
	}
	n, err := c.db.CountInstances(ctx, name)
	if err != nil {
		return ""
	}
	return plural(n, "instance")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return thousands(n) + " " + word + "s"
}

type schemaRow struct {
	Keyname, Displayname, Description string
	Count                             int
	Enabled                           bool
}

type schemaGroup struct {
	Page    string
	Schemas []schemaRow
}

// pageOf is the console page a schema is listed under: its `page` option, else the
// part of its keyname before the first underscore when the keyname has one (ipam_ip →
// ipam), "system" for built-in classes.
func pageOf(s *model.Schema) string {
	if p, ok := s.Options["page"].(string); ok && p != "" {
		return p
	}
	if strings.HasPrefix(s.Keyname, "_") {
		return "system"
	}
	if i := strings.IndexByte(s.Keyname, '_'); i > 0 {
		return s.Keyname[:i]
	}
	return "data"
}

// schemaGroups lists the schemas auth may read, grouped by page (only page `only`
// when set); counts are read when withCounts.
func (c *Console) schemaGroups(ctx context.Context, auth *model.Auth, only string, withCounts bool) ([]schemaGroup, error) {
	names, err := c.db.SchemaNames(ctx)
	if err != nil {
		return nil, err
	}
	byPage := map[string][]schemaRow{}
	for _, n := range names {
		sch, err := c.db.Schema(ctx, n)
		if err != nil {
			return nil, err
		}
		if !model.CanRead(auth, sch) {
			continue
		}
		p := pageOf(sch)
		if only != "" && p != only {
			continue
		}
		row := schemaRow{Keyname: sch.Keyname, Displayname: sch.Displayname, Description: sch.Description, Enabled: sch.IsEnabled}
		if withCounts {
			if row.Count, err = c.db.CountInstances(ctx, n); err != nil {
				return nil, err
			}
		}
		byPage[p] = append(byPage[p], row)
	}
	var out []schemaGroup
	for p, rows := range byPage {
		out = append(out, schemaGroup{Page: p, Schemas: rows})
	}
	sort.Slice(out, func(i, j int) bool {
		// Data pages first, the built-in classes last.
		if (out[i].Page == "system") != (out[j].Page == "system") {
			return out[j].Page == "system"
		}
		return out[i].Page < out[j].Page
	})
	return out, nil
}

// data dispatches /data/private/...: "/" the schemas, "/<tool>/..." a tool's routes,
// "/<page>/" a page of schemas (dataRoutes), "/<schema>/..." the schema's routes (the
// list, the create form, an instance's pages: schemaRoutes). Every page needs
// p_data_access, as the data API does; a tool's or schema's permission is checked
// before its route's method.
func (c *Console) data(w http.ResponseWriter, r *http.Request, q *req) {
	rest := q.ps.ByName("rest")
	if !strings.HasSuffix(rest, "/") {
		if r.Method == http.MethodGet {
			u := *r.URL
			u.Path += "/"
			http.Redirect(w, r, u.String(), http.StatusMovedPermanently)
			return
		}
		c.errorPage(w, r, q, http.StatusNotFound, "not found")
		return
	}
	if !q.auth.Has("p_data_access") {
		c.forbidden(w, r, q, "p_data_access")
		return
	}
	path := strings.TrimSuffix(strings.TrimPrefix(rest, "/"), "/")
	name, key, _ := strings.Cut(path, "/")
	if path == "" {
		if serve, ok := pick(c, w, r, q, dataRoutes, path); ok {
			serve(c, w, r, q)
		}
		return
	}
	if t := toolNamed(name); t != nil {
		if !t.allowed(q.auth) {
			c.forbidden(w, r, q, t.need(q.auth))
			return
		}
		t.serve(c, w, r, q, key)
		return
	}
	sch, err := c.db.Schema(r.Context(), name)
	if store.IsNotFound(err) && key == "" {
		if serve, ok := pick(c, w, r, q, dataRoutes, path); ok {
			serve(c, w, r, q)
		}
		return
	}
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	if !model.CanRead(q.auth, sch) {
		c.forbidden(w, r, q, model.ReadPermission(sch))
		return
	}
	if serve, ok := pick(c, w, r, q, schemaRoutes, key); ok {
		serve(c, w, r, q, sch)
	}
}

// schemas: GET /data/private/ (or a page of it, /data/private/<page>/) — schemas
// grouped by page with counts.
func (c *Console) schemas(w http.ResponseWriter, r *http.Request, q *req) {
	page := q.ps.ByName("page")
	groups, err := c.schemaGroups(r.Context(), q.auth, page, true)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	if page != "" && len(groups) == 0 {
		c.errorPage(w, r, q, http.StatusNotFound, fmt.Sprintf("There is no schema or page %s you may read.", clip.Quote(page)))
		return
	}
	title := "Data"
	if page != "" {
		title = page
	}
	c.render(w, r, q, http.StatusOK, "schemas", title, groups)
}

// link is the console URL of an instance.
func link(cls, key string) string {
	return "/data/private/" + url.PathEscape(cls) + "/" + escapeKey(key) + "/"
}

// escapeKey escapes a keyname for a path, keeping its slashes.
func escapeKey(key string) string {
	parts := strings.Split(key, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}
