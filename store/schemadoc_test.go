package store_test

import (
	"context"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"dataservice/store"
	"dataservice/store/model"
)

var yamlBlockRE = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// TestSchemaDocExamples loads every YAML example of docs/schemas.md, in page order, into
// one database: an example starting with "# refused: TEXT" must fail with an error
// naming TEXT and load nothing, every other must load without an error. Then it checks
// what the page says the examples did.
func TestSchemaDocExamples(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/schemas.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := yamlBlockRE.FindAllStringSubmatch(string(raw), -1)
	if len(blocks) < 20 {
		t.Fatalf("found only %d YAML examples in docs/schemas.md", len(blocks))
	}
	db := newTestDB(t)
	refused := 0
	for i, b := range blocks {
		doc := b[1]
		first, _, _ := strings.Cut(doc, "\n")
		if want, ok := strings.CutPrefix(first, "# refused: "); ok {
			refused++
			res := load(t, db, doc, store.LoadOptions{})
			if res.Errors == 0 || res.Loaded() != 0 {
				t.Fatalf("example %d was not refused (%+v):\n%s", i+1, res, doc)
			}
			found := false
			for _, m := range res.Messages {
				found = found || strings.Contains(m.Message, want)
			}
			if !found {
				t.Fatalf("example %d: no error names %q: %+v", i+1, want, res.Messages)
			}
			continue
		}
		if res := load(t, db, doc, store.LoadOptions{}); res.Errors != 0 {
			t.Fatalf("example %d: %+v\n%s", i+1, res.Messages, doc)
		}
	}
	if refused < 10 {
		t.Fatalf("only %d refused examples", refused)
	}

	ctx := context.Background()
	srv1 := instance(t, db, "server", "srv-1")
	for k, want := range map[string]any{
		"position":   "A3", // kept as stored when the field became an int
		"hostname":   "srv-1.example.org",
		"checked_at": "2024-03-01T09:30:00",
		"units":      int64(2),
		"virtual":    false,
		"tags":       []any{"prod", "gpu"},
		"status":     "production",
	} {
		if got := srv1.Data[k]; !reflect.DeepEqual(got, want) {
			t.Errorf("srv-1 %s = %#v, want %#v", k, got, want)
		}
	}
	if _, ok := srv1.Data["rack_units"]; ok {
		t.Error("srv-1, created before rack_units, got its default")
	}
	if got := instance(t, db, "server", "srv-4").Data["rack_units"]; got != int64(1) {
		t.Errorf("srv-4 rack_units = %#v, want the default 1", got)
	}
	if h, _ := srv1.Data["bmc_password"].(string); !model.IsSecretHash(h) {
		t.Errorf("bmc_password stored as %q, not as a hash", h)
	}
	const withSecret = "- {classname: server, keyname: srv-5, hostname: srv-5, asset_tag: AT-5, bmc_password: correct-horse-battery}"
	mustLoad(t, db, withSecret, store.LoadOptions{})
	if res := mustLoad(t, db, withSecret, store.LoadOptions{}); res.Unchanged != 1 {
		t.Errorf("loading the same secret again: %+v", res)
	}
	sch, err := db.Schema(ctx, "server")
	if err != nil {
		t.Fatal(err)
	}
	if sch.Field("notes") != nil {
		t.Error("the notes field is still defined")
	}
	if n := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'server' AND data ->> 'notes' IS NOT NULL"); n != 0 {
		t.Errorf("%d servers still hold notes", n)
	}
	if got := db.InstanceDoc(ctx, sch, srv1).Vals["site_city"]; got != "Paris" {
		t.Errorf("external site_city = %#v", got)
	}
	if in := instance(t, db, "mgmt_address", "0a01000b"); in.Displayname != "10.1.0.11" {
		t.Errorf("hexip instance's displayname %q", in.Displayname)
	}
	if _, err := db.Schema(ctx, "vault"); !store.IsNotFound(err) {
		t.Errorf("vault after its deletion: %v", err)
	}
}
