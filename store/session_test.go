package store_test

import (
	"context"
	"testing"
	"time"

	"dataservice/store"
	"dataservice/store/model"
)

func TestSessions(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	ctx := context.Background()
	lim := store.SessionLimits{Idle: 30 * time.Minute, Absolute: 2 * time.Hour}
	now := fixedNow
	db.Now = func() time.Time { return now }

	token, s, err := db.CreateSession(ctx, 7, "alice", "127.0.0.1", lim)
	if err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM sessions WHERE token_hash = ?", token); n != 0 {
		t.Fatal("the token itself is stored")
	}
	got, err := db.Session(ctx, token, lim)
	if err != nil || got.ID != s.ID || got.Login != "alice" || got.UserID != 7 || got.CSRF == "" || got.CSRF == token {
		t.Fatalf("Session: %+v, %v", got, err)
	}
	if _, err := db.Session(ctx, token+"x", lim); !store.IsNotFound(err) {
		t.Fatalf("wrong token: %v", err)
	}

	// Requests every 20 minutes keep it alive until the absolute limit.
	for i := 0; i < 5; i++ {
		now = now.Add(20 * time.Minute)
		if _, err := db.Session(ctx, token, lim); err != nil {
			t.Fatalf("after %d requests: %v", i+1, err)
		}
	}
	now = now.Add(20 * time.Minute) // 2h after sign-in
	if _, err := db.Session(ctx, token, lim); !store.IsNotFound(err) {
		t.Fatalf("past the absolute limit: %v", err)
	}
	if n := queryInt(t, db, "SELECT count(*) FROM sessions"); n != 0 {
		t.Fatalf("expired session kept: %d rows", n)
	}

	// Idle limit.
	token, _, _ = db.CreateSession(ctx, 7, "alice", "", lim)
	now = now.Add(31 * time.Minute)
	if _, err := db.Session(ctx, token, lim); !store.IsNotFound(err) {
		t.Fatalf("past the idle limit: %v", err)
	}

	// Ending every session of a user.
	t1, _, _ := db.CreateSession(ctx, 7, "alice", "", lim)
	t2, _, _ := db.CreateSession(ctx, 8, "bob", "", lim)
	if err := db.DeleteUserSessions(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Session(ctx, t1, lim); !store.IsNotFound(err) {
		t.Fatalf("alice's session survived: %v", err)
	}
	if _, err := db.Session(ctx, t2, lim); err != nil {
		t.Fatalf("bob's session ended: %v", err)
	}
}

func TestPermissionOriginsAndReferences(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	ctx := context.Background()
	mustLoad(t, db, `
- {classname: _user, keyname: carol}
- {classname: _group, keyname: ops, users: [carol]}
- {classname: _group, keyname: all_staff, subgroups: [ops]}
- {classname: _role, keyname: readers, permissions: [p_data_access, p_data_read], subgroups: [all_staff]}
- {classname: _role, keyname: writers, permissions: [p_data_update], users: [carol]}
- {classname: _schema, keyname: site, name: {dataformat: string}}
- {classname: _schema, keyname: rack, site: {dataformat: schema, dataformat_ext: site}, spare: {dataformat: schema, dataformat_ext: site, cardinal_max: 0}}
- {classname: site, keyname: paris}
- {classname: site, keyname: lyon}
- {classname: rack, keyname: r1, site: paris}
- {classname: rack, keyname: r2, site: lyon, spare: [lyon, paris]}
`, store.LoadOptions{})
	all, origins, err := db.PermissionOrigins(ctx, "carol")
	if err != nil || all {
		t.Fatalf("origins: all=%v err=%v", all, err)
	}
	want := []store.PermissionOrigin{
		{Permission: "p_data_access", Role: "readers", Via: "all_staff"},
		{Permission: "p_data_read", Role: "readers", Via: "all_staff"},
		{Permission: "p_data_update", Role: "writers"},
	}
	if len(origins) != len(want) {
		t.Fatalf("origins: %+v", origins)
	}
	for i := range want {
		if origins[i] != want[i] {
			t.Fatalf("origin %d: %+v, want %+v", i, origins[i], want[i])
		}
	}
	refs, err := db.ReferencedBy(ctx, "site", "paris", 10)
	if err != nil || len(refs) != 2 || refs[0].Keyname != "r1" || refs[0].Field != "site" || refs[1].Keyname != "r2" || refs[1].Field != "spare" {
		t.Fatalf("referenced by: %+v, %v", refs, err)
	}
	revs, err := db.Revisions(ctx, "rack", "r2", 5)
	if err != nil || len(revs) != 1 || revs[0].Action != "create" || revs[0].After == "" {
		t.Fatalf("revisions: %+v, %v", revs, err)
	}
}

func TestListInstancesSort(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	ctx := context.Background()
	mustLoad(t, db, `
- {classname: _schema, keyname: box, size: {dataformat: int}, secret_code: {dataformat: secret}}
- {classname: box, keyname: b, displayname: Zed, size: 2}
- {classname: box, keyname: c, displayname: Amy, size: 10}
- {classname: box, keyname: a, displayname: Max, size: 1}
`, store.LoadOptions{})
	sch, err := db.Schema(ctx, "box")
	if err != nil {
		t.Fatal(err)
	}
	for sort, want := range map[string]string{"": "bca", "id": "bca", "keyname": "abc", "-keyname": "cba",
		"displayname": "cab", "size": "abc", "-size": "cba"} {
		res, err := db.ListInstances(ctx, sch, store.ListQuery{Limit: 2, Offset: 1, Sort: sort})
		if err != nil {
			t.Fatalf("sort %q: %v", sort, err)
		}
		got := ""
		for _, in := range res.Instances {
			got += in.Keyname
		}
		if got != want[1:] {
			t.Fatalf("sort %q, page 2 of size 2 from offset 1: %q, want %q", sort, got, want[1:])
		}
	}
	for _, bad := range []string{"nope", "secret_code", "size; DROP TABLE instances", "-"} {
		if _, err := db.ListInstances(ctx, sch, store.ListQuery{Limit: 2, Sort: bad}); store.ErrorCode(err) != model.EInvalid {
			t.Fatalf("sort %q: %v", bad, err)
		}
	}
}
