package store_test

import (
	"context"
	"testing"

	"dataservice/store"
	"dataservice/store/model"
)

func TestPipelineLookups(t *testing.T) {
	t.Parallel()
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
		if store.ErrorCode(err) != model.ENotFound || store.ErrorMessage(err) != "pipeline not found" {
			t.Fatalf("%s: got %v, want not found \"pipeline not found\"", name, err)
		}
	}
}

// TestPipelineContentOnUpdate: an update through the apply path (the console's) checks
// a pipeline's content as a load does: an invalid rule list is refused naming the
// rule's position and nothing changes; the older `tasks:` form is stored unwrapped.
func TestPipelineContentOnUpdate(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	ctx := context.Background()
	mustLoad(t, db, `
- {classname: _pipeline, keyname: tidy, content: "- field_lower: ['', name]"}
`, store.LoadOptions{})
	sch, err := db.Schema(ctx, "_pipeline")
	if err != nil {
		t.Fatal(err)
	}
	old, err := db.Instance(ctx, "_pipeline", "tidy")
	if err != nil {
		t.Fatal(err)
	}
	update := func(content string) error {
		next := *old
		next.Data = map[string]any{"content": content}
		_, err := db.Apply(ctx, store.Write{Schema: sch, Old: old, New: &next, Action: "update"},
			store.ApplyOptions{Auth: userAuth("p_pipeline_admin")})
		return err
	}
	err = update("- field_lower: ['', name]\n- field_shout: ['', name]\n")
	if got, want := store.ErrorMessage(err), `content: rule 2: unknown rule "field_shout"`; got != want {
		t.Fatalf("invalid content: got %q (%v), want %q", got, err, want)
	}
	if in, _ := db.Instance(ctx, "_pipeline", "tidy"); in.Data["content"] != "- field_lower: ['', name]" {
		t.Fatalf("refused update changed the content: %q", in.Data["content"])
	}
	if err := update("tasks:\n  - field_upper: ['', name]\n"); err != nil {
		t.Fatalf("older form: %v", err)
	}
	if in, _ := db.Instance(ctx, "_pipeline", "tidy"); in.Data["content"] != "- field_upper: ['', name]\n" {
		t.Fatalf("older form stored as %q, want the flat list", in.Data["content"])
	}
}
