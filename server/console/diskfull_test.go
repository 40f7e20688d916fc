package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"dataservice/internal/testkit"
)

// TestDiskFullPage: on a full disk, a form save and an import show a page that says
// the disk is full and names the database file, with status 507 Insufficient Storage,
// not "internal error"; nothing was written, and once space is freed the same save
// works. The disk is a small filesystem made for the test (the test is skipped, saying
// why, where one cannot be mounted).
func TestDiskFullPage(t *testing.T) {
	testkit.SQLiteOnly(t, "fills the small filesystem holding the database file and its WAL; PostgreSQL's disk is the database server's "+
		"(the PostgreSQL dialect maps its SQLSTATE 53100 to the same disk-full error)")
	t.Parallel()
	dir := testkit.SmallFS(t, 16<<20)
	e := newEnvIn(t, dir, "", nil)
	e.load(people)
	b := e.browser()
	b.signIn("admin", adminPassword)
	tok := b.csrf()
	dbFile := filepath.Join(dir, "server.db")

	testkit.EmptyWAL(t, dbFile)
	ballast := filepath.Join(dir, "ballast")
	testkit.FillDisk(t, ballast, 0)

	full := func(what string, p page) {
		t.Helper()
		want(t, p, http.StatusInsufficientStorage, "disk full", dbFile)
		lacks(t, p, "internal error")
		t.Logf("%s on a full disk: %d", what, p.status)
	}
	save := url.Values{"csrf": {tok}, "keyname": {"tokyo"}, "displayname": {"Tokyo"}, "is_enabled": {"true"},
		"location": {"Chiyoda"}}
	full("form save", b.post("/data/private/site/?do=new", save))

	var doc strings.Builder
	for i := range 300 {
		fmt.Fprintf(&doc, "- {classname: site, keyname: imp%03d, location: %q}\n", i, strings.Repeat("x", 100))
	}
	full("import", b.postMultipart("/data/private/import/", map[string]string{"csrf": tok, "do": "import", "text": doc.String()}, "", ""))

	if n := e.queryInt("SELECT count(*) FROM instances WHERE classname = 'site' AND (keyname = 'tokyo' OR keyname LIKE 'imp%')"); n != 0 {
		t.Fatalf("%d instances written on a full disk", n)
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	p := b.post("/data/private/site/?do=new", save)
	if p.status != http.StatusSeeOther {
		t.Fatalf("form save after space was freed: %d\n%s", p.status, p.body)
	}
}
