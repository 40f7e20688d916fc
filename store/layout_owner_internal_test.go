package store

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// No owner gets a Table of store's own tables: every table the layout really creates
// (read back from a file the steps built, so the check cannot drift from the layout),
// the engine's shadow tables of the search index and its reserved names are refused.
func TestRegisterLayoutRefusesStoreTables(t *testing.T) {
	t.Parallel()
	ref, err := referenceSchema(context.Background(), latestVersion())
	if err != nil {
		t.Fatal(err)
	}
	owners, _ := ownedLayouts() // the owners' own tables (tests register tasks') are theirs
	var tables []string
	for _, o := range ref.want {
		if o.Type == "table" && !slices.Contains(owners, o.Name) {
			tables = append(tables, o.Name)
		}
	}
	for _, must := range []string{"instances", "revisions", "schemas", "schema_fields", "permissions", "instances_search_data"} {
		if !strings.Contains(" "+strings.Join(tables, " ")+" ", " "+must+" ") {
			t.Fatalf("reference tables %v lack %s", tables, must)
		}
	}
	refused := append(tables, "INSTANCES", "Revisions", "layout_versions", "instances_search_config",
		"sqlite_sequence", "sqlite_stat1", "", "tasks; DROP TABLE instances", "instances(id)", "1tasks")
	for _, name := range refused {
		if name == "" {
			continue // RegisterLayout's own check: needs an owner
		}
		if err := checkOwner(name); err == nil {
			t.Errorf("owner %q accepted, want refused", name)
		}
	}
	for _, name := range []string{"tasks", "jobs", "instance_notes", "search_cache"} {
		if err := checkOwner(name); err != nil {
			t.Errorf("owner %q refused: %v", name, err)
		}
	}

	t.Run("RegisterLayout panics with the reason and registers nothing", func(t *testing.T) {
		msg := func() (msg string) {
			defer func() { msg, _ = recover().(string) }()
			RegisterLayout("instances", "CREATE TABLE instances_x (id INTEGER)")
			return ""
		}()
		if !strings.Contains(msg, `owner "instances": instances is a table of the store's own layout`) {
			t.Fatalf("panic = %q, want the refusal of instances", msg)
		}
		if owners, _ := ownedLayouts(); slices.Contains(owners, "instances") {
			t.Fatalf("registered owners = %v, want no instances", owners)
		}
	})
}
