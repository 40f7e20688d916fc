package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/codec"
	"dataservice/store/model"
)

// BenchmarkSearchSteadyLoad measures the search index's lag under steady writes, as
// requests make them: BENCH_N bplain instances, their index caught up, then 8 writers
// each updating one random instance per transaction through Apply (BENCH_STEADY_WRITES
// writes in all, default 20,000, at most 2 minutes) while the catch-up runs as serve
// runs it and one client searches for a random instance's number. Sampled every 10 ms:
// the most rows behind (max-behind-rows) and the greatest seconds behind as the metric
// gives it (max-behind-ms: the time since the list was last seen empty, an upper bound
// on the oldest listed row's age); writes/s is the writers' rate, search-p50-ms and search-p99-ms the
// searches' latency meanwhile. SQLite only (PostgreSQL's engine keeps its index in
// every write).
func BenchmarkSearchSteadyLoad(b *testing.B) {
	testkit.SQLiteOnly(b, "the search index's catch-up is SQLite's; PostgreSQL's engine keeps pg_trgm in every write")
	n := scaleN()
	writes := 20_000
	if v, err := strconv.Atoi(os.Getenv("BENCH_STEADY_WRITES")); err == nil && v > 0 {
		writes = v
	}
	ctx := context.Background()
	b.Run(fmt.Sprintf("n=%d/writers=8", n), func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			db := newTestDB(b)
			mustLoad(b, db, benchSchema+benchSites(), store.LoadOptions{})
			path := writeScaleFile(b, n)
			readAll := func(fn func(*model.Entry) error) error {
				f, err := os.Open(path)
				if err != nil {
					return err
				}
				defer f.Close()
				return codec.StreamDocument("load.yml", f, fn)
			}
			if _, err := db.LoadStream(ctx, readAll, store.LoadOptions{}); err != nil {
				b.Fatal(err)
			}
			if _, err := db.CatchUpSearch(ctx); err != nil {
				b.Fatal(err)
			}
			sch, err := db.Schema(ctx, "bplain")
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			steadyLoad(b, db, sch, n, writes)
		}
	})
}

// steadyLoad runs the writers, the catch-up, the searcher and the sampler of
// BenchmarkSearchSteadyLoad, and reports their figures.
func steadyLoad(b *testing.B, db *store.DB, sch *model.Schema, n, writes int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	catchUpDone := make(chan struct{})
	catchCtx, stopCatchUp := context.WithCancel(ctx)
	go func() {
		defer close(catchUpDone)
		db.RunSearchCatchUp(catchCtx, nil)
	}()
	var left atomic.Int64
	left.Store(int64(writes))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	t0 := time.Now()
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 26))
			for left.Add(-1) >= 0 && ctx.Err() == nil {
				key, _, _, _, _ := benchRow(rng.IntN(n))
				old, err := db.Instance(ctx, "bplain", key)
				if err != nil {
					errs <- err
					return
				}
				next := *old
				next.Data = make(map[string]any, len(old.Data))
				for k, v := range old.Data {
					next.Data[k] = v
				}
				next.Data["port"] = int64(1 + rng.IntN(65535))
				if _, err := db.Apply(ctx, store.Write{Schema: sch, Old: old, New: &next, Action: model.ActionUpdate},
					store.ApplyOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	writersDone := make(chan struct{})
	go func() { wg.Wait(); close(writersDone) }()

	var searches []time.Duration
	var maxRows int64
	var maxAge time.Duration
	sample := time.NewTicker(10 * time.Millisecond)
	defer sample.Stop()
	rng := rand.New(rand.NewPCG(26, 26))
	next := time.Now()
loop:
	for {
		select {
		case <-writersDone:
			break loop
		case <-sample.C:
			lag, err := db.SearchLag(ctx)
			if err != nil {
				b.Fatal(err)
			}
			maxRows = max(maxRows, lag.Rows)
			if !lag.Since.IsZero() {
				maxAge = max(maxAge, time.Since(lag.Since))
			}
			if time.Now().After(next) { // a search every 50 ms
				next = time.Now().Add(50 * time.Millisecond)
				s0 := time.Now()
				if _, _, err := db.SearchInstances(ctx, sch, fmt.Sprintf("%06d", rng.IntN(n)), 0, 50); err != nil {
					b.Fatal(err)
				}
				searches = append(searches, time.Since(s0))
			}
		}
	}
	elapsed := time.Since(t0)
	b.StopTimer()
	stopCatchUp()
	<-catchUpDone
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	if ctx.Err() != nil {
		b.Fatalf("the writers did not finish %d writes in 2 minutes", writes)
	}
	slices.Sort(searches)
	b.ReportMetric(float64(writes)/elapsed.Seconds(), "writes/s")
	b.ReportMetric(float64(maxRows), "max-behind-rows")
	b.ReportMetric(float64(maxAge.Milliseconds()), "max-behind-ms")
	if len(searches) > 0 {
		b.ReportMetric(float64(searches[len(searches)/2].Microseconds())/1000, "search-p50-ms")
		b.ReportMetric(float64(searches[len(searches)*99/100].Microseconds())/1000, "search-p99-ms")
	}
	b.ReportMetric(0, "ns/op")
}
