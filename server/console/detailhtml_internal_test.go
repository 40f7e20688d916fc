package console

import (
	"bytes"
	"html/template"
	"math/rand/v2"
	"strings"
	"testing"

	"dataservice/store"
	"dataservice/store/model"
)

// detailTemplate is the template detailHTML replaced, as it was.
const detailTemplate = `{{define "content"}}
{{with .Data}}
<div class="head">
  <h1>{{$.Title}} <small><a href="{{.ListURL}}">{{.Schema.Keyname}}</a></small>{{if not .Instance.IsEnabled}} <span class="badge">disabled</span>{{end}}</h1>
  <div class="actions">
    {{if .CanUpdate}}<a class="button" id="edit" href="?do=edit">Edit</a>
    <form method="post" action="?do={{if .Instance.IsEnabled}}disable{{else}}enable{{end}}" class="inline">
      <input type="hidden" name="csrf" value="{{$.CSRF}}">
      <button type="submit" id="toggle">{{if .Instance.IsEnabled}}Disable{{else}}Enable{{end}}</button>
    </form>{{end}}
    {{if .CanRename}}<a class="button" id="rename" href="?do=rename">Rename</a>{{end}}
    {{if .CanPassword}}<a class="button" id="password" href="?do=password">Set password</a>{{end}}
    {{if .CanDelete}}<a class="button danger" id="delete" href="?do=delete">Delete</a>{{end}}
  </div>
</div>
<div class="scroll-x"><table class="fields" id="fields">
  <tr><th>Keyname</th><td id="v-keyname">{{words .Instance.Keyname}}</td></tr>
  <tr><th>Display name</th><td id="v-displayname">{{words .Instance.Displayname}}</td></tr>
  {{.FieldRows}}
  <tr><th>Created</th><td>{{.Instance.CreatedAt}}</td></tr>
  <tr><th>Updated</th><td>{{.Instance.UpdatedAt}}</td></tr>
</table></div>
{{if .IsUser}}
<section class="section" id="effective">
  <h2>Effective permissions</h2>
  {{if .AllPerms}}<p><strong>Every permission</strong> (the login admin or a member of role_admin).</p>{{end}}
  {{if .Origins}}
  <div class="scroll-x"><table class="grid"><thead><tr><th>Permission</th><th>Role</th><th>Via group</th></tr></thead><tbody>
  {{range .Origins}}<tr><td>{{.Permission}}</td><td><a href="{{.RoleLink}}">{{.Role}}</a></td><td>{{if .Via}}<a href="{{.ViaLink}}">{{.Via}}</a>{{else}}direct member{{end}}</td></tr>{{end}}
  </tbody></table></div>
  {{else if not .AllPerms}}<p>No permissions.</p>{{end}}
</section>
{{end}}
<section class="section" id="referenced-by">
  <h2>Referenced by</h2>
  {{range .ReferencedBy}}<div class="refgroup" data-schema="{{.Classname}}">
    <h3>{{.Title}} <small>{{.Classname}}</small> <span class="count" data-count="{{.Classname}}">{{num .Count}}</span></h3>
    <p class="meta">{{range $i, $f := .Fields}}{{if $i}} · {{end}}<a href="{{$f.ListURL}}" data-field="{{$f.Field}}">{{num $f.Count}} by {{$f.Label}}</a>{{end}}</p>
    <ul>{{range .Items}}<li><a href="{{link .Classname .Keyname}}">{{.Classname}} {{.Keyname}}</a> ({{.Field}})</li>{{end}}{{if .More}}<li class="meta">and {{num .More}} more: see the list above</li>{{end}}</ul>
  </div>{{else}}<p class="meta">Nothing refers to this instance.</p>{{end}}
</section>
<section class="section" id="revisions">
  <h2>Revisions</h2>
  {{if .Revisions}}
  <div class="scroll-x"><table class="grid"><thead><tr><th>When</th><th>Action</th><th>Author</th><th>Changes (old → new)</th></tr></thead><tbody>
  {{.RevisionRows}}
  </tbody></table></div>
  {{else}}<p class="meta">No revisions recorded.</p>{{end}}
</section>
{{end}}
{{end}}
`

// TestDetailHTMLIsTemplate: a detail page's content rendered in Go is byte for byte
// what the template it replaced writes, for every combination of its parts (actions,
// a disabled instance, a user's permissions, referrers, revisions) and values holding
// markup, quotes, +, &, schemes, % sequences, white space and non-ASCII.
func TestDetailHTMLIsTemplate(t *testing.T) {
	tm := template.Must(template.New("detail").Funcs(funcs).Parse(detailTemplate))
	pieces := []string{"a", "é", " ", "<", ">", "&", "'", `"`, "+", "\x00", ":", "/", "javascript:", "http:", "?", "#",
		"%", "%zz", "%2F", "\n", "`", "=", "{{", "\u2028", "averyveryverylongtoken/with/slashes"}
	r := rand.New(rand.NewPCG(7, 26))
	str := func() string {
		var b strings.Builder
		for range r.IntN(5) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		return b.String()
	}
	flip := func() bool { return r.IntN(2) == 0 }
	failed := 0
	for range 2000 {
		in := &store.Instance{Keyname: str(), Displayname: str(), IsEnabled: flip(), CreatedAt: str(), UpdatedAt: str()}
		d := detailData{Schema: &model.Schema{Keyname: str()}, Instance: in, ListURL: str(), CanUpdate: flip(),
			CanDelete: flip(), CanRename: flip(), CanPassword: flip(), IsUser: flip(), AllPerms: flip(),
			FieldRows: template.HTML(str()), RevisionRows: template.HTML(str())}
		for range r.IntN(3) {
			d.Origins = append(d.Origins, originRow{Permission: str(), Role: str(), RoleLink: str(), Via: str(), ViaLink: str()})
		}
		for range r.IntN(3) {
			g := refGroup{Classname: str(), Title: str(), Count: r.IntN(5000), More: r.IntN(3) * r.IntN(2000)}
			for range r.IntN(3) {
				g.Fields = append(g.Fields, refField{Field: str(), Label: str(), ListURL: str(), Count: r.IntN(2000)})
			}
			for range r.IntN(3) {
				g.Items = append(g.Items, store.Reference{Classname: str(), Keyname: str(), Field: str()})
			}
			d.ReferencedBy = append(d.ReferencedBy, g)
		}
		for range r.IntN(2) {
			d.Revisions = append(d.Revisions, revisionRow{})
		}
		title, csrf := str(), str()
		var want bytes.Buffer
		if err := tm.ExecuteTemplate(&want, "content", view{Title: title, CSRF: csrf, Data: d}); err != nil {
			t.Fatal(err)
		}
		if got := string(detailHTML(&d, title, csrf)); got != want.String() {
			if failed++; failed <= 3 {
				t.Errorf("template:\n%q\nGo:\n%q", want.String(), got)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d pages differ", failed)
	}
}
