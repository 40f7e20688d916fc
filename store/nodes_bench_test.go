package store_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
)

// BenchmarkLoadNodes is concurrent writers from several nodes on one PostgreSQL
// database: N nodes (each a store.DB with its own pools, all in this process), each
// loading BENCH_N new instances into a schema of its own (bplain1..bplain4, the
// fields of bplain) at once, through the streamed load the CLI uses. Every write
// transaction takes the one global advisory writer lock first, so the nodes' batches
// take turns: total throughput cannot grow with nodes, and each node's own rate is
// about 1/N of the total when the lock queues fairly. Reported: every instance
// loaded over the wall clock of the slowest node (instances/s), the mean of the
// nodes' own rates (node-instances/s), the slowest node's, the spread between the
// first and last node to finish (finish-spread-%, of the slowest node's time: small
// when the lock is shared fairly), and the process's CPU time per instance. SQLite
// has one writer process per file: it skips.
func BenchmarkLoadNodes(b *testing.B) {
	if !testkit.Postgres() {
		b.Skip("PostgreSQL only: several nodes share one PostgreSQL database (run with DATASERVICE_TEST_DB=postgres)")
	}
	m := scaleN()
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	const nodesMax = 4
	src, err := testkit.Template("store-load-nodes", func(db *store.DB) error {
		testkit.LoadBuiltins(b, db)
		for s := 1; s <= nodesMax; s++ {
			mustLoad(b, db, fmt.Sprintf(`- classname: _schema
  keyname: bplain%d
  hostname: {dataformat: string}
  port: {dataformat: int, dataformat_ext: gte_1 lte_65535}
  ip: {dataformat: string}
  site: {dataformat: string}
`, s), store.LoadOptions{})
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, nodes := range []int{1, 2, nodesMax} {
		b.Run(fmt.Sprintf("m=%d/nodes=%d", m, nodes), func(b *testing.B) {
			var cpu, wall time.Duration
			var nodeRate, slowest, spread float64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				addr := testkit.FromTemplate(b, src)
				dbs := make([]*store.DB, nodes)
				for n := range nodes {
					db, err := testkit.OpenStore(b, addr, store.Options{Logger: quiet})
					if err != nil {
						b.Fatal(err)
					}
					dbs[n] = db
				}
				took := make([]time.Duration, nodes)
				var wg sync.WaitGroup
				start := make(chan struct{})
				for n := range nodes {
					wg.Add(1)
					go func() {
						defer wg.Done()
						cls := fmt.Sprintf("bplain%d", n+1)
						source := func(yield func(*model.Entry) error) error {
							for j := 0; j < m; j++ {
								key, host, port, ip, site := benchRow(j)
								if err := yield(model.NewEntry(map[string]any{"classname": cls, "keyname": key,
									"hostname": host, "port": port, "ip": ip, "site": site})); err != nil {
									return err
								}
							}
							return nil
						}
						<-start
						t0 := time.Now()
						res, err := dbs[n].LoadStream(ctx, source, store.LoadOptions{})
						took[n] = time.Since(t0)
						if err != nil {
							b.Error(err)
						} else if res.Created != m || res.Errors != 0 {
							b.Errorf("node %d: %s %s", n+1, counts(res), messages(res))
						}
					}()
				}
				c0, t0 := cpuTime(), time.Now()
				b.StartTimer()
				close(start)
				wg.Wait()
				b.StopTimer()
				wall += time.Since(t0)
				cpu += cpuTime() - c0
				var sum float64
				first, last := took[0], took[0]
				for _, d := range took {
					sum += float64(m) / d.Seconds()
					first, last = min(first, d), max(last, d)
				}
				nodeRate += sum / float64(nodes)
				slowest += float64(m) / last.Seconds()
				spread += 100 * (last - first).Seconds() / last.Seconds()
				for _, db := range dbs {
					db.Close()
				}
			}
			b.ReportMetric(float64(nodes*m*b.N)/wall.Seconds(), "instances/s")
			b.ReportMetric(nodeRate/float64(b.N), "node-instances/s")
			b.ReportMetric(slowest/float64(b.N), "slowest-node-instances/s")
			b.ReportMetric(spread/float64(b.N), "finish-spread-%")
			b.ReportMetric(float64(nodes*m*b.N)/cpu.Seconds(), "instances/cpu-s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
