package console_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestListEmptyStates: an empty schema, a search matching nothing and a page past the
// end each say so and offer the way back; counts carry thousands separators.
func TestListEmptyStates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(people)
	var doc strings.Builder
	doc.WriteString("- {classname: _schema, keyname: box, displayname: Boxes, size: {dataformat: int}}\n- {classname: _schema, keyname: crate, displayname: Crates}\n")
	for i := range 1234 {
		fmt.Fprintf(&doc, "- {classname: box, keyname: b%04d, size: %d}\n", i, i)
	}
	e.load(doc.String())
	w := e.browser()
	w.signIn("writer", "writer-pass-1")
	r := e.browser()
	r.signIn("reader", "reader-pass-1")

	p := w.get("/data/private/crate/")
	want(t, p, 200, `id="empty"`, "Crates has no instances yet.", `href="?do=new" id="empty-new"`)
	lacks(t, p, `id="list"`)
	p = r.get("/data/private/crate/")
	want(t, p, 200, "Crates has no instances yet.")
	lacks(t, p, `id="empty-new"`) // the reader may not create

	p = w.get("/data/private/box/?search=nothing-like-this&view=_all")
	want(t, p, 200, "0 found", "Nothing matches <strong>nothing-like-this</strong>", `href="?view=_all" id="clear-search"`)
	lacks(t, p, `id="list"`)

	p = w.get("/data/private/box/?page=9&size=200&search=b0")
	want(t, p, 200, "Page 9 is past the end: there are 5 pages.", `href="?search=b0" id="first-page"`)
	lacks(t, p, `id="list"`)
	p = w.get("/data/private/box/?page=2&search=b0001")
	want(t, p, 200, "Page 2 is past the end: there is 1 page.")

	p = w.get("/data/private/box/?size=1")
	want(t, p, 200, "1,234 found · page 1 of 1,234", `id="list"`, "b0000")
	lacks(t, p, `id="empty"`)
	want(t, w.get("/data/private/"), 200, `<td class="num">1,234</td>`)
}

// TestReferencedByGroups: a detail page groups what refers to it by schema, with the
// counts and a link to the list filtered to the referrers; schemas the user may not
// read are left out, count and all. An IPv4 value links to its IPAM record.
func TestReferencedByGroups(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(people)
	e.load(`
- {classname: _schema, keyname: vault, p_read: p_vault_read, site: {dataformat: schema, dataformat_ext: site}}
- {classname: _schema, keyname: cable, displayname: Cables, site: {displayname: Site, dataformat: schema, dataformat_ext: site}, far_site: {displayname: Far end, dataformat: schema, dataformat_ext: site}}
- {classname: rack, keyname: r3, site: paris, units: 40, mgmt: 10.9.0.7}
- {classname: cable, keyname: c1, site: paris, far_site: lyon}
- {classname: cable, keyname: c2, site: lyon, far_site: paris}
- {classname: cable, keyname: c3, site: paris, far_site: paris}
- {classname: vault, keyname: v1, site: paris}
- {classname: ipam_subnet, keyname: 10.9.0.0/24}
- {classname: ipam_ip, displayname: 10.9.0.7, hostname: r3-mgmt}
`)
	b := e.browser()
	b.signIn("writer", "writer-pass-1")
	p := b.get("/data/private/site/paris/")
	want(t, p, 200, `data-schema="rack"`, `data-count="rack">2<`, `data-schema="cable"`, `data-count="cable">4<`,
		`href="/data/private/rack/?field=site&amp;value=paris" data-field="site">2 by Site</a>`,
		`href="/data/private/cable/?field=site&amp;value=paris" data-field="site">2 by Site</a>`,
		`href="/data/private/cable/?field=far_site&amp;value=paris" data-field="far_site">2 by Far end</a>`,
		`href="/data/private/cable/c3/"`)
	lacks(t, p, `data-schema="vault"`, "/data/private/vault/")
	if strings.Index(p.body, `data-schema="cable"`) > strings.Index(p.body, `data-schema="rack"`) {
		t.Fatal("the groups are not in schema order")
	}

	p = b.get("/data/private/cable/?field=far_site&value=paris")
	want(t, p, 200, `id="filter"`, "<strong>Far end</strong> is <code>paris</code>", "2 found", `href="/data/private/cable/c2/"`, `href="/data/private/cable/c3/"`,
		`href="?" id="clear-filter"`, "export=csv&amp;field=far_site")
	lacks(t, p, `href="/data/private/cable/c1/"`)
	p = b.get("/data/private/cable/?field=far_site&value=nowhere")
	want(t, p, 200, "Nothing here refers to <code>nowhere</code>")
	want(t, b.get("/data/private/cable/?field=nosuch&value=paris"), http.StatusBadRequest, "no field")

	// The IPv4 value links to its ipam_ip record; one without a record (collected, then
	// deleted) is plain text.
	p = b.get("/data/private/rack/r3/")
	want(t, p, 200, `id="v-mgmt"><a href="/data/private/ipam_ip/0a090007/">10.9.0.7</a>`)
	e.load(`- {classname: rack, keyname: r1, mgmt: 10.77.0.8, _action: update}`)
	e.load(`- {classname: ipam_ip, keyname: 0a4d0008, _action: delete}`)
	p = b.get("/data/private/rack/r1/")
	want(t, p, 200, `<span class="pre">10.77.0.8</span>`)
	lacks(t, p, "/data/private/ipam_ip/")

	// Without read on ipam_ip, no link (its existence is ipam_ip's data).
	e.load(`- {classname: _schema, keyname: ipam_ip, p_read: p_vault_read, _action: update}`)
	p = b.get("/data/private/rack/r3/")
	want(t, p, 200, `<span class="pre">10.9.0.7</span>`)
	lacks(t, p, "/data/private/ipam_ip/")
}
