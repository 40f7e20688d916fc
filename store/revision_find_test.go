package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

func revKeys(revs []store.Revision) string {
	var s []string
	for _, r := range revs {
		s = append(s, r.Classname+":"+r.Keyname+":"+r.Action)
	}
	return strings.Join(s, ",")
}

func TestFindRevisionsFilters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newTestDB(t)
	mustLoad(t, db, serverSchema, store.LoadOptions{})
	alice, bob := userAuth("p_data_admin"), userAuth("p_data_admin")
	alice.Name, bob.Name = "alice", "bob"
	mustLoad(t, db, `[{classname: site, keyname: s1, city: Paris}, {classname: server, keyname: a, hostname: h1}]`, store.LoadOptions{Auth: alice})
	mustLoad(t, db, `[{classname: server, keyname: a, hostname: h2}, {classname: server, keyname: b, hostname: h3}]`, store.LoadOptions{Auth: bob})
	mustLoad(t, db, `[{classname: server, keyname: a, _action: delete}]`, store.LoadOptions{Auth: alice})
	first := int64(queryInt(t, db, "SELECT min(id) FROM revisions WHERE author = 'user:alice'"))
	// Dates: everything on 2026-01-10 but the server b's create, on 2026-01-12.
	exec(t, db, "UPDATE revisions SET created_at = '2026-01-10T08:00:00Z' WHERE id >= ?", first)
	exec(t, db, "UPDATE revisions SET created_at = '2026-01-12T08:00:00Z' WHERE keyname = 'b'")
	all := func(string) bool { return true }
	mine := store.RevisionFilter{Since: "2026-01-01T00:00:00Z", Until: "2026-02-01T00:00:00Z"} // this test's rows, not the set-up's

	for _, c := range []struct {
		name string
		f    store.RevisionFilter
		want string
	}{
		{"all, newest first", mine, "server:a:delete,server:b:create,server:a:update,server:a:create,site:s1:create"},
		{"class", store.RevisionFilter{Classname: "server"}, "server:a:delete,server:b:create,server:a:update,server:a:create"},
		{"class and keyname", store.RevisionFilter{Classname: "server", Keyname: "a"}, "server:a:delete,server:a:update,server:a:create"},
		{"keyname alone", store.RevisionFilter{Keyname: "s1"}, "site:s1:create"},
		{"author", store.RevisionFilter{Author: "user:bob"}, "server:b:create,server:a:update"},
		{"action", store.RevisionFilter{Action: "update"}, "server:a:update"},
		{"date range", store.RevisionFilter{Since: "2026-01-12T00:00:00Z", Until: "2026-01-13T00:00:00Z"}, "server:b:create"},
		{"until", store.RevisionFilter{Since: mine.Since, Until: "2026-01-11T00:00:00Z"}, "server:a:delete,server:a:update,server:a:create,site:s1:create"},
		{"nothing", store.RevisionFilter{Author: "user:carol"}, ""},
	} {
		got, next, err := db.FindRevisions(ctx, c.f, 50, 10000, all)
		if err != nil {
			t.Fatal(err)
		}
		if revKeys(got) != c.want || next != 0 {
			t.Errorf("%s: %s (next %d), want %s", c.name, revKeys(got), next, c.want)
		}
	}

	// Readable classes only.
	got, _, err := db.FindRevisions(ctx, mine, 50, 10000, func(cls string) bool { return cls == "site" })
	if err != nil || revKeys(got) != "site:s1:create" {
		t.Fatalf("site only: %s %v", revKeys(got), err)
	}

	// Pages: keyset by id.
	var pages []string
	f := mine
	for i := 0; i < 10; i++ {
		got, next, err := db.FindRevisions(ctx, f, 2, 10000, all)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, revKeys(got))
		if next == 0 {
			break
		}
		f.Before = next
	}
	if s := strings.Join(pages, " | "); s != "server:a:delete,server:b:create | server:a:update,server:a:create | site:s1:create" {
		t.Fatalf("pages: %s", s)
	}

	// The scan budget ends a call early and says where to go on.
	site := func(cls string) bool { return cls == "site" }
	got, next, err := db.FindRevisions(ctx, mine, 2, 2, site)
	if err != nil || len(got) != 0 || next == 0 {
		t.Fatalf("budget: %s next %d %v", revKeys(got), next, err)
	}
	f = mine
	f.Before = next
	got, next, err = db.FindRevisions(ctx, f, 2, 2, site)
	if err != nil || len(got) != 0 || next == 0 {
		t.Fatalf("budget, second call: %s next %d %v", revKeys(got), next, err)
	}
	f.Before = next
	got, next, err = db.FindRevisions(ctx, f, 2, 2, site)
	if err != nil || revKeys(got) != "site:s1:create" || next != 0 {
		t.Fatalf("after the budget: %s next %d %v", revKeys(got), next, err)
	}

	// One revision by id, and the replacement check.
	del, _, _ := db.FindRevisions(ctx, store.RevisionFilter{Action: "delete", Classname: "server"}, 1, 100, all)
	r, err := db.RevisionByID(ctx, del[0].ID)
	if err != nil || r.Keyname != "a" || r.After != "" || !strings.Contains(r.Before, `"hostname":"h2"`) {
		t.Fatalf("revision by id: %+v %v", r, err)
	}
	if _, err := db.RevisionByID(ctx, 1<<40); !store.IsNotFound(err) {
		t.Fatalf("missing revision: %v", err)
	}
	upd, _, _ := db.FindRevisions(ctx, store.RevisionFilter{Action: "update", Classname: "server"}, 1, 100, all)
	if a, err := db.ObjectReplacedSince(ctx, "server", "a", upd[0].ID); err != nil || a != "delete" {
		t.Fatalf("replaced since the first revision: %q %v", a, err)
	}
	if a, err := db.ObjectReplacedSince(ctx, "server", "b", first); err != nil || a != "create" {
		t.Fatalf("b created since: %q %v", a, err)
	}
	if a, err := db.ObjectReplacedSince(ctx, "site", "s1", first); err != nil || a != "" {
		t.Fatalf("s1 not replaced: %q %v", a, err)
	}
}

