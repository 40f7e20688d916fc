package console

import (
	"bytes"
	"html/template"
	"math/rand/v2"
	"strings"
	"testing"

	"dataservice/store"
)

// hrefTemplate is the template writeLink stands for.
var hrefTemplate = template.Must(template.New("href").Parse(`<a href="{{.}}">`))

// templateLink is what html/template writes for u in an href attribute.
func templateLink(t *testing.T, u string) string {
	t.Helper()
	var b bytes.Buffer
	if err := hrefTemplate.Execute(&b, u); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// goLink is what writeLink writes for u.
func goLink(u string) string {
	var b strings.Builder
	writeLink(&b, u)
	return b.String()
}

// TestWriteLinkIsTemplates: writeLink writes, byte for byte, what html/template writes
// for <a href="{{.}}"> with the same string: keynames with spaces, +, &, quotes, <,
// non-ASCII, newlines, valid and invalid % sequences, schemes in several cases, every
// single byte, and random mixes of them.
func TestWriteLinkIsTemplates(t *testing.T) {
	urls := []string{
		"", "/", "/data/private/host/a b/", "/data/private/host/a+b/", "/data/private/host/a&b/?x=1&y=2",
		`/data/private/host/"quoted"/`, "/data/private/host/it's/", "/data/private/host/<script>alert(1)</script>/",
		"/data/private/host/ünï/", "/data/private/host/日本/", "/data/private/host/line\nbreak/", "tab\there", "cr\rlf",
		"%41%2f%2F", "%", "%4", "%zz", "%g0", "100%", "a%2", "%%41", "%e9", "%C3%A9",
		"javascript:alert(1)", "JavaScript:alert(1)", "JAVASCRIPT:alert(1)", " javascript:alert(1)", "\tjavascript:alert(1)",
		"java\tscript:alert(1)", "java\nscript:x", "vbscript:x", "data:text/html,<b>x</b>", "javascript%3Aalert(1)",
		"http://example.org/a b", "HTTPS://example.org/?q=a+b&c=d#frag", "mailto:someone@example.org", "MailTo:x",
		"httpſ:x", "ftp://example.org/", "?a:b", "#a:b", "/a:b", "a/b:c", "./javascript:x", "?q=javascript:x",
		"(x)", "!#$*,;=@[]~-._", "`{|}^\\", "\x00", "\x7f", "\xff", "\xc3", "\u2028", "\ufeff", "{{.}}", "&#58;", "&amp;",
		"/data/private/host/%22%3E%3Cscript%3E/", "/data/private/tgt/a_b/c+d%3Fe%23f&g/", "/data/private/host/?search=a b&x=ü",
	}
	for c := range 256 {
		urls = append(urls, string([]byte{byte(c)}), "/x"+string([]byte{byte(c)})+"y/", "%4"+string([]byte{byte(c)}))
	}
	pieces := []string{"a", "Z", "9", "é", "日", " ", "<", ">", "&", "'", `"`, "+", "\x00", ":", "/", "javascript:",
		"JaVaScRiPt:", " javascript:", "http:", "https:", "mailto:", "data:", "?", "#", "%", "%2", "%2f", "%zz", "\n", "\t",
		"`", "=", "(", ")", "\u2028", "\ufeff", "\xff", "&#58;", "~", "[", "]", "\\"}
	r := rand.New(rand.NewPCG(26, 1))
	for range 20000 {
		var b strings.Builder
		for range r.IntN(7) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		urls = append(urls, b.String())
	}
	failed := 0
	for _, u := range urls {
		if want, got := templateLink(t, u), goLink(u); got != want {
			if failed++; failed <= 20 {
				t.Errorf("%q:\n html/template %q\n writeLink     %q", u, want, got)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d URLs differ", failed, len(urls))
	}
}

// The templates the Go-rendered fragments stand for, with the same white space.
const (
	sidebarTemplate = `{{range .}}
      <h3>{{.Name}}</h3>
      {{range .Entries}}<a href="{{.URL}}">{{.Displayname}}</a>{{end}}{{end}}`
	fieldsTemplate = `{{range .}}
  <tr><th title="{{.Name}}">{{.Label}}</th><td id="v-{{.Name}}">{{range $i, $c := .Cells}}{{if $i}}, {{end}}{{if $c.Link}}<a href="{{$c.Link}}">{{words $c.Text}}</a>{{else}}<span class="pre">{{words $c.Text}}</span>{{end}}{{end}}</td></tr>{{end}}`
	revisionsTemplate = `{{range .}}<tr><td><a href="/data/private/revision/{{.ID}}/" title="diff and restore">{{.CreatedAt}}</a></td><td>{{.Action}}</td><td>{{.Author}}</td><td>{{range .Changes}}<div><code>{{.Key}}</code>: <del>{{words .Old}}</del> → <ins>{{words .New}}</ins></div>{{end}}</td></tr>{{end}}`
)

// execute renders text with v through html/template.
func execute(t *testing.T, text string, v any) string {
	t.Helper()
	tm := template.Must(template.New("x").Funcs(template.FuncMap{"words": words}).Parse(text))
	var b bytes.Buffer
	if err := tm.Execute(&b, v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestGoFragmentsAreTemplates: the sidebar, a detail page's fields and its revisions,
// rendered in Go, are byte for byte what the templates they replace write, for values
// holding markup, quotes, +, &, NUL, schemes, % sequences, white space and non-ASCII.
func TestGoFragmentsAreTemplates(t *testing.T) {
	pieces := []string{"a", "é", " ", "<", ">", "&", "'", `"`, "+", "\x00", ":", "/", "javascript:", "JaVaScRiPt:",
		" javascript:", "\tjavascript:", "http:", "data:", "?", "#", "%", "%zz", "%2F", "\n", "`", "=", "{{", "\u2028",
		"\ufeff", "mailto:", "vbscript:", "java\tscript:", "&#58;", "averyveryverylongtoken/with/slashes"}
	r := rand.New(rand.NewPCG(1, 2))
	str := func() string {
		var b strings.Builder
		for range r.IntN(6) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		return b.String()
	}
	failed := 0
	for range 3000 {
		secs := []navSection{{Name: str(), Entries: []homeEntry{{URL: str(), Displayname: str()}, {URL: str(), Displayname: str()}}}}
		fields := []detailField{{Name: str(), Label: str(), Cells: []cell{{Text: str(), Link: str()}, {Text: str()}}}}
		revs := []revisionRow{{Revision: store.Revision{ID: r.Int64N(100), CreatedAt: str(), Action: str(), Author: str()},
			Changes: []change{{Key: str(), Old: str(), New: str()}}}}
		for _, c := range []struct{ name, want, got string }{
			{"sidebar", execute(t, sidebarTemplate, secs), string(sidebarHTML(secs))},
			{"fields", execute(t, fieldsTemplate, fields), string(fieldsHTML(fields))},
			{"revisions", execute(t, revisionsTemplate, revs), string(revisionsHTML(revs))},
		} {
			if c.got != c.want {
				if failed++; failed <= 10 {
					t.Errorf("%s:\n template %q\n Go       %q", c.name, c.want, c.got)
				}
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d fragments differ", failed)
	}
}
