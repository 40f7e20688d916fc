package console

import (
	"html/template"
	"strings"
)

// detailHTML renders a detail page's content (what detail.html wrote: the head with
// its actions, the fields, a user's effective permissions, what refers here and the
// revisions) in one builder, as the list's rows are (htmlrows.go): every value
// escaped as html/template escapes it in its place, so the bytes are the template's.
func detailHTML(d *detailData, title, csrf string) template.HTML {
	var b strings.Builder
	b.Grow(4096 + len(d.FieldRows) + len(d.RevisionRows))
	w := b.WriteString
	esc := func(s string) { writeEscaped(&b, s) }
	in := d.Instance
	w("\n\n<div class=\"head\">\n  <h1>")
	esc(title)
	w(` <small>`)
	writeLink(&b, d.ListURL)
	esc(d.Schema.Keyname)
	w(`</a></small>`)
	if !in.IsEnabled {
		w(` <span class="badge">disabled</span>`)
	}
	w("</h1>\n  <div class=\"actions\">\n    ")
	if d.CanUpdate {
		w("<a class=\"button\" id=\"edit\" href=\"?do=edit\">Edit</a>\n    <form method=\"post\" action=\"?do=")
		if in.IsEnabled {
			w("disable")
		} else {
			w("enable")
		}
		w("\" class=\"inline\">\n      <input type=\"hidden\" name=\"csrf\" value=\"")
		esc(csrf)
		w("\">\n      <button type=\"submit\" id=\"toggle\">")
		if in.IsEnabled {
			w("Disable")
		} else {
			w("Enable")
		}
		w("</button>\n    </form>")
	}
	w("\n    ")
	if d.CanRename {
		w(`<a class="button" id="rename" href="?do=rename">Rename</a>`)
	}
	w("\n    ")
	if d.CanPassword {
		w(`<a class="button" id="password" href="?do=password">Set password</a>`)
	}
	w("\n    ")
	if d.CanDelete {
		w(`<a class="button danger" id="delete" href="?do=delete">Delete</a>`)
	}
	w("\n  </div>\n</div>\n<div class=\"scroll-x\"><table class=\"fields\" id=\"fields\">\n  <tr><th>Keyname</th><td id=\"v-keyname\">")
	writeWords(&b, in.Keyname)
	w("</td></tr>\n  <tr><th>Display name</th><td id=\"v-displayname\">")
	writeWords(&b, in.Displayname)
	w("</td></tr>\n  ")
	w(string(d.FieldRows))
	w("\n  <tr><th>Created</th><td>")
	esc(in.CreatedAt)
	w("</td></tr>\n  <tr><th>Updated</th><td>")
	esc(in.UpdatedAt)
	w("</td></tr>\n</table></div>\n")
	if d.IsUser {
		writeEffective(&b, d)
	}
	w("\n<section class=\"section\" id=\"referenced-by\">\n  <h2>Referenced by</h2>\n  ")
	for _, g := range d.ReferencedBy {
		writeRefGroup(&b, &g)
	}
	if len(d.ReferencedBy) == 0 {
		w(`<p class="meta">Nothing refers to this instance.</p>`)
	}
	w("\n</section>\n<section class=\"section\" id=\"revisions\">\n  <h2>Revisions</h2>\n  ")
	if len(d.Revisions) > 0 {
		w("\n  <div class=\"scroll-x\"><table class=\"grid\"><thead><tr><th>When</th><th>Action</th><th>Author</th><th>Changes (old → new)</th></tr></thead><tbody>\n  ")
		w(string(d.RevisionRows))
		w("\n  </tbody></table></div>\n  ")
	} else {
		w(`<p class="meta">No revisions recorded.</p>`)
	}
	w("\n</section>\n\n")
	return template.HTML(b.String())
}

// writeEffective writes a user's effective permissions: every one, or each with the
// role and group it comes from.
func writeEffective(b *strings.Builder, d *detailData) {
	w := b.WriteString
	w("\n<section class=\"section\" id=\"effective\">\n  <h2>Effective permissions</h2>\n  ")
	if d.AllPerms {
		w(`<p><strong>Every permission</strong> (the login admin or a member of role_admin).</p>`)
	}
	w("\n  ")
	switch {
	case len(d.Origins) > 0:
		w("\n  <div class=\"scroll-x\"><table class=\"grid\"><thead><tr><th>Permission</th><th>Role</th><th>Via group</th></tr></thead><tbody>\n  ")
		for _, o := range d.Origins {
			w("<tr><td>")
			writeEscaped(b, o.Permission)
			w("</td><td>")
			writeLink(b, o.RoleLink)
			writeEscaped(b, o.Role)
			w("</a></td><td>")
			if o.Via != "" {
				writeLink(b, o.ViaLink)
				writeEscaped(b, o.Via)
				w("</a>")
			} else {
				w("direct member")
			}
			w("</td></tr>")
		}
		w("\n  </tbody></table></div>\n  ")
	case !d.AllPerms:
		w(`<p>No permissions.</p>`)
	}
	w("\n</section>\n")
}

// writeRefGroup writes one schema's group of what refers here: its count, its
// fields (each linking to the list filtered to it), the referrers it names.
func writeRefGroup(b *strings.Builder, g *refGroup) {
	w := b.WriteString
	w(`<div class="refgroup" data-schema="`)
	writeEscaped(b, g.Classname)
	w("\">\n    <h3>")
	writeEscaped(b, g.Title)
	w(` <small>`)
	writeEscaped(b, g.Classname)
	w(`</small> <span class="count" data-count="`)
	writeEscaped(b, g.Classname)
	w(`">`)
	writeEscaped(b, num(g.Count))
	w("</span></h3>\n    <p class=\"meta\">")
	for i, f := range g.Fields {
		if i > 0 {
			w(" · ")
		}
		w(`<a href="`)
		writeURL(b, f.ListURL)
		w(`" data-field="`)
		writeEscaped(b, f.Field)
		w(`">`)
		writeEscaped(b, num(f.Count))
		w(" by ")
		writeEscaped(b, f.Label)
		w("</a>")
	}
	w("</p>\n    <ul>")
	for _, it := range g.Items {
		w("<li>")
		writeLink(b, link(it.Classname, it.Keyname))
		writeEscaped(b, it.Classname)
		w(" ")
		writeEscaped(b, it.Keyname)
		w("</a> (")
		writeEscaped(b, it.Field)
		w(")</li>")
	}
	if g.More != 0 {
		w(`<li class="meta">and `)
		writeEscaped(b, num(g.More))
		w(" more: see the list above</li>")
	}
	w("</ul>\n  </div>")
}
