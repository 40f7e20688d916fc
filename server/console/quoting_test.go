package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Messages quote at most about 150 bytes of what the client sent: an uploaded file's
// name (any length in a multipart header) and a revision filter's values are cut in
// the messages that name them.
func TestPagesQuoteHugeInputBounded(t *testing.T) {
	t.Parallel()
	e := toolEnv(t)
	b, tok := signedIn(e, "importer")
	name := strings.Repeat("N", 200_000) + ".csv"
	p := b.postMultipart("/data/private/import/", map[string]string{"csrf": tok, "do": "import"}, name, "- {classname: site, keyname: x}\n")
	want(t, p, http.StatusBadRequest, "looks like a CSV file")
	if n := strings.Count(p.body, "N"); n > 1000 {
		t.Fatalf("the import page repeats %d bytes of the file's name", n)
	}

	admin := e.browser()
	admin.signIn("admin", adminPassword)
	long := strings.Repeat("A", 20_000) // URLs stay under the bound of request headers
	for _, field := range []string{"action", "from", "to"} {
		p := admin.get("/data/private/revision/?" + url.Values{field: {long}}.Encode())
		if p.status != http.StatusOK && p.status != http.StatusBadRequest {
			t.Fatalf("revision filter %s: status %d", field, p.status)
		}
		// The form shows the value back in its field; the message quotes it cut.
		i := strings.Index(p.body, field+": &#34;")
		if i < 0 {
			t.Fatalf("revision filter %s: no message naming it:\n%.2000s", field, p.body)
		}
		msg, _, _ := strings.Cut(p.body[i:], "<")
		if len(msg) > 400 {
			t.Fatalf("revision filter %s: the message quotes %d bytes: %.300s...", field, len(msg), msg)
		}
	}
}
