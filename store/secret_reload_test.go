package store_test

import (
	"testing"

	"dataservice/store"
	"dataservice/store/model"
)

// TestReloadingTheSameSecretChangesNothing: a plain password or key secret that
// verifies against the stored hash keeps the hash; a different one replaces it.
func TestReloadingTheSameSecretChangesNothing(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	doc := "- {classname: _user, login: carol, email: c@example.com, password: first-pass}\n"
	mustLoad(t, db, doc, store.LoadOptions{})
	hash := instance(t, db, "_user", "carol").Data["password"]
	res := mustLoad(t, db, doc, store.LoadOptions{})
	if got, want := counts(res), "created=0 updated=0 unchanged=1 deleted=0 enabled=0 disabled=0 skipped=0 errors=0"; got != want {
		t.Fatalf("reload of the same password: %s, want %s", got, want)
	}
	if got := instance(t, db, "_user", "carol").Data["password"]; got != hash {
		t.Fatalf("hash changed on an identical reload")
	}
	if got, want := queryInt(t, db, "SELECT count(*) FROM revisions WHERE classname = '_user' AND keyname = 'carol'"), 1; got != want {
		t.Fatalf("%d revisions, want %d (the create only)", got, want)
	}
	res = mustLoad(t, db, "- {classname: _user, login: carol, password: second-pass}\n", store.LoadOptions{})
	if got, want := res.Updated, 1; got != want {
		t.Fatalf("a new password: updated %d, want %d", got, want)
	}
	stored, _ := instance(t, db, "_user", "carol").Data["password"].(string)
	if !model.VerifySecret("second-pass", stored) || model.VerifySecret("first-pass", stored) {
		t.Fatalf("the stored hash is not the new password's")
	}
}
