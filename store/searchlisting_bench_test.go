package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
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
	src := filepath.Join(b.TempDir(), "src.db")
	db, err := store.Open(context.Background(), src, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	db.Close()
	raw := openRaw(b, src)
	tx, err := raw.Begin()
	if err != nil {
		b.Fatal(err)
	}
	for j := range n {
		if _, err := tx.Exec(`INSERT INTO instances(id, classname, keyname, data, created_at, updated_at)
			VALUES(?, 'item', ?, ?, '', '')`, int64(j+1000), fmt.Sprintf("item-%07d", j), listingData(j, "")); err != nil {
			b.Fatal(err)
		}
	}
	for _, q := range []string{"DELETE FROM instances_search_dirty", "DELETE FROM instances_search_staged"} {
		if _, err := tx.Exec(q); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	raw.Close()
	const list = `INSERT INTO instances_search_dirty(id) SELECT value FROM json_each(?) WHERE true
		ON CONFLICT(id) DO UPDATE SET staged = 2 WHERE staged = 1`
	modes := []string{"none", "trigger", "one-statement-a-batch"}
	cpu := make([]time.Duration, len(modes))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range modes {
			m := (i + k) % len(modes)
			b.StopTimer()
			path := filepath.Join(b.TempDir(), "copy.db")
			copyFile(b, src, path)
			raw := openRaw(b, path)
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
					if _, err := up.Exec("", 1, listingData(j, "-new"), "now", int64(j+1000)); err != nil {
						b.Fatal(err)
					}
					ids = append(ids, fmt.Sprint(j+1000))
				}
				if modes[m] == "one-statement-a-batch" {
					if _, err := tx.Exec(list, "["+strings.Join(ids, ",")+"]"); err != nil {
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

// copyFile copies the closed database file src to dst.
func copyFile(b *testing.B, src, dst string) {
	b.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		b.Fatal(err)
	}
}
