package server_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"dataservice/bootstrap"
	"dataservice/internal/testkit"
	"dataservice/server"
	"dataservice/store"
	"dataservice/tasks"
)

// twoNodes is two services on one database, as two nodes are: node A and node B each
// have their own store handle (their own caches: schemas, configuration, verified
// secrets) and their own server. On PostgreSQL the database is one of the test
// cluster; on SQLite, one file both handles open.
func twoNodes(t *testing.T) (a, b *env) {
	t.Helper()
	addr := testkit.NewAddress(t, "nodes.db")
	dbA := testkit.Open(t, addr, testkit.Options{})
	testkit.Bootstrap(t, dbA, bootstrap.Options{AdminPassword: adminPassword})
	dbB := testkit.Open(t, addr, testkit.Options{})
	node := func(db *store.DB) *env {
		runner := tasks.New(db, tasks.Options{Poll: 20 * time.Millisecond, Logger: testkit.Logger(t, slog.LevelWarn)})
		srv := testkit.Serve(t, server.New(server.Options{DB: db, Runner: runner, Logger: testkit.Logger(t, slog.LevelWarn),
			Version: testkit.Version, VersionDate: testkit.VersionDate}), nil)
		return &env{t: t, db: db, runner: runner, srv: srv, loop: testkit.NewLoop(t, runner)}
	}
	return node(dbA), node(dbB)
}

// TestKeyDisabledOnOneNodeIsRefusedAtOnceOnAnother: node B has verified a key (its
// verified-secret cache holds it) and cached a schema; node A disables the key and
// changes the schema through its API. B's very next request is refused, and B's next
// read shows the new field: no cache of B outlives A's commit. Enabled again through
// A, the key works on B at once.
func TestKeyDisabledOnOneNodeIsRefusedAtOnceOnAnother(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	admin := basic("admin", adminPassword)
	a.load("- {classname: _schema, keyname: rack, height: {dataformat: int}}")
	k := a.key("k1", keySpec{perms: []string{"role:role_admin"}, plain: true})
	for range 3 {
		object(t, b.get("/api/schemas/rack/", k), 200)
	}
	if d := object(t, b.get("/api/schemas/rack/", k), 200); d["height"] == nil {
		t.Fatalf("schema rack on node B: %v", d)
	}

	object(t, a.post("/api/load/", admin, []byte(`[{"classname": "_apikey", "keyname": "k1", "is_enabled": false},
		{"classname": "_schema", "keyname": "rack", "owner": {"dataformat": "string"}}]`)), 200)
	wantError(t, b.get("/api/schemas/rack/", k), 401, "authentication required")
	wantError(t, a.get("/api/schemas/rack/", k), 401, "authentication required")
	if got := string(b.get("/api/schemas/rack/", admin).body); !strings.Contains(got, `"owner"`) {
		t.Fatalf("node B does not show the field node A added: %s", got)
	}

	object(t, a.post("/api/load/", admin, []byte(`[{"classname": "_apikey", "keyname": "k1", "is_enabled": true}]`)), 200)
	object(t, b.get("/api/schemas/rack/", k), 200)
}
