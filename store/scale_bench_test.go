package store_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/codec"
	"dataservice/store/model"
)

// scaleN is the number of instances of the scale benchmarks: BENCH_N, default 100000.
func scaleN() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_N")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

// writeScaleFile writes n bplain entries (block-style YAML, one item per entry).
func writeScaleFile(b *testing.B, n int) string {
	path := filepath.Join(b.TempDir(), "load.yml")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := 0; i < n; i++ {
		key, host, port, ip, site := benchRow(i)
		fmt.Fprintf(w, "- classname: bplain\n  keyname: %s\n  hostname: %s\n  port: %d\n  ip: %s\n  site: %s\n", key, host, port, ip, site)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkLoadScale loads BENCH_N new instances from one YAML file as the CLI does
// (a first reading checks every item parses, then the file is read again item by item
// and loaded as it is read) — "product" — and its floor: the same instance and
// revision rows, with the same JSON, inserted with prepared statements in
// transactions of 1000, the layout's triggers listing them for the search index as
// the product's writes do (rows built before the timer starts) — "floor". "product-without-index" is the product with
// the search index's triggers dropped: what the index costs a load. On the
// PostgreSQL pass the floor is plain pgx with the product's writer lock and INSERTs
// (testkit.FloorLoad), the engine keeping the pg_trgm index, and "product-without-index"
// drops that index. After each product load (timer stopped) the search index's
// catch-up indexes the rows the load listed (SQLite): catch-up-rows/s is its rate,
// catch-up-s the time the load's backlog took to clear, the merge of the index after
// it included (CatchUpSearch merges as the background catch-up does).
func BenchmarkLoadScale(b *testing.B) {
	n := scaleN()
	ctx := context.Background()
	product := func(b *testing.B) {
		path := writeScaleFile(b, n)
		var peak float64
		var caught int64
		var catchUp time.Duration
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			db := newTestDB(b)
			mustLoad(b, db, benchSchema+benchSites(), store.LoadOptions{})
			if strings.HasSuffix(b.Name(), "/product-without-index") {
				testkit.DropSearchIndex(b, db) // the write cost of the search index, measured
			}
			testkit.ResetPeakRSS()
			b.StartTimer()
			readAll := func(fn func(*model.Entry) error) error {
				f, err := os.Open(path)
				if err != nil {
					return err
				}
				defer f.Close()
				return codec.StreamDocument("load.yml", f, fn)
			}
			if err := readAll(func(*model.Entry) error { return nil }); err != nil {
				b.Fatal(err)
			}
			res, err := db.LoadStream(ctx, readAll, store.LoadOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			peak = max(peak, testkit.PeakRSS())
			if res.Created != n || res.Errors != 0 {
				b.Fatalf("load: %s %s", counts(res), messages(res))
			}
			if !strings.HasSuffix(b.Name(), "/product-without-index") {
				t0 := time.Now()
				rows, err := db.CatchUpSearch(ctx)
				if err != nil {
					b.Fatal(err)
				}
				catchUp += time.Since(t0)
				caught += rows
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "instances/s")
		b.ReportMetric(peak, "peak-RSS-MB")
		if caught > 0 {
			b.ReportMetric(float64(caught)/catchUp.Seconds(), "catch-up-rows/s")
			b.ReportMetric(catchUp.Seconds()/float64(b.N), "catch-up-s")
		}
		b.ReportMetric(0, "ns/op")
	}
	b.Run(fmt.Sprintf("n=%d/product", n), product)
	b.Run(fmt.Sprintf("n=%d/product-without-index", n), product)
	b.Run(fmt.Sprintf("n=%d/floor", n), func(b *testing.B) {
		type row struct{ key, data, after string }
		rows := make([]row, n)
		for i := range rows {
			key, host, port, ip, site := benchRow(i)
			data := map[string]any{"hostname": host, "port": port, "ip": ip, "site": site}
			d, _ := json.Marshal(data)
			a, _ := json.Marshal(map[string]any{"keyname": key, "displayname": "", "is_enabled": true, "data": data})
			rows[i] = row{key, string(d), string(a)}
		}
		now := fixedNow.Format("2006-01-02T15:04:05Z")
		f := testkit.FloorLoad()
		var peak float64
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			db := testkit.OpenFloorDB(b)
			testkit.ResetPeakRSS()
			b.StartTimer()
			for start := 0; start < len(rows); start += 1000 {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				for _, q := range f.Begin { // the writer lock, where the engine takes it by a statement
					if _, err := tx.ExecContext(ctx, q); err != nil {
						b.Fatal(err)
					}
				}
				ins, err := tx.PrepareContext(ctx, f.Instance)
				if err != nil {
					b.Fatal(err)
				}
				rev, err := tx.PrepareContext(ctx, f.Revision)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range rows[start:min(start+1000, len(rows))] {
					if _, err := ins.ExecContext(ctx, "bplain", r.key, "", f.Enabled, r.data, now, now); err != nil {
						b.Fatal(err)
					}
					if _, err := rev.ExecContext(ctx, "bplain", r.key, "create", nil, r.after, "system", now); err != nil {
						b.Fatal(err)
					}
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			peak = max(peak, testkit.PeakRSS())
			db.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "instances/s")
		b.ReportMetric(peak, "peak-RSS-MB")
		b.ReportMetric(0, "ns/op")
	})
}

// BenchmarkExportScale exports BENCH_N instances as YAML and as JSON to io.Discard, and
// a floor: the same rows read with the same SELECT, decoded as the store decodes them,
// and written as JSON with encoding/json.
func BenchmarkExportScale(b *testing.B) {
	n := scaleN()
	ctx := context.Background()
	db := newTestDB(b)
	mustLoad(b, db, benchSchema+benchSites(), store.LoadOptions{})
	err := testkit.Migrator(b, db).Migrate(ctx, func(m *store.Migration) error {
		const insert = `INSERT INTO instances(classname, keyname, displayname, is_enabled, data,
			created_at, updated_at) VALUES('bplain', ?, '', 1, ?, '2026-11-22T10:00:00Z', '2026-11-22T10:00:00Z')`
		for i := 0; i < n; i++ {
			key, host, port, ip, site := benchRow(i)
			d, _ := json.Marshal(map[string]any{"hostname": host, "port": port, "ip": ip, "site": site})
			if err := m.Exec(ctx, insert, key, string(d)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"yaml", "json", "floor"} {
		b.Run(fmt.Sprintf("n=%d/%s", n, mode), func(b *testing.B) {
			c0 := cpuTime()
			for i := 0; i < b.N; i++ {
				if mode != "floor" {
					if err := db.Export(ctx, io.Discard, []string{"bplain"}, mode); err != nil {
						b.Fatal(err)
					}
					continue
				}
				enc := json.NewEncoder(io.Discard)
				var after int64
				for {
					rows, err := db.Reader().QueryContext(ctx, `SELECT id, classname, keyname, displayname, is_enabled, data,
						created_at, updated_at FROM instances WHERE classname = ? AND id > ? ORDER BY id LIMIT ?`, "bplain", after, 1000)
					if err != nil {
						b.Fatal(err)
					}
					got := 0
					for rows.Next() {
						var id int64
						var cls, key, disp, raw, cr, up string
						var en bool
						if err := rows.Scan(&id, &cls, &key, &disp, &en, &raw, &cr, &up); err != nil {
							b.Fatal(err)
						}
						data, err := model.DecodeData(raw)
						if err != nil {
							b.Fatal(err)
						}
						data["classname"], data["keyname"], data["displayname"], data["is_enabled"] = cls, key, disp, en
						if err := enc.Encode(data); err != nil {
							b.Fatal(err)
						}
						after, got = id, got+1
					}
					rows.Close()
					if got < 1000 {
						break
					}
				}
			}
			b.ReportMetric(float64(n*b.N)/(cpuTime()-c0).Seconds(), "instances/cpu-s")
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "instances/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// cpuTime is the CPU time (user + system) the process has used: a machine shared with
// other work slows a benchmark's wall clock, much less its CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
