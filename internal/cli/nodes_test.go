package cli

import (
	"context"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// nodesEnv is reliabilityEnv on a database of the kit: a file on the SQLite pass, a
// database of the test cluster on the PostgreSQL pass.
func nodesEnv(t *testing.T) map[string]string {
	env := reliabilityEnv(t)
	env["SERVICE_DB"] = testkit.NewAddress(t, "nodes.db")
	return env
}

// openNodes opens the database of env beside its running nodes, as it is.
func openNodes(t *testing.T, env map[string]string) *store.DB {
	t.Helper()
	db, err := testkit.OpenStore(t, env["SERVICE_DB"], store.Options{AsIs: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestNodesRefuseMixedVersionsAndWarnOfOtherSettings: beside a live node, a node of
// another SERVICE_VERSION logs a critical line naming both versions and exits
// non-zero before the start-up sequence (DB_VERSION stays the live node's), and so
// does migrate of that version; a node
// of the same version with another admin password serves, warning which setting
// differs. The nodes table holds no setting's value, and a clean stop removes a
// node's row.
func TestNodesRefuseMixedVersionsAndWarnOfOtherSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := nodesEnv(t)
	a := startChild(t, env, "serve")
	a.baseURL()

	newer := quiet(env)
	newer["SERVICE_VERSION"] = "4.10.0"
	code, _, stderr := runCLI(t, newer, "serve")
	if code == 0 || !strings.Contains(stderr, "level=CRITICAL") ||
		!strings.Contains(stderr, `msg="another version of dataservice is serving this database: not serving"`) ||
		!strings.Contains(stderr, "version=4.10.0") || !strings.Contains(stderr, "live_version="+version) {
		t.Fatalf("a 4.10.0 node beside a live %s node: exit %d, log:\n%s", version, code, stderr)
	}
	code, _, stderr = runCLI(t, newer, "migrate")
	if code == 0 || !strings.Contains(stderr, `msg="another version of dataservice is serving this database: not migrating"`) ||
		!strings.Contains(stderr, "live_version="+version) {
		t.Fatalf("migrate to 4.10.0 beside a live %s node: exit %d, log:\n%s", version, code, stderr)
	}
	db := openNodes(t, env)
	if v, err := db.Registry(ctx, store.RegDBVersion); err != nil || v != version {
		t.Fatalf("DB_VERSION %q (%v) after the refused node and migrate, want %s", v, err, version)
	}

	other := map[string]string{}
	for k, v := range env {
		other[k] = v
	}
	other["SERVICE_ADMIN_PASSWORD"] = "another-admin-password"
	b := startChild(t, other, "serve")
	b.baseURL()
	if out := b.out.String(); !strings.Contains(out, "level=WARN") ||
		!strings.Contains(out, `msg="settings differ from a live node's`) || !strings.Contains(out, "settings=SERVICE_ADMIN_PASSWORD ") {
		t.Fatalf("a node with another admin password: no warning naming it:\n%s", tail(out))
	}
	nodes, err := db.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 {
		t.Fatalf("%d nodes recorded, want 2 (the refused one is not): %+v", len(nodes), nodes)
	}
	for _, n := range nodes {
		if n.Version != version || len(n.ID) != 16 || n.Host == "" || n.LastSeen.Before(n.StartedAt) {
			t.Fatalf("node row %+v", n)
		}
		for name, h := range n.Settings {
			if strings.Contains(h, "admin-password") || strings.Contains(h, "s3cret") || len(h) != 43 {
				t.Fatalf("node %s: setting %s stored as %q, want a hash", n.ID, name, h)
			}
		}
	}
	if nodes[0].Settings["SERVICE_ADMIN_PASSWORD"] == nodes[1].Settings["SERVICE_ADMIN_PASSWORD"] ||
		nodes[0].Settings["SERVICE_TASK_LEASE"] != nodes[1].Settings["SERVICE_TASK_LEASE"] {
		t.Fatalf("settings hashes: %v and %v", nodes[0].Settings, nodes[1].Settings)
	}
	a.stop()
	b.stop()
	if nodes, err := db.Nodes(ctx); err != nil || len(nodes) != 0 {
		t.Fatalf("after both stopped cleanly: %+v, %v; want no row", nodes, err)
	}
}
