package console

import (
	"context"
	"html/template"
	"strconv"
	"strings"
	"sync"

	"dataservice/store"
	"dataservice/store/model"
)

// The parts of a page that repeat per row (a list's cells, a detail page's fields
// and revisions, the sidebar's links) are rendered here, into one builder, rather than
// by the templates: html/template makes a reflective call for each value it escapes,
// and a page of rows holds hundreds, which cost more than the rest of the page. The
// output is what the templates wrote: every value escaped for its place (text,
// quoted attribute, URL), words() for the values.

// listRows renders the list's rows: the first cell links to the instance, a reference
// cell to the instance it names, and a disabled instance's row is marked "off".
func (c *Console) listRows(ctx context.Context, auth *model.Auth, sch *model.Schema, cols []string, list []*store.Instance) template.HTML {
	if len(list) == 0 {
		return ""
	}
	var b strings.Builder
	b.Grow(len(list) * len(cols) * 48)
	for _, in := range list {
		doc := c.db.InstanceDocAs(ctx, auth, sch, in)
		if in.IsEnabled {
			b.WriteString("<tr>")
		} else {
			b.WriteString(`<tr class="off">`)
		}
		for i, col := range cols {
			cl := cellOf(sch, col, doc.Vals[col])
			if i == 0 {
				cl.Link = link(sch.Keyname, in.Keyname)
			}
			b.WriteString("<td>")
			if cl.Link != "" {
				writeLink(&b, cl.Link)
				writeWords(&b, cl.Text)
				b.WriteString("</a>")
			} else {
				writeWords(&b, cl.Text)
			}
			b.WriteString("</td>")
		}
		b.WriteString("</tr>\n")
	}
	return template.HTML(b.String())
}

// writeLink writes <a href="u"> exactly as html/template writes <a href="{{.}}"> for
// the string u (writeURL), so a link is the same bytes whether a template or this
// file renders it.
func writeLink(b *strings.Builder, u string) {
	b.WriteString(`<a href="`)
	writeURL(b, u)
	b.WriteString(`">`)
}

