package store_test

import (
	"context"
	"testing"

	"dataservice/store"
)

// TestSchemaCacheSeesOtherProcesses: a schema change committed through another handle
// on the same file (another process, e.g. a CLI load next to the server) is seen by a
// handle that cached the schema before.
func TestSchemaCacheSeesOtherProcesses(t *testing.T) {
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
