package bootstrap_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"dataservice/bootstrap"
	"dataservice/internal/testkit"
	"dataservice/store"
)

// The IPAM migration benchmarks build their data with SQL in one transaction and time
// only bootstrap.Run. Run them one iteration at a time (all four take about 10 s on a
// 2-core machine, setup included):
//
//	go test ./bootstrap/ -run '^$' -bench 'Block4[89]0' -benchtime 1x
//
// Each size builds a new database; the smaller size shows whether memory grows with the
// number of instances. Metrics: instances/s (instances the block migrates, over the
// time of Run), rss-before-MB (resident memory when Run starts) and peak-rss-MB (the
// highest resident memory during Run: VmHWM, reset just before Run where the kernel
// allows it, else the peak of the whole process).

// procStatusKB reads one "Name: N kB" line of /proc/self/status (0 when unavailable).
func procStatusKB(name string) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+":"); ok {
			v, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return v
		}
	}
	return 0
}

// benchIPAMRun is one timed start: the data is in place and DB_VERSION set.
type benchIPAMRun struct {
	elapsed          time.Duration
	rssBefore, peak  float64 // MB
	peakResetWorked  bool
	instancesInBlock int
}

// timeRun resets the memory peak, then times bootstrap.Run alone.
func timeRun(b *testing.B, db *store.DB, instances int) benchIPAMRun {
	b.Helper()
	r := benchIPAMRun{instancesInBlock: instances}
	r.peakResetWorked = testkit.ResetPeakRSS()
	r.rssBefore = procStatusKB("VmRSS") / 1024
	start := time.Now()
	b.StartTimer()
	err := bootstrap.Run(context.Background(), testkit.Migrator(b, db), benchOptions(""))
	b.StopTimer()
	r.elapsed = time.Since(start)
	if err != nil {
		b.Fatalf("Run: %v", err)
	}
	r.peak = procStatusKB("VmHWM") / 1024
	return r
}

func (r benchIPAMRun) report(b *testing.B) {
	b.ReportMetric(float64(r.instancesInBlock)/r.elapsed.Seconds(), "instances/s")
	b.ReportMetric(r.rssBefore, "rss-before-MB")
	b.ReportMetric(r.peak, "peak-rss-MB")
	if !r.peakResetWorked {
		b.Logf("VmHWM could not be reset: peak-rss-MB is the peak of the whole process")
	}
}

// benchDB opens a new database in dir and runs a first start (bootstrap and every block).
func benchDB(b *testing.B, dir string) *store.DB {
	b.Helper()
	db, err := testkit.OpenStore(b, filepath.Join(dir, "data.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := bootstrap.Run(context.Background(), testkit.Migrator(b, db), benchOptions("")); err != nil {
		b.Fatal(err)
	}
	return db
}

// benchFill runs statements, then rows times the insert statement with the arguments
// row(i) gives, in one transaction.
func benchFill(b *testing.B, db *store.DB, stmts []string, insert string, rows int, row func(i int) []any) {
	b.Helper()
	ctx := context.Background()
	err := testkit.Migrator(b, db).Migrate(ctx, func(m *store.Migration) error {
		for _, q := range stmts {
			if err := m.Exec(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		for i := 0; i < rows; i++ {
			if err := m.Exec(ctx, insert, row(i)...); err != nil {
				return fmt.Errorf("row %d: %w", i, err)
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

const benchInsertInstance = `INSERT INTO instances(classname, keyname, displayname, is_enabled, data, created_at, updated_at)
	VALUES(?, ?, '', 1, ?, '2020-01-01T00:00:00Z', '2020-01-01T00:00:00Z')`

// benchCount runs a SELECT count(*) query.
func benchCount(b *testing.B, db *store.DB, query string) int {
	b.Helper()
	var n int
	if err := db.Reader().QueryRowContext(context.Background(), query).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkBlock480 measures block 4.8.0 converting n dotted ipam_ip keynames to hexip.
func BenchmarkBlock480(b *testing.B) {
	for _, n := range []int{50_000, 200_000} {
		b.Run(fmt.Sprintf("ips=%d", n), func(b *testing.B) {
			var last benchIPAMRun
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				db := benchDB(b, b.TempDir())
				benchFill(b, db, []string{
					"UPDATE schemas SET keyname_mode = 'edit' WHERE keyname = 'ipam_ip'",
					"DELETE FROM schema_fields WHERE classname = 'ipam_ip' AND keyname = 'collected'",
					"UPDATE registry SET value = '4.7.0' WHERE key = 'DB_VERSION'",
				}, benchInsertInstance, n, func(i int) []any {
					addr := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
					return []any{"ipam_ip", addr, `{"hostname":"host-` + strconv.Itoa(i) + `"}`}
				})
				last = timeRun(b, db, n)
				if got := benchCount(b, db, "SELECT count(*) FROM instances WHERE classname = 'ipam_ip' AND keyname LIKE '%.%'"); got != 0 {
					b.Fatalf("%d dotted ipam_ip keynames left", got)
				}
				if got := benchCount(b, db, "SELECT count(*) FROM instances WHERE classname = 'ipam_ip' AND displayname LIKE '10.%'"); got != n {
					b.Fatalf("%d converted ipam_ip, want %d", got, n)
				}
				db.Close()
			}
			last.report(b)
		})
	}
}

// BenchmarkBlock490 measures block 4.9.0 renaming n free-text ipam_subnet instances to
// their CIDR and rewriting the references of 4n ipam_vlan instances (two subnets each).
// instances/s counts subnets and vlans.
func BenchmarkBlock490(b *testing.B) {
	for _, n := range []int{12_500, 50_000} {
		vlans := 4 * n
		b.Run(fmt.Sprintf("subnets=%d,vlans=%d", n, vlans), func(b *testing.B) {
			var last benchIPAMRun
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				db := benchDB(b, b.TempDir())
				benchFill(b, db, []string{
					"UPDATE schemas SET keyname_mode = 'edit' WHERE keyname = 'ipam_subnet'",
					`INSERT INTO schema_fields(classname, keyname, displayname, dataformat, dataformat_ext, sort_order)
						VALUES('ipam_subnet', 'subnet', 'Subnet', 'ipv4', 'subnet', 5)`,
					"UPDATE registry SET value = '4.8.0' WHERE key = 'DB_VERSION'",
				}, benchInsertInstance, n+vlans, func(i int) []any {
					if i < n {
						return []any{"ipam_subnet", "net-" + strconv.Itoa(i),
							fmt.Sprintf(`{"subnet":"10.%d.%d.0/24","site":"s%d"}`, i>>8&255, i&255, i%7)}
					}
					j := i - n
					return []any{"ipam_vlan", "vlan-" + strconv.Itoa(j),
						fmt.Sprintf(`{"vlan_id":%d,"subnet":["net-%d","net-%d"]}`, j%4094+1, j%n, (j*7+1)%n)}
				})
				last = timeRun(b, db, n+vlans)
				if got := benchCount(b, db, "SELECT count(*) FROM instances WHERE classname = 'ipam_subnet' AND keyname LIKE 'net-%'"); got != 0 {
					b.Fatalf("%d subnets not renamed", got)
				}
				if got := benchCount(b, db, `SELECT count(*) FROM instances WHERE classname = 'ipam_vlan' AND data LIKE '%net-%'`); got != 0 {
					b.Fatalf("%d vlans still reference free-text subnets", got)
				}
				db.Close()
			}
			last.report(b)
		})
	}
}
