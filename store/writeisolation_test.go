package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// TestConcurrentWritersWhateverTheDefaultIsolation: two handles on one database (two
// nodes) load at once, many small loads each, and every load succeeds with exact
// counts and distinct ids. On PostgreSQL the database's default isolation is REPEATABLE
// READ: a writer that took its snapshot when it asked for the writer lock, before the
// wait, would miss what the previous holder committed (the next id from stale data,
// the count fold in conflict), so writers must set their own isolation.
func TestConcurrentWritersWhateverTheDefaultIsolation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr := testkit.NewAddress(t, "iso.db")
	first := testkit.Open(t, addr, testkit.Options{})
	mustLoad(t, first, "- {classname: _schema, keyname: rack, height: {dataformat: int}}", store.LoadOptions{})
	if testkit.Postgres() {
		name := testkit.QueryString(t, first, "SELECT current_database()")
		testkit.ExecFile(t, addr, "ALTER DATABASE "+name+" SET default_transaction_isolation = 'repeatable read'")
	}
	// Handles opened after the setting: their sessions start with it.
	nodes := []*store.DB{testkit.Open(t, addr, testkit.Options{}), testkit.Open(t, addr, testkit.Options{})}
	if testkit.Postgres() {
		if got := testkit.QueryString(t, nodes[0], "SHOW default_transaction_isolation"); got != "repeatable read" {
			t.Fatalf("the database's default isolation is %q, want repeatable read", got)
		}
	}
	const loads, per = 15, 4
	var wg sync.WaitGroup
	errs := make(chan error, 2*loads)
	for n, db := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l := range loads {
				var doc strings.Builder
				for i := range per {
					fmt.Fprintf(&doc, "- {classname: rack, keyname: n%d-l%d-i%d, height: %d}\n", n, l, i, i)
				}
				res, err := db.Load(ctx, testkit.Parse(t, doc.String()), store.LoadOptions{})
				if err != nil {
					errs <- fmt.Errorf("node %d load %d: %w", n, l, err)
					return
				}
				if res.Errors != 0 || res.Created != per {
					errs <- fmt.Errorf("node %d load %d: %+v", n, l, res)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	want := 2 * loads * per
	for n, db := range append(nodes, first) {
		if c, err := db.CountInstances(ctx, "rack"); err != nil || c != want {
			t.Errorf("handle %d counts %d racks (%v), want %d", n, c, err, want)
		}
	}
	if got := testkit.QueryInt(t, first, "SELECT count(DISTINCT id) FROM instances WHERE classname = 'rack'"); got != want {
		t.Errorf("%d distinct ids, want %d", got, want)
	}
}
