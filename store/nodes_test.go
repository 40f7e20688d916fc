package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// TestNodesJoinTouchLeave: a node joining sees the live nodes (not itself, not those
// whose heartbeat stopped), is recorded only when its check passes, renews its row,
// and removes it when it leaves; rows not renewed for a day are dropped at the next
// join. Two handles on one database share the salt of the settings hashes.
func TestNodesJoinTouchLeave(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testkit.OpenEmpty(t, testkit.Options{})
	now := time.Now()
	live := now.Add(-30 * time.Second)
	join := func(id, version string, at time.Time, check func([]store.Node) error) error {
		return db.JoinNodes(ctx, &store.Node{ID: id, Host: "h-" + id, Version: version,
			Settings: map[string]string{"S": "hash-" + id}, StartedAt: at}, live, check)
	}
	if err := join("old", "4.8.0", now.Add(-25*time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	if err := join("quiet", "4.8.0", now.Add(-time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	if err := join("a", "4.9.0", now, func(l []store.Node) error {
		if len(l) != 0 {
			t.Errorf("node a sees %+v live, want none (quiet's heartbeat stopped a minute ago)", l)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused")
	var seen []store.Node
	if err := join("b", "4.10.0", now, func(l []store.Node) error { seen = l; return refused }); !errors.Is(err, refused) {
		t.Fatalf("a refusing check: %v, want its error", err)
	}
	if len(seen) != 1 || seen[0].ID != "a" || seen[0].Version != "4.9.0" || seen[0].Host != "h-a" ||
		seen[0].Settings["S"] != "hash-a" || seen[0].StartedAt.UnixMilli() != now.UnixMilli() {
		t.Fatalf("node b saw %+v, want node a alone", seen)
	}
	nodes, err := db.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(nodes); got != "quiet a" {
		t.Fatalf("nodes %q, want the day-old row dropped and b not recorded", got)
	}
	if ok, err := db.TouchNode(ctx, "a", now.Add(10*time.Second)); !ok || err != nil {
		t.Fatalf("touch a: %v %v", ok, err)
	}
	if ok, err := db.TouchNode(ctx, "b", now); ok || err != nil {
		t.Fatalf("touch of a node never recorded: %v %v, want false", ok, err)
	}
	nodes, _ = db.Nodes(ctx)
	if nodes[1].LastSeen.UnixMilli() != now.Add(10*time.Second).UnixMilli() || nodes[1].StartedAt.UnixMilli() != now.UnixMilli() {
		t.Fatalf("after the heartbeat: %+v", nodes[1])
	}
	if err := db.LeaveNodes(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if nodes, _ = db.Nodes(ctx); ids(nodes) != "quiet" {
		t.Fatalf("after a left: %q", ids(nodes))
	}

	salt, err := db.NodeSalt(ctx)
	if err != nil || len(salt) != 16 {
		t.Fatalf("salt %x, %v", salt, err)
	}
	other := testkit.Open(t, db.Path(), testkit.Options{})
	if testkit.Postgres() {
		other = db // the path of a PostgreSQL database is its address without the password
	}
	again, err := other.NodeSalt(ctx)
	if err != nil || string(again) != string(salt) {
		t.Fatalf("a second read of the salt: %x, %v; want %x", again, err, salt)
	}
}

func ids(nodes []store.Node) string {
	s := ""
	for i, n := range nodes {
		if i > 0 {
			s += " "
		}
		s += n.ID
	}
	return s
}

// TestHeartbeatBesideALongWriteTransaction: a node whose write transaction holds the
// writer lock longer than the liveness window (a long migration block) keeps renewing
// its heartbeat meanwhile, so a node of another version starting then waits for the
// lock, sees it live, and is refused. The heartbeat is a plain update of the node's
// own row: it takes neither the writer lock nor the node's writer connection.
func TestHeartbeatBesideALongWriteTransaction(t *testing.T) {
	if !testkit.Postgres() {
		t.Skip("PostgreSQL only: SQLite has one write lock per file, so there every write, the heartbeat's too, waits for the write transaction in progress")
	}
	t.Parallel()
	ctx := context.Background()
	addr := testkit.NewAddress(t, "nodes.db")
	a := testkit.Open(t, addr, testkit.Options{})
	b := testkit.Open(t, addr, testkit.Options{})
	t0 := time.Now()
	if err := a.JoinNodes(ctx, &store.Node{ID: "a", Host: "ha", Version: "4.9.0", StartedAt: t0}, t0.Add(-30*time.Second), nil); err != nil {
		t.Fatal(err)
	}
	tx, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// The transaction runs on: 40 s later by the nodes' clock, a beat renews a's row.
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	ok, err := a.TouchNode(tctx, "a", t0.Add(40*time.Second))
	cancel()
	if !ok || err != nil {
		t.Fatalf("heartbeat while the node's own transaction holds the writer lock: %v %v, want renewed", ok, err)
	}
	refused := errors.New("refused")
	joined := make(chan error, 1)
	var seen []store.Node
	go func() {
		at := t0.Add(45 * time.Second)
		joined <- b.JoinNodes(ctx, &store.Node{ID: "b", Host: "hb", Version: "4.8.0", StartedAt: at}, at.Add(-30*time.Second),
			func(live []store.Node) error {
				seen = live
				for _, n := range live {
					if n.Version != "4.8.0" {
						return refused
					}
				}
				return nil
			})
	}()
	// b waits for the writer lock a's transaction holds.
	for i := 0; testkit.QueryInt(t, a, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"+
		" AND database = (SELECT oid FROM pg_database WHERE datname = current_database())") == 0; i++ {
		if i == 400 {
			t.Fatal("node b never waited for the writer lock")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-joined; !errors.Is(err, refused) {
		t.Fatalf("node b of another version joined beside live node a (saw %+v): %v", seen, err)
	}
	nodes, err := a.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(nodes); got != "a" {
		t.Fatalf("nodes %q, want a alone", got)
	}
}
