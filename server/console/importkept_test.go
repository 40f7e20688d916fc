package console_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

var keptRE = regexp.MustCompile(`name="kept" value="([^"]+)"`)

// kept reads the token of the kept file from an import page.
func kept(t *testing.T, p page) string {
	t.Helper()
	m := keptRE.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("the page names no kept file:\n%s", p.body)
	}
	return m[1]
}

// brokenYAML has a YAML error on line 3 (an unclosed flow mapping).
const brokenYAML = `# two racks
- {classname: rack, keyname: k1, site: paris, units: 10}
- {classname: rack, keyname: k2, site: paris, units: 12
- {classname: rack, keyname: k3, site: paris, units: 14}
`

// TestImportKeepsTheFile: a file uploaded for Check is kept on the server for the next
// Check or Import; its text is shown with the line of the error marked and put in the
// text box, to be fixed there; Import uses the kept file without a new upload and then
// forgets it; another session may not name it.
func TestImportKeepsTheFile(t *testing.T) {
	t.Parallel()
	e := toolEnv(t)
	b, tok := signedIn(e, "importer")
	racks := func() int { return e.queryInt("SELECT count(*) FROM instances WHERE classname = 'rack'") }
	before := racks()

	// A YAML error: the line is marked, the text is in the box, the file is kept.
	p := b.postMultipart("/data/private/import/", map[string]string{"csrf": tok, "do": "check", "format": "yaml"}, "racks.yml", brokenYAML)
	want(t, p, http.StatusBadRequest, `id="import-error"`, `id="doc-lines"`,
		`<li class="bad" aria-current="true" data-line="3"><span class="ln">3</span>- {classname: rack, keyname: k2, site: paris, units: 12</li>`,
		`id="kept-note"`, "<strong>racks.yml</strong>", "Fix the marked line in the Document box below",
		"- {classname: rack, keyname: k3, site: paris, units: 14}\n</textarea>")
	token := kept(t, p)

	// Fixed in the box and checked again: the box's text is used, the file stays kept.
	fixed := strings.Replace(brokenYAML, "units: 12\n", "units: 99}\n", 1)
	p = b.postMultipart("/data/private/import/", map[string]string{"csrf": tok, "do": "check", "format": "yaml", "text": fixed,
		"kept": token, "kept_name": "racks.yml"}, "", "")
	want(t, p, 200, "Check: nothing was written (dry run)", `data-count="created">2<`, `data-count="errors">1<`,
		`<li class="bad" aria-current="true" data-line="3">`) // the entry out of bounds starts there
	if got := kept(t, p); got != token {
		t.Fatalf("the kept file changed on a Check of the box's text: %q, was %q", got, token)
	}

	// Another session names the token: refused, nothing read or written.
	other, otherTok := signedIn(e, "importer")
	p = other.postMultipart("/data/private/import/", map[string]string{"csrf": otherTok, "do": "import", "format": "yaml", "kept": token}, "", "")
	want(t, p, http.StatusForbidden, "belongs to another session")
	// (The file's text, not "k3" alone: the page's random CSRF token may hold those two letters.)
	lacks(t, p, "keyname: k3", `name="kept"`)

	// Import with the box emptied: the kept file as uploaded (its line 3 fails to parse).
	p = b.postMultipart("/data/private/import/", map[string]string{"csrf": tok, "do": "import", "format": "yaml", "kept": token, "kept_name": "racks.yml"}, "", "")
	want(t, p, http.StatusBadRequest, `data-line="3"`)
	if got := racks(); got != before {
		t.Fatalf("a refused import wrote: %d racks, was %d", got, before)
	}

	// A good file: checked, then imported without choosing it again; then forgotten.
	good := strings.Replace(brokenYAML, "units: 12\n", "units: 12}\n", 1)
	p = b.postMultipart("/data/private/import/", map[string]string{"csrf": tok, "do": "check", "format": "yaml", "kept": token}, "good.yml", good)
	want(t, p, 200, `data-count="created">3<`)
	lacks(t, p, `id="doc-lines"`)
	token2 := kept(t, p)
	if token2 == token {
		t.Fatal("a new upload kept the old token")
	}
	p = b.postMultipart("/data/private/import/", map[string]string{"csrf": tok, "do": "import", "format": "yaml", "kept": token2, "kept_name": "good.yml"}, "", "")
	want(t, p, 200, "Import: done", `data-count="created">3<`, "Imported from good.yml: the server no longer keeps it.")
	lacks(t, p, `name="kept"`, "not kept on the server")
	if got := racks(); got != before+3 {
		t.Fatalf("racks after Import: %d, want %d", got, before+3)
	}
	p = b.postMultipart("/data/private/import/", map[string]string{"csrf": tok, "do": "import", "format": "yaml", "kept": token2}, "", "")
	want(t, p, http.StatusBadRequest, "The file is gone")
	// The replaced first file is gone too.
	p = b.postMultipart("/data/private/import/", map[string]string{"csrf": tok, "do": "check", "format": "yaml", "kept": token}, "", "")
	want(t, p, http.StatusBadRequest, "The file is gone")
}