// writeURL writes u as html/template writes a plain string in a quoted URL attribute:
//   - a URL with a scheme other than http, https or mailto (javascript:...) is
//     replaced by "#ZgotmplZ" (safeURL);
//   - the rest is normalised: a byte is kept when it is an RFC 3986 unreserved
//     character (letters, digits, - . _ ~), a reserved one other than ' ( and )
//     (! # $ & * + , / : ; = ? @ [ ]), or a % that starts a valid escape (% and two
//     hex digits); every other byte (a space, a quote, <, a newline, each byte of a
//     non-ASCII character, a stray %) becomes %xx in lowercase hex;
//   - the result is escaped for the attribute: & as &amp; and + as &#43; (the only
//     kept bytes HTML gives a meaning there).
func writeURL(b *strings.Builder, u string) {
	if !safeURL(u) {
		b.WriteString("#ZgotmplZ")
		return
	}
	const hex = "0123456789abcdef"
	for i := 0; i < len(u); i++ {
		switch c := u[i]; {
		case c == '&':
			b.WriteString("&amp;")
		case c == '+':
			b.WriteString("&#43;")
		case urlKept(c) || (c == '%' && i+2 < len(u) && isHexDigit(u[i+1]) && isHexDigit(u[i+2])):
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
}

// urlKept reports whether URL normalisation keeps c as it is (writeURL): letters,
// digits, the unreserved - . _ ~ and the reserved ! # $ & * + , / : ; = ? @ [ ].
func urlKept(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!#$&*+,/:;=?@[]", c) >= 0
}

func isHexDigit(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// safeURL reports whether u may be written as a link (html/template's rule for a URL
// given as a string): it has no scheme (no colon, or a slash before the first colon),
// or its scheme is http, https or mailto, compared with Unicode case folding.
func safeURL(u string) bool {
	scheme, _, ok := strings.Cut(u, ":")
	if !ok || strings.Contains(scheme, "/") {
		return true
	}
	return strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https") || strings.EqualFold(scheme, "mailto")
}

// sidebarCache keeps rendered sidebars: a sidebar is made of the `_home` entries, the
// schemas and the tools a set of permissions reaches, all kept by the store at its
// cache stamp, so every page of users holding the same permissions shows the same one.
type sidebarCache struct {
	mu    sync.Mutex
	stamp store.CacheStamp
	html  map[string]template.HTML
}

// maxSidebars bounds the sidebars kept (one per distinct set of permissions).
const maxSidebars = 256

// sidebarFor is sidebarHTML(c.sidebar(ctx, auth)), from the cache when the store's
// cache stamp has not moved since it was rendered for the same permissions.
func (c *Console) sidebarFor(ctx context.Context, auth *model.Auth) template.HTML {
	stamp, err := c.db.CacheStamp(ctx)
	if err != nil {
		return sidebarHTML(c.sidebar(ctx, auth))
	}
	key := permissionsKey(auth)
	sc := &c.sidebars
	sc.mu.Lock()
	h, ok := sc.html[key]
	ok = ok && sc.stamp == stamp
	sc.mu.Unlock()
	if ok {
		return h
	}
	h = sidebarHTML(c.sidebar(ctx, auth))
	sc.mu.Lock()
	if sc.stamp != stamp || len(sc.html) >= maxSidebars {
		sc.stamp, sc.html = stamp, map[string]template.HTML{}
	}
	sc.html[key] = h
	sc.mu.Unlock()
	return h
}

// permissionsKey names what a sidebar depends on of auth: every permission, or the
// ones held and the ones denied.
func permissionsKey(auth *model.Auth) string {
	if auth == nil {
		return ""
	}
	var b strings.Builder
	if auth.All {
		b.WriteString("all")
	}
	for _, p := range auth.Perms {
		b.WriteString("\x00")
		b.WriteString(p)
	}
	b.WriteString("\x00\x00")
	for _, p := range auth.Deny {
		b.WriteString("\x00")
		b.WriteString(p)
	}
	return b.String()
}

// sidebarHTML renders the sidebar's sections: a heading and its links each.
func sidebarHTML(secs []navSection) template.HTML {
	var b strings.Builder
	for _, s := range secs {
		b.WriteString("\n      <h3>")
		writeEscaped(&b, s.Name)
		b.WriteString("</h3>\n      ")
		for _, e := range s.Entries {
			writeLink(&b, e.URL)
			writeEscaped(&b, e.Displayname)
			b.WriteString("</a>")
		}
	}
	return template.HTML(b.String())
}

// fieldsHTML renders a detail page's field rows: the label (the keyname as its
// title), then the values, links for references, separated by commas.
func fieldsHTML(fields []detailField) template.HTML {
	var b strings.Builder
	for _, f := range fields {
		b.WriteString("\n  <tr><th title=\"")
		writeEscaped(&b, f.Name)
		b.WriteString(`">`)
		writeEscaped(&b, f.Label)
		b.WriteString(`</th><td id="v-`)
		writeEscaped(&b, f.Name)
		b.WriteString(`">`)
		for i, c := range f.Cells {
			if i > 0 {
				b.WriteString(", ")
			}
			if c.Link != "" {
				writeLink(&b, c.Link)
				writeWords(&b, c.Text)
				b.WriteString("</a>")
			} else {
				b.WriteString(`<span class="pre">`)
				writeWords(&b, c.Text)
				b.WriteString("</span>")
			}
		}
		b.WriteString("</td></tr>")
	}
	return template.HTML(b.String())
}

// revisionsHTML renders a detail page's revision rows: when (linking to the diff),
// the action, the author and each changed key's old and new values.
func revisionsHTML(revs []revisionRow) template.HTML {
	var b strings.Builder
	for _, r := range revs {
		b.WriteString("<tr><td>")
		b.WriteString(`<a href="/data/private/revision/`)
		b.WriteString(strconv.FormatInt(r.ID, 10))
		b.WriteString(`/" title="diff and restore">`)
		writeEscaped(&b, r.CreatedAt)
		b.WriteString("</a></td><td>")
		writeEscaped(&b, r.Action)
		b.WriteString("</td><td>")
		writeEscaped(&b, r.Author)
		b.WriteString("</td><td>")
		for _, c := range r.Changes {
			b.WriteString("<div><code>")
			writeEscaped(&b, c.Key)
			b.WriteString("</code>: <del>")
			writeWords(&b, c.Old)
			b.WriteString("</del> → <ins>")
			writeWords(&b, c.New)
			b.WriteString("</ins></div>")
		}
		b.WriteString("</td></tr>")
	}
	return template.HTML(b.String())
}
