package server_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadStreamRefusalsChangeNothing: a load body is checked entry by entry as it
// arrives and loaded only once it is whole and valid. Bodies cut short, ending in
// garbage, over the size limit while streaming, or a large YAML body that cannot be
// read item by item are refused and write nothing; a YAML block sequence over the
// 8 MiB bound of a whole parse loads. No temporary file is left beside the database.
func TestLoadStreamRefusalsChangeNothing(t *testing.T) {
	t.Parallel()
	e := newLoadEnv(t, envOptions{NoRunner: true, MaxBody: 12 << 20})
	count := func() string { return e.queryString("SELECT count(*) FROM instances WHERE keyname LIKE 'st%'") }
	note := strings.Repeat("n", 2000)
	var big strings.Builder // a streamable YAML body of more than 8 MiB
	items := 0
	for big.Len() <= 8<<20+1<<19 {
		fmt.Fprintf(&big, "- classname: server\n  keyname: st%05d\n  hostname: %s\n", items, note)
		items++
	}
	var js strings.Builder
	js.WriteString("[")
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&js, `{"classname": "server", "keyname": "st%05d"},`, i)
	}
	cases := []struct {
		name, body string
		status     int
		want       string
	}{
		{"JSON cut short", js.String() + `{"classname": "ser`, 400, "body: invalid YAML/JSON"},
		{"JSON with trailing garbage", strings.TrimSuffix(js.String(), ",") + "] }{", 400, "body: invalid YAML/JSON"},
		{"YAML cut inside an item", "- classname: server\n  keyname: st1\n- classname: server\n  keyname: [st2\n", 400, "body: invalid YAML/JSON"},
		{"YAML ending in binary garbage", "- classname: server\n  keyname: st1\n\x00\xff\xfe- \x01\n", 400, "body: invalid YAML/JSON"},
		{"large YAML with a broken last item", big.String() + "- classname: server\n  keyname: [st\n", 413,
			fmt.Sprintf("body: a load body over 8 MiB must be JSON, or YAML that is read item by item"+
				": a block sequence whose items start with \"- \" at column 0, share no anchors and are at most 8 MiB each; "+
				"this one is not (item %d: invalid YAML/JSON: yaml: line %d: did not find expected ',' or ']')", items+1, 3*items+1)},
		{"large YAML with an alias to another item", "- &a {classname: server, keyname: st0}\n- *a\n" + big.String(), 413,
			"this one is not (item 2: invalid YAML/JSON: yaml: unknown anchor (name not shown) referenced"},
		{"over the size limit while streaming", big.String() + big.String(), 413, "request body too large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post("/api/load/", e.loader, []byte(tc.body))
			var reply struct{ Error string }
			json.Unmarshal(r.body, &reply)
			if r.status != tc.status || !strings.Contains(reply.Error, tc.want) {
				t.Fatalf("status %d, want %d containing %q: %.400s", r.status, tc.status, tc.want, r.body)
			}
			if got := count(); got != "0" {
				t.Fatalf("a refused load wrote %s instances", got)
			}
		})
	}
	res := decodeLoad(t, e.post("/api/load/", e.loader, []byte(big.String())))
	if res.Created != items || res.Errors != 0 || count() != fmt.Sprint(items) {
		t.Fatalf("a %d MiB YAML block sequence: %+v, %s stored, want %d", big.Len()>>20, res, count(), items)
	}
	if got := e.fieldOf("server", fmt.Sprintf("st%05d", items-1), "hostname"); got != note {
		t.Fatalf("last item's hostname: %.20s…", got)
	}
	// Dry run: the same counts, nothing written.
	res = decodeLoad(t, e.post("/api/load/?dryrun=1&action=delete", e.loader, []byte(big.String())))
	if res.Deleted != items || !res.DryRun || count() != fmt.Sprint(items) {
		t.Fatalf("dry-run delete: %+v, %s stored", res, count())
	}
	left, err := filepath.Glob(filepath.Join(e.db.TempDir(), ".dataservice-load-*"))
	if err != nil || len(left) != 0 {
		t.Fatalf("temporary files left where bodies are spooled: %v %v", left, err)
	}
}
