package store_test

import (
	"context"
	"testing"

	"dataservice/store"
	"dataservice/store/model"
)

// TestSchemaCacheSeesOtherProcesses: a schema change committed through another handle
// on the same file (another process, e.g. a CLI load next to the server) is seen by a
// handle that cached the schema before.
func TestSchemaCacheSeesOtherProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db1 := newTestDB(t)
	mustLoad(t, db1, "- {classname: _schema, keyname: rack, height: {dataformat: int}}", store.LoadOptions{})
	s, err := db1.Schema(ctx, "rack")
	if err != nil || s.Field("height") == nil || s.Field("owner") != nil {
		t.Fatalf("first read: %v %+v", err, s)
	}
	db2, err := store.Open(ctx, db1.Path(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	mustLoad(t, db2, "- {classname: _schema, keyname: rack, owner: {dataformat: string}}", store.LoadOptions{})
	s, err = db1.Schema(ctx, "rack")
	if err != nil {
		t.Fatal(err)
	}
	if s.Field("owner") == nil {
		t.Fatalf("db1 still serves the schema cached before db2's change")
	}
	if again, _ := db1.Schema(ctx, "rack"); again != s {
		t.Fatalf("an unchanged schema is not served from the cache")
	}
}

// TestRequestScopeGeneration: inside a request scope the generation counter is read
// once, so another process's schema change made during the request is seen from the
// next request on; a change this process commits (the request's own) is seen at once.
func TestRequestScopeGeneration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db1 := newTestDB(t)
	mustLoad(t, db1, "- {classname: _schema, keyname: rack, height: {dataformat: int}}", store.LoadOptions{})
	db2, err := store.Open(ctx, db1.Path(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	req := db1.RequestScope(ctx)
	if _, err := db1.Instance(req, "rack", "none"); store.ErrorCode(err) != model.ENotFound {
		t.Fatalf("missing instance: %v", err)
	}
	if s, err := db1.Schema(req, "rack"); err != nil || s.Field("owner") != nil {
		t.Fatalf("first read: %v %+v", err, s)
	}
	mustLoad(t, db2, "- {classname: _schema, keyname: rack, owner: {dataformat: string}}", store.LoadOptions{})
	if s, _ := db1.Schema(req, "rack"); s.Field("owner") != nil {
		t.Fatalf("the request saw another process's change made after its first read")
	}
	if s, _ := db1.Schema(db1.RequestScope(ctx), "rack"); s.Field("owner") == nil {
		t.Fatalf("the next request does not see another process's change")
	}
	mustLoad(t, db1, "- {classname: _schema, keyname: rack, serial: {dataformat: string}}", store.LoadOptions{})
	if s, _ := db1.Schema(req, "rack"); s.Field("serial") == nil || s.Field("owner") == nil {
		t.Fatalf("the request does not see a change this process committed: %+v", s)
	}
	mustLoad(t, db1, "- {classname: rack, keyname: r1, height: 2}", store.LoadOptions{})
	in, err := db1.Instance(db1.RequestScope(ctx), "rack", "r1")
	if err != nil || in.Data["height"] != int64(2) || in.Keyname != "r1" || !in.IsEnabled {
		t.Fatalf("first read of a scope: %v %+v", err, in)
	}
}
