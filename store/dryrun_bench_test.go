package store_test

import (
	"context"
	"testing"

	"dataservice/store"
)

// BenchmarkDryRunLoad loads BENCH_N entries (default 100,000) of each dry-run shape
// (dryShapes) into a database holding the shapes' class: "dryrun" is the product, a
// dry-run load; "real" is its comparison, a real load of the same entries in the same
// run. Each iteration starts from a fresh database and freshly parsed entries (set up
// with the timer stopped). Aim: dryrun costs at most 3x real.
func BenchmarkDryRunLoad(b *testing.B) {
	n := scaleN()
	ctx := context.Background()
	for _, shape := range dryShapes {
		for _, mode := range []string{"dryrun", "real"} {
			b.Run(shape+"/"+mode, func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					db := dryShapeDB(b)
					entries := dryShapeEntries(b, shape, n)
					b.StartTimer()
					res, err := db.Load(ctx, entries, store.LoadOptions{DryRun: mode == "dryrun"})
					if err != nil {
						b.Fatal(err)
					}
					if res.Errors != 0 {
						b.Fatalf("%d errors: %s", res.Errors, messages(res))
					}
				}
				b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "entries/s")
			})
		}
	}
}
