package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// TestInstanceETags: the ETag changes with every write, a raw SQL one included, and
// If-Match makes a write conditional on it.
func TestInstanceETags(t *testing.T) {
	t.Parallel()
	e := writeEnv(t, envOptions{})
	etag := func() string {
		t.Helper()
		r := e.get("/api/instances/server/srv3/", adminCred)
		if r.status != 200 || r.header.Get("ETag") == "" {
			t.Fatalf("GET: %d, ETag %q", r.status, r.header.Get("ETag"))
		}
		return r.header.Get("ETag")
	}
	ifMatch := func(tag string) cred { return both(adminCred, header("If-Match", tag)) }
	first := etag()
	if etag() != first {
		t.Fatal("the ETag changed without a write")
	}
	t.Run("a strong ETag, changed by a write", func(t *testing.T) {
		if !strings.HasPrefix(first, `"`) || !strings.HasSuffix(first, `"`) {
			t.Fatalf("ETag %s is not a strong entity tag", first)
		}
		r := e.send("PATCH", "/api/instances/server/srv3/", ifMatch(first), "application/json", `{"site": "a"}`)
		object(t, r, 200)
		if now := etag(); now == first || now != r.header.Get("ETag") {
			t.Fatalf("ETag after the write %s (reply's %s), before %s", now, r.header.Get("ETag"), first)
		}
	})
	t.Run("an unchanged write keeps it", func(t *testing.T) {
		before := etag()
		object(t, e.send("PATCH", "/api/instances/server/srv3/", adminCred, "application/json", `{"site": "a"}`), 200)
		if etag() != before {
			t.Fatal("a write that changed nothing changed the ETag")
		}
	})
	t.Run("a load changes it", func(t *testing.T) {
		before := etag()
		e.load(`[{classname: server, keyname: srv3, _action: update, site: loaded}]`)
		if etag() == before {
			t.Fatal("the ETag did not change after a load")
		}
	})
	t.Run("a migration-style SQL update changes it", func(t *testing.T) {
		before := etag()
		e.exec(`UPDATE instances SET displayname = 'migrated' WHERE classname = 'server' AND keyname = 'srv3'`)
		if etag() == before {
			t.Fatal("the ETag did not change after an SQL update of displayname")
		}
		before = etag()
		e.exec(`UPDATE instances SET data = '{"hostname": "migrated", "site": "m"}' WHERE classname = 'server' AND keyname = 'srv3'`)
		if etag() == before {
			t.Fatal("the ETag did not change after an SQL update of the data")
		}
	})
	t.Run("a start-up migration changes it, writing no revision", func(t *testing.T) {
		before, revs := etag(), e.queryString("SELECT COUNT(*) FROM revisions")
		err := testkit.Migrator(t, e.db).Migrate(context.Background(), func(m *store.Migration) error {
			return m.DeleteField(context.Background(), "server", "hostname")
		})
		if err != nil {
			t.Fatal(err)
		}
		if etag() == before {
			t.Fatal("the ETag did not change after a migration deleted a field")
		}
		if got := e.queryString("SELECT COUNT(*) FROM revisions"); got != revs {
			t.Fatalf("the migration wrote revisions (%s, were %s): the test would not tell an ETag from a revision id", got, revs)
		}
	})
	t.Run("If-Match with an old ETag is 412 and changes nothing", func(t *testing.T) {
		before := e.instanceRows()
		for _, m := range []string{"PUT", "PATCH", "DELETE"} {
			r := e.send(m, "/api/instances/server/srv3/", ifMatch(first), "application/json", `{"site": "b"}`)
			if r.status != 412 || !strings.Contains(string(r.body), "precondition failed") {
				t.Fatalf("%s: status %d: %s", m, r.status, r.body)
			}
		}
		if e.instanceRows() != before {
			t.Fatal("a failed precondition changed the tables")
		}
	})
	t.Run("a weak or unknown tag never matches; a malformed one is 400", func(t *testing.T) {
		now := etag()
		r := e.send("PATCH", "/api/instances/server/srv3/", ifMatch("W/"+now), "application/json", `{"site": "b"}`)
		if r.status != 412 {
			t.Fatalf("weak tag: %d %s", r.status, r.body)
		}
		wantError(t, e.send("PATCH", "/api/instances/server/srv3/", ifMatch("abc"), "application/json", `{"site": "b"}`), 400,
			"If-Match must be * or a list of quoted entity tags, as the ETag header gives them")
		wantError(t, e.send("POST", "/api/instances/server/", ifMatch(now), "application/json", `{"keyname": "z"}`), 400,
			"If-Match applies to PUT, PATCH and DELETE of an instance, not to a create")
	})
	t.Run("a list with the current ETag and * match", func(t *testing.T) {
		object(t, e.send("PATCH", "/api/instances/server/srv3/", ifMatch(`"x", `+etag()), "application/json", `{"site": "c"}`), 200)
		object(t, e.send("PATCH", "/api/instances/server/srv3/", ifMatch("*"), "application/json", `{"site": "d"}`), 200)
	})
	t.Run("If-Match on a missing instance is 412", func(t *testing.T) {
		r := e.send("DELETE", "/api/instances/server/gone/", ifMatch("*"), "", "")
		wantError(t, r, 412, `precondition failed: server "gone" does not exist`)
	})
	t.Run("two writers with the same ETag: exactly one wins", func(t *testing.T) {
		for round := 0; round < 5; round++ {
			tag := etag()
			var wg sync.WaitGroup
			statuses := make([]int, 4)
			for i := range statuses {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := e.send("PATCH", "/api/instances/server/srv3/", ifMatch(tag), "application/json",
						fmt.Sprintf(`{"site": "w%d-%d"}`, round, i))
					statuses[i] = r.status
				}()
			}
			wg.Wait()
			won := 0
			for _, s := range statuses {
				switch s {
				case 200:
					won++
				case 412:
				default:
					t.Fatalf("round %d: statuses %v", round, statuses)
				}
			}
			if won != 1 {
				t.Fatalf("round %d: %d writers won (statuses %v), want exactly 1", round, won, statuses)
			}
		}
	})
}
