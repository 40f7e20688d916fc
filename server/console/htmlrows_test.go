package console_test

import (
	"regexp"
	"strings"
	"testing"
)

// The list, detail page and sidebar, rendered in Go, escape markup and refuse
// javascript: URLs in every stored value, and a link is the same bytes in the sidebar
// (Go) and on the dashboard's tile (a template).
func TestGoRenderedPagesEscape(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(`
- {classname: _schema, keyname: tgt, note: {dataformat: string}}
- {classname: _schema, keyname: host, note: {dataformat: string}, ref: {dataformat: schema, dataformat_ext: tgt}, url: {dataformat: string}, lst: {dataformat: string, cardinal_max: 0}}
- {classname: tgt, keyname: 'javascript:alert(1)'}
- {classname: tgt, keyname: '"><script>t1</script>'}
- {classname: tgt, keyname: 'a+c&d''ü%zz"<'}
- {classname: host, keyname: '"><script>k1</script>', displayname: '<img src=x onerror=d1>', note: "<script>n1</script>' onmouseover='x", ref: 'javascript:alert(1)', url: 'javascript:alert(2)', lst: ['<b>l1</b>', '" onclick="l2']}
- {classname: host, keyname: 'plain', ref: '"><script>t1</script>', note: '&lt;script&gt; amp'}
- {classname: host, keyname: 'odd', ref: 'a+c&d''ü%zz"<'}
- {classname: _home, keyname: evil1, displayname: '<script>h1</script>', url: 'javascript:alert(3)', sidebar_section: '<b>s1</b>', dashboard_section: 'D'}
- {classname: _home, keyname: evil2, displayname: 'h2', url: ' JAVASCRIPT:alert(4)', sidebar_section: 'S', dashboard_section: 'D'}
- {classname: _home, keyname: evil3, displayname: 'h3', url: "java\tscript:alert(5)", sidebar_section: 'S', dashboard_section: 'D'}
- {classname: _home, keyname: odd, displayname: 'odd', url: "/data/private/host/?search=a b+c&x=ü'%zz%41\"<", sidebar_section: 'S', dashboard_section: 'D'}
`)
	a := e.browser()
	a.signIn("admin", adminPassword)
	bad := regexp.MustCompile(`(?i)href="\s*j\s*a\s*v\s*a\s*s\s*c\s*r\s*i\s*p\s*t\s*:`)
	for _, path := range []string{"/data/private/host/", "/data/private/host/?search=script", "/data/private/host/plain/",
		"/data/private/host/%22%3E%3Cscript%3Ek1%3C%2Fscript%3E/", "/data/private/tgt/javascript:alert(1)/", "/"} {
		p := a.get(path)
		if p.status != 200 {
			t.Fatalf("GET %s: %d\n%.800s", path, p.status, p.body)
		}
		lacks(t, p, "<script>k1", "<script>n1", "<script>t1", "<img src=x", "<b>l1", `" onclick="l2`, "' onmouseover='x", "<script>h1", "<b>s1")
		if m := bad.FindString(p.body); m != "" {
			t.Errorf("GET %s: %s", path, m)
		}
		if strings.Contains(path, "plain") && !strings.Contains(p.body, "&amp;lt;script&amp;gt; amp") {
			t.Errorf("GET %s: the entity text is not shown as typed", path)
		}
	}

	// The same URL, normalised as html/template does, in the sidebar and on the tile.
	const odd = `href="/data/private/host/?search=a%20b&#43;c&amp;x=%c3%bc%27%25zz%41%22%3c"`
	dash := a.get("/")
	if n := strings.Count(dash.body, odd); n != 2 {
		t.Errorf("the dashboard holds %s %d times, want 2 (its tile and the sidebar)", odd, n)
	}
	if n := strings.Count(dash.body, `href="#ZgotmplZ"`); n != 6 {
		t.Errorf("the dashboard holds %d refused links, want 6 (3 tiles, 3 sidebar links)", n)
	}
	// A reference's link on the list (Go) and the detail page (Go) is the URL normalised.
	const ref = `href="/data/private/tgt/a&#43;c&amp;d%27%C3%BC%25zz%22%3C/"`
	for _, path := range []string{"/data/private/host/", "/data/private/host/odd/"} {
		if p := a.get(path); !strings.Contains(p.body, ref) {
			t.Errorf("GET %s lacks %s", path, ref)
		}
	}
}

// The sidebar is kept per set of permissions until the data it shows changes: a user
// is never shown another's links, and a role given more permissions and a new or
// disabled `_home` entry show at the next page.
func TestSidebarKeptPerPermissions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.load(`
- {classname: _user, keyname: ann, password: ann-pass-12}
- {classname: _user, keyname: bob, password: bob-pass-12}
- {classname: _role, keyname: readers, permissions: [p_data_access, p_data_read], users: [ann, bob]}
- {classname: _role, keyname: secret_readers, permissions: [p_secret_read], users: []}
- {classname: _home, keyname: secret_tile, displayname: SecretTile, url: /data/private/, sidebar_section: S, permission: p_secret_read}
`)
	ann, bob := e.browser(), e.browser()
	ann.signIn("ann", "ann-pass-12")
	bob.signIn("bob", "bob-pass-12")
	sidebar := func(b *browser) string {
		t.Helper()
		p := b.get("/")
		want(t, p, 200)
		i, j := strings.Index(p.body, `id="sidebar"`), strings.Index(p.body, "</nav>")
		if i < 0 || j < i {
			t.Fatalf("no sidebar:\n%.1500s", p.body)
		}
		return p.body[i:j]
	}
	if s := sidebar(ann); strings.Contains(s, "SecretTile") || sidebar(bob) != s {
		t.Fatalf("ann and bob hold the same permissions and see the same sidebar, without SecretTile:\n%s", s)
	}
	e.load(`{classname: _role, keyname: secret_readers, permissions: [p_secret_read], users: [ann]}`)
	if !strings.Contains(sidebar(ann), "SecretTile") || strings.Contains(sidebar(bob), "SecretTile") {
		t.Fatal("SecretTile is ann's (p_secret_read), not bob's")
	}
	e.load(`{classname: _home, keyname: new_tile, displayname: NewTile, url: /data/private/, sidebar_section: S}`)
	if !strings.Contains(sidebar(bob), "NewTile") || !strings.Contains(sidebar(ann), "NewTile") {
		t.Fatal("a new _home entry is not in the sidebar")
	}
	e.load(`{classname: _home, keyname: new_tile, displayname: NewTile, url: /data/private/, sidebar_section: S, is_enabled: false}`)
	if strings.Contains(sidebar(bob), "NewTile") {
		t.Fatal("a disabled _home entry is still in the sidebar")
	}
}
