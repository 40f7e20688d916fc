package server_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"dataservice/bootstrap"
	"dataservice/builtin"
	"dataservice/internal/testkit"
	"dataservice/server"
	"dataservice/store"
)

// loadRow is entry i of the load benchmark (the shape of bench/run.sh's CLI file).
func loadRow(i int) (key, host string, port int, ip string) {
	return fmt.Sprintf("h%07d", i), fmt.Sprintf("host-%07d.example.org", i), 1 + i%65535,
		fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
}

// writeLoadBody writes n entries as a YAML block sequence or a JSON list.
func writeLoadBody(b *testing.B, n int, format string) string {
	path := filepath.Join(b.TempDir(), "body."+format)
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	if format == "json" {
		w.WriteString("[")
	}
	for i := 0; i < n; i++ {
		key, host, port, ip := loadRow(i)
		if format == "json" {
			if i > 0 {
				w.WriteString(",\n")
			}
			fmt.Fprintf(w, `{"classname": "bload", "keyname": "%s", "hostname": "%s", "port": %d, "ip": "%s"}`, key, host, port, ip)
		} else {
			fmt.Fprintf(w, "- classname: bload\n  keyname: %s\n  hostname: %s\n  port: %d\n  ip: %s\n", key, host, port, ip)
		}
	}
	if format == "json" {
		w.WriteString("]\n")
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

// memPeak samples the process's peak RSS (VmHWM, reset before) and the live heap
// (every 20 ms) while a measured step runs.
type memPeak struct {
	stop chan struct{}
	done sync.WaitGroup
	heap uint64
}

func startMemPeak() *memPeak {
	testkit.ResetPeakRSS()
	m := &memPeak{stop: make(chan struct{})}
	m.done.Add(1)
	go func() {
		defer m.done.Done()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			m.heap = max(m.heap, s[0].Value.Uint64())
			select {
			case <-m.stop:
				return
			case <-t.C:
			}
		}
	}()
	return m
}

// end returns the peak RSS and peak heap in MB.
func (m *memPeak) end() (rss, heap float64) {
	close(m.stop)
	m.done.Wait()
	return testkit.PeakRSS(), float64(m.heap) / (1 << 20)
}

// BenchmarkAPILoad posts BENCH_N new instances in one POST /api/load/ body (YAML
// block sequence, and JSON list) through the real HTTP stack to the product — the
// body is received into a file while each entry is checked, then loaded entry by
// entry — and to its floor: net/http receiving the same bytes, then inserting the
// same instance and revision rows (the same JSON, built before the timer) with
// prepared statements in transactions of 1000, as the store's load floor does. The
// bodies are written to files before the timer; peak RSS (VmHWM, reset before each
// request) and peak live heap are of this process, which holds client and server.
func BenchmarkAPILoad(b *testing.B) {
	n := scaleN()
	ctx := context.Background()
	schema := `[{"classname": "_schema", "keyname": "bload", "hostname": {"dataformat": "string"},
		"port": {"dataformat": "int"}, "ip": {"dataformat": "string"}}]`
	post := func(b *testing.B, srvURL, path string) []byte {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		req, _ := http.NewRequest(http.MethodPost, srvURL+"/api/load/", f)
		req.SetBasicAuth("admin", adminPassword)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			b.Fatalf("load: %d %s", resp.StatusCode, out)
		}
		return out
	}
	for _, format := range []string{"yaml", "json"} {
		b.Run(fmt.Sprintf("n=%d/product-%s", n, format), func(b *testing.B) {
			path := writeLoadBody(b, n, format)
			var rss, heap float64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				db, err := testkit.OpenStore(b, testkit.NewAddress(b, "load.db"), store.Options{})
				if err != nil {
					b.Fatal(err)
				}
				if err := bootstrap.Run(ctx, testkit.Migrator(b, db), bootstrap.Options{Version: "4.9.0", VersionDate: "2026-11-22",
					Init: builtin.Init(), AdminPassword: adminPassword}); err != nil {
					b.Fatal(err)
				}
				srv := httptest.NewServer(server.New(server.Options{DB: db, Version: "4.9.0", VersionDate: "2026-11-22",
					MaxBody: 1 << 40, MaxEntries: n}))
				post(b, srv.URL, writeSchema(b, schema))
				m := startMemPeak()
				b.StartTimer()
				out := post(b, srv.URL, path)
				b.StopTimer()
				r, h := m.end()
				rss, heap = max(rss, r), max(heap, h)
				var res store.LoadResult
				if err := json.Unmarshal(out, &res); err != nil || res.Created != n || res.Errors != 0 {
					b.Fatalf("load: %v %s", err, out[:min(len(out), 500)])
				}
				srv.Close()
				db.Close()
				b.StartTimer()
			}
			reportLoad(b, n, rss, heap)
		})
		b.Run(fmt.Sprintf("n=%d/floor-%s", n, format), func(b *testing.B) {
			path := writeLoadBody(b, n, format)
			type row struct{ key, data, after string }
			rows := make([]row, n)
			for i := range rows {
				key, host, port, ip := loadRow(i)
				data := map[string]any{"hostname": host, "port": port, "ip": ip}
				d, _ := json.Marshal(data)
				a, _ := json.Marshal(map[string]any{"keyname": key, "displayname": "", "is_enabled": true, "data": data})
				rows[i] = row{key, string(d), string(a)}
			}
			now := time.Now().UTC().Format(time.RFC3339)
			var rss, heap float64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				db := testkit.OpenFloorDB(b)
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if _, err := io.Copy(io.Discard, r.Body); err != nil {
						http.Error(w, err.Error(), 400)
						return
					}
					for start := 0; start < len(rows); start += 1000 {
						if err := floorBatch(r.Context(), db, rows[start:min(start+1000, len(rows))], now,
							func(r row) (string, string, string) { return r.key, r.data, r.after }); err != nil {
							http.Error(w, err.Error(), 500)
							return
						}
					}
					fmt.Fprintf(w, `{"created": %d}`, len(rows))
				}))
				m := startMemPeak()
				b.StartTimer()
				post(b, srv.URL, path)
				b.StopTimer()
				r, h := m.end()
				rss, heap = max(rss, r), max(heap, h)
				srv.Close()
				db.Close()
				b.StartTimer()
			}
			reportLoad(b, n, rss, heap)
		})
	}
}

