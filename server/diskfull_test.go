package server_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"dataservice/internal/testkit"
)

// TestLoadBodySpoolOnAFullDisk: a load body too large to stay in memory is spooled to
// a file beside the database; when that file cannot be written for lack of space, the
// reply is 507 with the disk-full message naming the spool directory (not 500
// "internal error"), and nothing is loaded. Once space is freed the same body loads.
// The disk is a small filesystem made for the test.
func TestLoadBodySpoolOnAFullDisk(t *testing.T) {
	testkit.SQLiteOnly(t, "bodies are spooled beside the database file, on the small filesystem that holds it; "+
		"with PostgreSQL they go to the system's temporary directory and the database's disk is the server's")
	t.Parallel()
	dir := testkit.SmallFS(t, 16<<20)
	e := newEnv(t, envOptions{NoRunner: true, Dir: dir})
	e.load(`[{classname: _schema, keyname: box, note: {dataformat: string}}]`)

	// About 2 MiB of JSON: more than a body kept in memory (1 MiB).
	var b strings.Builder
	b.WriteString("[")
	const n = 10000
	for i := range n {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `{"classname": "box", "keyname": "b%05d", "note": %q}`, i, strings.Repeat("x", 160))
	}
	b.WriteString("]")
	body := []byte(b.String())

	testkit.EmptyWAL(t, filepath.Join(dir, "server.db"))
	ballast := filepath.Join(dir, "ballast")
	testkit.FillDisk(t, ballast, 0)
	r := e.post("/api/load/", adminCred, body)
	wantError(t, r, http.StatusInsufficientStorage, "disk full: no space left on the filesystem holding the load body spooled in "+
		dir+"; free space there (or move the file to a larger filesystem), then retry")
	if got := e.queryString("SELECT count(*) FROM instances WHERE classname = 'box'"); got != "0" {
		t.Fatalf("%s boxes loaded from a body that could not be spooled", got)
	}

	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	if r := e.post("/api/load/", adminCred, body); r.status != http.StatusOK {
		t.Fatalf("the same load after space was freed: %d %s", r.status, r.body)
	}
	if got := e.queryString("SELECT count(*) FROM instances WHERE classname = 'box'"); got != fmt.Sprint(n) {
		t.Fatalf("%s boxes after the load, want %d", got, n)
	}
}