// A class filter reads its index in id order: no sort of the class's rows.
func TestFindRevisionsClassIndex(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	for _, c := range []struct {
		where, index string
		// pgIndexes are the indexes PostgreSQL may read in id order: which one is
		// cheaper is its statistics' choice (on an empty table, the class index with
		// the keyname as a filter costs the same as the object index).
		pgIndexes []string
	}{
		{"classname = 'x' AND id < 10", "revisions_class", []string{"revisions_class"}},
		{"classname = 'x' AND keyname = 'k' AND id < 10", "revisions_object", []string{"revisions_object", "revisions_class"}},
	} {
		query := "SELECT id FROM revisions WHERE " + c.where + " ORDER BY id DESC LIMIT 50"
		if testkit.Postgres() {
			p := postgresPlan(t, db, query)
			if !strings.Contains(p, "Scan Backward using ") || strings.Contains(p, "Sort") {
				t.Errorf("%s: plan %s, want a backward index scan without a sort", c.where, p)
			}
			used := false
			for _, ix := range c.pgIndexes {
				used = used || strings.Contains(p, "using "+ix+" ")
			}
			if !used {
				t.Errorf("%s: plan %s, want one of %v", c.where, p, c.pgIndexes)
			}
			continue
		}
		rows, err := db.Reader().QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		p := fmt.Sprint(plan)
		if !strings.Contains(p, c.index) || strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("%s: plan %s, want %s without a sort", c.where, p, c.index)
		}
	}
}

// postgresPlan is PostgreSQL's plan of query when it may use neither a whole-table
// scan, a bitmap scan nor a sort: an index that gives the rows in the query's order
// is then the only cheap plan, whatever the statistics of a small table say.
func postgresPlan(t *testing.T, db *store.DB, query string) string {
	t.Helper()
	var plan []string
	err := db.WithRead(context.Background(), func(r store.Reader) error {
		for _, off := range []string{"enable_seqscan", "enable_bitmapscan", "enable_sort"} {
			var set string
			if err := r.QueryRowContext(context.Background(), "SELECT set_config('"+off+"', 'off', true)").Scan(&set); err != nil {
				return err
			}
		}
		rows, err := r.QueryContext(context.Background(), "EXPLAIN "+query)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				return err
			}
			plan = append(plan, strings.TrimSpace(line))
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", query, err)
	}
	return strings.Join(plan, " / ")
}
