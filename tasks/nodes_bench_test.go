package tasks_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"dataservice/bootstrap"
	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
	"dataservice/tasks"
)

// maxNodes is the most nodes BenchmarkPipelineNodes runs, and the number of schemas
// of its database.
const maxNodes = 4

// nodesDB returns the address of a template database (testkit.Template) holding
// maxNodes schemas item1..item4 of m instances each and the bench pipeline.
func nodesDB(b *testing.B, m int) string {
	b.Helper()
	src, err := testkit.Template(fmt.Sprintf("tasks-nodes-%d", m), func(db *store.DB) error {
		testkit.Bootstrap(b, db, bootstrap.Options{})
		for s := 1; s <= maxNodes; s++ {
			mustLoad(b, db, fmt.Sprintf(`
- classname: _schema
  keyname: item%d
  f1: {dataformat: string}
  f2: {dataformat: string}
  f3: {dataformat: string}
  f4: {dataformat: string}
  f5: {dataformat: string}
  f6: {dataformat: string}
`, s))
		}
		addPipeline(b, db, "bench", benchPipeline, "")
		start := time.Now()
		for s := 1; s <= maxNodes; s++ {
			if err := insertBenchItems(b, db, fmt.Sprintf("item%d", s), m); err != nil {
				return err
			}
		}
		b.Logf("built %d schemas of %d instances in %v", maxNodes, m, time.Since(start).Round(time.Millisecond))
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return src
}

// BenchmarkPipelineNodes is pipeline throughput with 1, 2 and 4 nodes sharing one
// PostgreSQL database: every run starts from a copy of the same database of 4
// schemas of BENCH_N instances each (the bench schema and data of BenchmarkPipeline);
// with N nodes, node i (a store.DB with its own pools and a tasks.Runner, all in this
// process) submits one run of the five-rule pipeline over schema item<i> and runs it
// (RunOne), the N nodes at once. One task runs on one node, so N nodes need N tasks
// over N schemas. Reported: every instance processed over the wall clock of the
// slowest node (instances/s), the mean of the nodes' own rates (node-instances/s)
// and the slowest node's, and the process's CPU time per instance. "real" writes
// every instance (each batch a write transaction taking the global advisory writer
// lock); "dry" writes only its checkpoints. SQLite has one writer process per file:
// it skips.
func BenchmarkPipelineNodes(b *testing.B) {
	if !testkit.Postgres() {
		b.Skip("PostgreSQL only: several nodes share one PostgreSQL database (run with DATASERVICE_TEST_DB=postgres)")
	}
	m := benchSizes()[0]
	quiet := slog.New(slog.DiscardHandler)
	for _, mode := range []string{"real", "dry"} {
		for _, nodes := range []int{1, 2, maxNodes} {
			b.Run(fmt.Sprintf("m=%d/%s/nodes=%d", m, mode, nodes), func(b *testing.B) {
				src := nodesDB(b, m)
				b.ResetTimer()
				var cpu, wall time.Duration
				var nodeRate, slowest float64
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					addr := testkit.FromTemplate(b, src)
					runners := make([]*tasks.Runner, nodes)
					handles := make([]string, nodes)
					dbs := make([]*store.DB, nodes)
					for n := range nodes {
						db, err := testkit.OpenStore(b, addr, store.Options{Logger: quiet})
						if err != nil {
							b.Fatal(err)
						}
						dbs[n] = db
						runners[n] = tasks.New(db, tasks.Options{BatchSize: 1000, Workers: 1, Logger: quiet})
						h, err := runners[n].Submit(context.Background(), tasks.Params{Pipeline: "bench",
							Schemas: []string{fmt.Sprintf("item%d", n+1)}, DryRun: mode == "dry",
							Auth: model.SystemAuth(), OwnerType: "api", OwnerID: "system"})
						if err != nil {
							b.Fatal(err)
						}
						handles[n] = h
					}
					took := make([]time.Duration, nodes)
					var wg sync.WaitGroup
					start := make(chan struct{})
					for n := range nodes {
						wg.Add(1)
						go func() {
							defer wg.Done()
							<-start
							t0 := time.Now()
							if err := runners[n].RunOne(context.Background(), handles[n]); err != nil {
								b.Error(err)
							}
							took[n] = time.Since(t0)
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
					worst := 0.0
					for n := range nodes {
						task, err := runners[n].Get(context.Background(), handles[n])
						if err != nil {
							b.Fatal(err)
						}
						if task.Status != tasks.StatusSucceeded || task.Result.Updated != int64(m) {
							b.Fatalf("node %d: task %s: %+v", n+1, task.Status, task.Result)
						}
						r := float64(m) / took[n].Seconds()
						sum += r
						if worst == 0 || r < worst {
							worst = r
						}
					}
					nodeRate += sum / float64(nodes)
					slowest += worst
					for _, db := range dbs {
						db.Close()
					}
				}
				total := float64(nodes*m*b.N) / wall.Seconds()
				b.ReportMetric(total, "instances/s")
				b.ReportMetric(nodeRate/float64(b.N), "node-instances/s")
				b.ReportMetric(slowest/float64(b.N), "slowest-node-instances/s")
				b.ReportMetric(float64(nodes*m*b.N)/cpu.Seconds(), "instances/cpu-s")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
