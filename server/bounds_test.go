package server_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestLoadEntriesBounded: more entries than the server's bound is a 413 naming the
// bound, for JSON (streamed), YAML and CSV bodies, and nothing is written.
func TestLoadEntriesBounded(t *testing.T) {
	t.Parallel()
	e := newLoadEnv(t, envOptions{NoRunner: true, MaxEntries: 10})
	var js, ym, csv strings.Builder
	js.WriteString("[")
	csv.WriteString("keyname\n")
	for i := 0; i < 11; i++ {
		if i > 0 {
			js.WriteString(",")
		}
		fmt.Fprintf(&js, `{"classname":"server","keyname":"cap%d"}`, i)
		fmt.Fprintf(&ym, "- {classname: server, keyname: cap%d}\n", i)
		fmt.Fprintf(&csv, "cap%d\n", i)
	}
	js.WriteString("]")
	wantError(t, e.post("/api/load/", e.loader, []byte(js.String())), 413,
		"body: more than 10 entries in one request; split the load")
	wantError(t, e.post("/api/load/", e.loader, []byte(ym.String())), 413,
		"body: more than 10 entries in one request; split the load")
	wantError(t, e.post("/api/rawfile/?schema=server", e.rawfile, []byte(csv.String())), 413,
		"more than 10 rows in one request; split the file")
	if got := e.queryString("SELECT count(*) FROM instances WHERE keyname LIKE 'cap%'"); got != "0" {
		t.Fatalf("instances written by refused loads: %s", got)
	}
	// Exactly the bound loads.
	ten := strings.Replace(js.String(), `,{"classname":"server","keyname":"cap10"}`, "", 1)
	o := object(t, e.post("/api/load/", e.loader, []byte(ten)), 200)
	if got := num(t, o["created"]); got != 10 {
		t.Fatalf("created: got %d, want 10", got)
	}
}

// TestLoadJSONStreamKeepsShape: a JSON body decoded as a stream gives the same
// entries as the YAML parser: key order, numbers, nested values, duplicate keys.
func TestLoadJSONStreamKeepsShape(t *testing.T) {
	t.Parallel()
	e := newLoadEnv(t, envOptions{NoRunner: true})
	body := `[{"classname":"server","keyname":"js1","displayname":"x","displayname":"JS one"},` +
		`{"classname":"server","keyname":"js2","is_enabled":false}, 3]`
	o := object(t, e.post("/api/load/", e.loader, []byte(body)), 200)
	if got, want := fmt.Sprint(o["created"], " ", o["errors"]), "2 1"; got != want {
		t.Fatalf("created errors: got %s, want %s (%v)", got, want, o)
	}
	if got := e.queryString("SELECT displayname FROM instances WHERE keyname = 'js1'"); got != "JS one" {
		t.Fatalf("duplicate key: got displayname %q, want the last value", got)
	}
	if got := e.queryString("SELECT is_enabled FROM instances WHERE keyname = 'js2'"); got != "0" {
		t.Fatalf("is_enabled false: got %s", got)
	}
}

// TestLoadErrorMessagesBounded: a load reports the first 100 error messages and
// counts every error.
func TestLoadErrorMessagesBounded(t *testing.T) {
	t.Parallel()
	e := newLoadEnv(t, envOptions{NoRunner: true})
	var b strings.Builder
	b.WriteString("[")
	for i := 0; i < 250; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"classname":"no_such_class","keyname":"k"}`)
	}
	b.WriteString("]")
	o := object(t, e.post("/api/load/", e.loader, []byte(b.String())), 200)
	if got := num(t, o["errors"]); got != 250 {
		t.Fatalf("errors: got %d, want 250", got)
	}
	if got := len(o["error_messages"].([]any)); got != 100 {
		t.Fatalf("error_messages listed: got %d, want 100", got)
	}
}
