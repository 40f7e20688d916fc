package store_test

import (
	"testing"

	"dataservice/store"
)

// TestHexipKeynameOnlyDerivesTheAddress: an ipam_ip entry naming only its hex keyname
// gets the dotted address as displayname, created or updated alike.
func TestHexipKeynameOnlyDerivesTheAddress(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	res := mustLoad(t, db, "- {classname: ipam_ip, keyname: c0a8010a, hostname: gw}", store.LoadOptions{})
	if got, want := counts(res), "created=1 updated=0 unchanged=0 deleted=0 enabled=0 disabled=0 skipped=0 errors=0"; got != want {
		t.Fatalf("counts %s, want %s", got, want)
	}
	in := instance(t, db, "ipam_ip", "c0a8010a")
	if got, want := in.Displayname, "192.168.1.10"; got != want {
		t.Fatalf("displayname %q, want %q", got, want)
	}
	res = mustLoad(t, db, "- {classname: ipam_ip, keyname: c0a8010a, hostname: gw}", store.LoadOptions{})
	if got, want := res.Unchanged, 1; got != want {
		t.Fatalf("reload: unchanged %d, want %d (%s)", got, want, counts(res))
	}
}