// TestImportKeepsFewFilesPerSession: a session keeps at most three files; a fourth
// upload forgets the oldest. Signing out forgets them all.
func TestImportKeepsFewFilesPerSession(t *testing.T) {
	t.Parallel()
	e := toolEnv(t)
	b, tok := signedIn(e, "importer")
	var tokens []string
	for i := range 4 {
		// Each in a fresh form (no kept token), as from four browser tabs.
		p := b.postMultipart("/data/private/import/", map[string]string{"csrf": tok, "do": "check", "format": "yaml"},
			"f.yml", "- {classname: site, keyname: s"+string(rune('a'+i))+"}\n")
		want(t, p, 200, `data-count="created">1<`)
		tokens = append(tokens, kept(t, p))
	}
	check := func(token string) page {
		return b.postMultipart("/data/private/import/", map[string]string{"csrf": tok, "do": "check", "format": "yaml", "kept": token}, "", "")
	}
	want(t, check(tokens[0]), http.StatusBadRequest, "The file is gone")
	for _, k := range tokens[1:] {
		want(t, check(k), 200, `data-count="created">1<`)
	}
	b.post("/logout", map[string][]string{"csrf": {tok}})
	b.signIn("importer", "importer-pass-1")
	tok = b.csrf()
	want(t, check(tokens[3]), http.StatusBadRequest, "The file is gone")
}

// TestImportKeepsABinaryFile: a Latin-1 CSV is kept but not put in the text box (it is
// no UTF-8 text); Import uses it as uploaded.
func TestImportKeepsABinaryFile(t *testing.T) {
	t.Parallel()
	e := toolEnv(t)
	b, tok := signedIn(e, "importer")
	file := "keyname;location\nnice;Caf\xe9 du Port\n"
	fields := map[string]string{"csrf": tok, "do": "check", "format": "csv", "schema": "site", "keyfield": "keyname", "delimiter": ";", "encoding": "iso-8859-1"}
	p := b.postMultipart("/data/private/import/", fields, "sites.csv", file)
	want(t, p, 200, `data-count="created">1<`, `id="kept-note"`, "Import uses it without choosing it again")
	lacks(t, p, "Caf")
	fields["do"], fields["kept"], fields["kept_name"] = "import", kept(t, p), "sites.csv"
	want(t, b.postMultipart("/data/private/import/", fields, "", ""), 200, "Import: done", `data-count="created">1<`)
	if got := e.queryInt("SELECT count(*) FROM instances WHERE classname = 'site' AND data ->> 'location' = 'Café du Port'"); got != 1 {
		t.Fatalf("the kept Latin-1 file's site: %d", got)
	}
}

// TestImportMarksCSVLines: in a CSV document the line a parse error names is marked,
// and so is the line each failed row starts on (a quoted cell may span lines, so a row
// is not its line).
func TestImportMarksCSVLines(t *testing.T) {
	t.Parallel()
	e := toolEnv(t)
	b, tok := signedIn(e, "importer")
	fields := map[string]string{"csrf": tok, "do": "check", "format": "csv", "schema": "rack", "keyfield": "keyname", "delimiter": ";"}

	fields["text"] = "keyname;site;units\nr1;paris;10\nr2;pa\"ris;12\nr3;paris;14\n"
	p := b.postMultipart("/data/private/import/", fields, "", "")
	want(t, p, http.StatusBadRequest, `id="import-error"`, "line 3",
		`<li class="bad" aria-current="true" data-line="3"><span class="ln">3</span>r2;pa&#34;ris;12</li>`)

	// Row 2 fails (units out of bounds); its quoted tag spans lines 3 and 4, so row 3
	// (also failing) starts on line 5.
	fields["text"] = "keyname;site;units;tags\nr1;paris;10;ok\nr2;paris;999;\"two\nlines\"\nr3;paris;-1;x\n"
	p = b.postMultipart("/data/private/import/", fields, "", "")
	want(t, p, 200, `data-count="errors">2<`,
		`<li class="bad" aria-current="true" data-line="3">`, `<li class="bad" aria-current="true" data-line="5">`)
	lacks(t, p, `<li class="bad" aria-current="true" data-line="2">`, `<li class="bad" aria-current="true" data-line="4">`)
}