func writeSchema(b *testing.B, doc string) string {
	path := filepath.Join(b.TempDir(), "schema.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		b.Fatal(err)
	}
	return path
}

// floorBatch inserts rows' instance and revision rows in one transaction and keeps the
// search index as a store transaction does before it commits (testkit.FloorLoad: the
// pass's engine's SQL).
func floorBatch[R any](ctx context.Context, db *sql.DB, rows []R, now string, cols func(R) (string, string, string)) error {
	f := testkit.FloorLoad()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, q := range f.Begin { // the writer lock, where the engine takes it by a statement
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	ins, err := tx.PrepareContext(ctx, f.Instance)
	if err != nil {
		return err
	}
	rev, err := tx.PrepareContext(ctx, f.Revision)
	if err != nil {
		return err
	}
	for _, r := range rows {
		key, data, after := cols(r)
		if _, err := ins.ExecContext(ctx, "bload", key, "", f.Enabled, data, now, now); err != nil {
			return err
		}
		if _, err := rev.ExecContext(ctx, "bload", key, "create", nil, after, "admin", now); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// reportLoad reports a load benchmark's rate over b.N loads of n entries and the
// peak memory its loads reached.
func reportLoad(b *testing.B, n int, rss, heap float64) {
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "instances/s")
	b.ReportMetric(rss, "peak-RSS-MB")
	b.ReportMetric(heap, "peak-heap-MB")
	b.ReportMetric(0, "ns/op")
}
