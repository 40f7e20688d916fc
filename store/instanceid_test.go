package store_test

import (
	"strconv"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// TestInstanceIDsNeverReused: deleting the instance with the highest id (a user) and
// creating another gives the new one a fresh id, in the same process, after reopening
// the file, and in a file made before ids were tracked whose tasks still name the
// deleted user's id.
func TestInstanceIDsNeverReused(t *testing.T) {
	t.Parallel()
	path := testkit.NewAddress(t, "ids.db")
	db := testkit.Open(t, path, testkit.Options{IgnoreCloseError: true})
	testkit.LoadBuiltins(t, db)
	mustLoad(t, db, `{classname: _user, keyname: carol}`, store.LoadOptions{})
	carol := instance(t, db, "_user", "carol").ID
	if max := queryInt(t, db, "SELECT max(id) FROM instances"); int64(max) != carol {
		t.Fatalf("carol has id %d, the highest is %d: the test needs her to be the newest row", carol, max)
	}
	exec(t, db, `INSERT INTO tasks(handle, kind, owner_type, owner_id, status, created_at)
		VALUES('h1', 'pipeline', 'api', ?, 'queued', '')`, strconv.FormatInt(carol, 10))
	newUser := func(db *store.DB, login string, deleted int64) {
		t.Helper()
		mustLoad(t, db, `{classname: _user, keyname: `+login+`}`, store.LoadOptions{})
		id := instance(t, db, "_user", login).ID
		if id <= deleted {
			t.Fatalf("%s got id %d, not above the deleted user's %d", login, id, deleted)
		}
		if n := queryInt(t, db, "SELECT count(*) FROM tasks WHERE owner_type = 'api' AND owner_id = ?", strconv.FormatInt(id, 10)); n != 0 {
			t.Fatalf("%s (id %d) owns %d task(s) of the deleted user", login, id, n)
		}
	}

	mustLoad(t, db, `{classname: _user, keyname: carol, _action: delete}`, store.LoadOptions{})
	newUser(db, "dave", carol)

	// After reopening the file.
	dave := instance(t, db, "_user", "dave").ID
	mustLoad(t, db, `{classname: _user, keyname: dave, _action: delete}`, store.LoadOptions{})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = testkit.Open(t, path, testkit.Options{IgnoreCloseError: true})
	newUser(db, "erin", dave)
	erin := instance(t, db, "_user", "erin").ID
	db.Close()

	// A file from before the id tracking (layout 6), where the newest user was deleted
	// and its task kept: the first open above it gives ids above the task's owner.
	// PostgreSQL's layout tracks ids from its first step: no such database exists.
	if testkit.Postgres() {
		return
	}
	testkit.ExecFile(t, path, append(layoutsAfter(5),
		"DELETE FROM instances WHERE classname = '_user' AND keyname = 'erin'",
		"INSERT INTO tasks(handle, kind, owner_type, owner_id, status, created_at) VALUES('h2', 'pipeline', 'api', '"+
			strconv.FormatInt(erin, 10)+"', 'queued', '')")...,
	)
	db = testkit.Open(t, path, testkit.Options{})
	newUser(db, "frank", erin)
}
