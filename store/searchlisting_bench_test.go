package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// BenchmarkSearchListing measures what listing a written row for the search index costs
// an UPDATE, three ways, on a file of BENCH_N instances (about 200 bytes of JSON each)
// in the store's layout: every row updated once by the store's UPDATE statement, in
// transactions of 1,000 on one connection.
//   - none: nothing listed;
//   - trigger: layout 19's trigger lists each row as it is written (what the store did
//     before layout 20);
//   - one-statement-a-batch: each transaction's ids listed by one INSERT … SELECT from
//     a JSON array before it commits (what the store does since layout 20).
//
// Each iteration runs the three on fresh copies of one file, in a rotating order, so a
// machine's drift falls on all alike. It reports each one's CPU time (user + system) per
// row, in µs.
func BenchmarkSearchListing(b *testing.B) {
	testkit.SQLiteOnly(b, "the listing is SQLite's; PostgreSQL's engine maintains pg_trgm in every write")
	n := scaleN()
	const batch = 1000
	ctx := context.Background()
	// The instances as a load leaves them once the catch-up has run: nothing listed.
	src, err := testkit.Template(fmt.Sprintf("search-listing-%d", n), func(db *store.DB) error {
		next := testkit.NextInstanceID(b, db)
		return testkit.Migrator(b, db).Migrate(ctx, func(m *store.Migration) error {
			for j := range n {
				if err := m.Exec(ctx, `INSERT INTO instances(id, classname, keyname, data, created_at, updated_at)
					VALUES(?, 'item', ?, ?, '', '')`, next+int64(j), fmt.Sprintf("item-%07d", j), listingData(j, "")); err != nil {
					return err
				}
			}
			if err := m.Exec(ctx, "DELETE FROM instances_search_dirty"); err != nil {
				return err
			}
			return m.Exec(ctx, "DELETE FROM instances_search_staged")
		})
	})
	if err != nil {
		b.Fatal(err)
	}
	modes := []string{"none", "trigger", "one-statement-a-batch"}
	cpu := make([]time.Duration, len(modes))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range modes {
			m := (i + k) % len(modes)
			b.StopTimer()
			path := testkit.FromTemplate(b, src)
			raw := openRaw(b, path)
			var first int64 // the items' ids: first, first+1, …
			if err := raw.QueryRow("SELECT min(id) FROM instances WHERE classname = 'item'").Scan(&first); err != nil {
				b.Fatal(err)
			}
			if modes[m] == "trigger" {
				if _, err := raw.Exec(layout19Update); err != nil {
					b.Fatal(err)
				}
			}
			c0 := cpuTime()
			b.StartTimer()
			for from := 0; from < n; from += batch {
				tx, err := raw.Begin()
				if err != nil {
					b.Fatal(err)
				}
				up, err := tx.Prepare(`UPDATE instances SET displayname = ?, is_enabled = ?, data = ?, updated_at = ? WHERE id = ?`)
				if err != nil {
					b.Fatal(err)
				}
				ids := make([]string, 0, batch)
				for j := from; j < min(from+batch, n); j++ {
					if _, err := up.Exec("", 1, listingData(j, "-new"), "now", first+int64(j)); err != nil {
						b.Fatal(err)
					}
					ids = append(ids, fmt.Sprint(first+int64(j)))
				}
				if modes[m] == "one-statement-a-batch" {
					if _, err := tx.Exec(store.SearchListSQL, "["+strings.Join(ids, ",")+"]"); err != nil {
						b.Fatal(err)
					}
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			cpu[m] += cpuTime() - c0
			var listed int
			if err := raw.QueryRow("SELECT count(*) FROM instances_search_dirty").Scan(&listed); err != nil {
				b.Fatal(err)
			}
			if want := map[bool]int{true: 0, false: n}[modes[m] == "none"]; listed != want {
				b.Fatalf("%s: %d rows listed, want %d", modes[m], listed, want)
			}
			raw.Close()
			os.Remove(path)
		}
	}
	for m, mode := range modes {
		b.ReportMetric(float64(cpu[m].Microseconds())/float64(n*b.N), mode+"-µs/row")
	}
	b.ReportMetric(0, "ns/op")
}

// listingData is instance j's data, each value ending in suffix.
func listingData(j int, suffix string) string {
	return fmt.Sprintf(`{"f1":"Host-%07d-ABCDEF%s","f2":"value-%07d%s","f3":"three-%07d%s"}`, j, suffix, j, suffix, j, suffix)
}

// openRaw opens path on one connection, as the store's writer is opened.
func openRaw(b *testing.B, path string) *sql.DB {
	b.Helper()
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(15000)")
	if err != nil {
		b.Fatal(err)
	}
	raw.SetMaxOpenConns(1)
	return raw
}
