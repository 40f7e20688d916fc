package store_test

import (
	"strings"
	"testing"

	"dataservice/store"
	"dataservice/store/model"
)

// TestRenameRefusedWhenItRewritesUnwritableSchemas: a cascading rename that would
// rewrite references held by instances of a schema the caller may not update is
// refused and changes nothing; without such references it goes through.
func TestRenameRefusedWhenItRewritesUnwritableSchemas(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, `
- {classname: _permission, keyname: p_locked_update}
- {classname: _schema, keyname: place}
- {classname: _schema, keyname: locked, p_update: p_locked_update, at: {dataformat: schema, dataformat_ext: place}}
- {classname: place, keyname: p1}
- {classname: place, keyname: p2}
- {classname: locked, keyname: l1, at: p1}
`, store.LoadOptions{})
	auth := userAuth("p_data_update", "p_data_read", "p_keyname_rename")
	rename := func(from, to string) error {
		s, err := db.Schema(t.Context(), "place")
		if err != nil {
			t.Fatal(err)
		}
		old := instance(t, db, "place", from)
		next := *old
		next.Keyname = to
		_, err = db.Apply(t.Context(), store.Write{Schema: s, Old: old, New: &next, Action: model.ActionUpdate}, store.ApplyOptions{Auth: auth})
		return err
	}
	err := rename("p1", "p1new")
	if store.ErrorCode(err) != model.EForbidden || !strings.Contains(store.ErrorMessage(err), "would rewrite references in locked") {
		t.Fatalf("rename of a referenced place: %v, want forbidden", err)
	}
	instance(t, db, "place", "p1")
	if got := instance(t, db, "locked", "l1").Data["at"]; got != "p1" {
		t.Fatalf("reference rewritten: %v", got)
	}
	if err := rename("p2", "p2new"); err != nil {
		t.Fatalf("rename of an unreferenced place: %v", err)
	}
}
