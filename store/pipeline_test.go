package store_test

import (
	"context"
	"testing"

	"dataservice/store"
)

func TestPipelineLookups(t *testing.T) {
	db := newTestDB(t)
	ctx := context.Background()
	mustLoad(t, db, `
- {classname: _pipeline, keyname: gated, content: "- field_noop: ''", run_permission: p_special}
`, store.LoadOptions{})
	list, err := db.Pipelines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(list), 2; got != want {
		t.Fatalf("pipelines: got %d, want %d", got, want)
	}
	if got, want := list[0].Keyname+","+list[1].Keyname, "bulk_delete_disabled,gated"; got != want {
		t.Fatalf("pipelines in id order: got %s, want %s", got, want)
	}
	if list[0].RunPermission != nil {
		t.Fatalf("bulk_delete_disabled run_permission: got %q, want nil", *list[0].RunPermission)
	}
	if got := list[1].RunPermission; got == nil || *got != "p_special" {
		t.Fatalf("gated run_permission: got %v, want p_special", got)
	}
	byName, err := db.PipelineByName(ctx, "gated")
	if err != nil {
		t.Fatal(err)
	}
	byID, err := db.PipelineByID(ctx, byName.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := byID.Keyname, "gated"; got != want {
		t.Fatalf("by id: got %s, want %s", got, want)
	}
	if got, want := byID.Content, "- field_noop: ''"; got != want {
		t.Fatalf("content: got %q, want %q", got, want)
	}
	for name, err := range map[string]error{
		"missing name": func() error { _, err := db.PipelineByName(ctx, "nope"); return err }(),
		"missing id":   func() error { _, err := db.PipelineByID(ctx, 99999); return err }(),
		"id of another class": func() error {
			_, err := db.PipelineByID(ctx, instance(t, db, "_user", "admin").ID)
			return err
		}(),
	} {
		if store.ErrorCode(err) != store.ENotFound || store.ErrorMessage(err) != "pipeline not found" {
			t.Fatalf("%s: got %v, want not found \"pipeline not found\"", name, err)
		}
	}
}
