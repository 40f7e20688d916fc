package tasks

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"dataservice/rules"
	"dataservice/store"
	"dataservice/store/model"
)

// BenchmarkProcess measures the per-instance work of a pipeline run beyond reading
// (entry, rules, new state, the store's checks and comparison) on 1000 instances held
// in memory, in a dry run: ns/op and allocs/op are per instance.
func BenchmarkProcess(b *testing.B) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(b.TempDir(), "p.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	fields := map[string]any{"classname": "_schema", "keyname": "item"}
	for i := 1; i <= 6; i++ {
		fields[fmt.Sprintf("f%d", i)] = map[string]any{"dataformat": "string"}
	}
	var entries []*model.Entry
	entries = append(entries, model.NewEntry(fields))
	for i := 0; i < 1000; i++ {
		entries = append(entries, model.NewEntry(map[string]any{"classname": "item", "keyname": fmt.Sprintf("item-%07d", i),
			"f1": fmt.Sprintf("Host-%07d-ABCDEF", i), "f2": fmt.Sprintf("value-%07d", i), "f3": fmt.Sprintf("three-%07d", i),
			"f4": fmt.Sprintf("a-b-c-d-%07d", i), "f5": fmt.Sprintf("copy-me-%07d-xyz", i), "f6": fmt.Sprintf("old-value-%07d-tail", i)}))
	}
	if res, err := db.Load(ctx, entries, store.LoadOptions{}); err != nil || res.Errors != 0 {
		b.Fatalf("load: %v %v", err, res)
	}
	content, err := os.ReadFile("testdata/bench_pipeline.yml") // BenchmarkPipeline's rules
	if err != nil {
		b.Fatal(err)
	}
	compiled, err := rules.Parse(string(content))
	if err != nil {
		b.Fatal(err)
	}
	tx, err := db.BeginRead(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback()
	s, err := tx.Schema(ctx, "item")
	if err != nil {
		b.Fatal(err)
	}
	batch, err := tx.Instances(ctx, "item", 0, 1000)
	if err != nil || len(batch) != 1000 {
		b.Fatalf("instances: %d, %v", len(batch), err)
	}
	x := &pipelineRun{p: &params{DryRun: true}, auth: model.SystemAuth(), rules: compiled, res: &Result{}, now: time.Now()}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := x.process(ctx, tx, s, batch[i%len(batch)]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if x.res.Updated != int64(b.N) {
		b.Fatalf("updated %d of %d: %v", x.res.Updated, b.N, x.res.ErrorMessages)
	}
}
