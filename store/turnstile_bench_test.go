package store_test

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// BenchmarkOneTransactionWork measures the writes that stay one transaction however
// large they are, so their documented bound (docs/operations.md) has a figure: the
// cascading rename of an instance BENCH_N others reference, and deleting a field from
// a class of BENCH_N instances. A writer in another process waits for all of it.
func BenchmarkOneTransactionWork(b *testing.B) {
	n := scaleN()
	setup := func(b *testing.B) *store.DB {
		db := testkit.Open(b, filepath.Join(b.TempDir(), "one.db"), testkit.Options{})
		testkit.MustLoad(b, db, `
- {classname: _schema, keyname: target, note: {dataformat: string}}
- {classname: _schema, keyname: user, to: {dataformat: schema, dataformat_ext: target}, note: {dataformat: string}}
- {classname: target, keyname: t0}
`, store.LoadOptions{System: true})
		rows := make([]testkit.Row, n)
		for i := range rows {
			key := "u" + strconv.Itoa(i)
			rows[i] = testkit.Row{Keyname: key, Displayname: key, Enabled: true, Data: map[string]any{"to": "t0", "note": key}}
		}
		testkit.InsertInstances(b, db, "user", rows)
		return db
	}
	b.Run("rename-referenced", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			db := setup(b)
			b.StartTimer()
			start := time.Now()
			rep, err := testkit.Rename(b, db, "bench", "target", "t0", "t1")
			if err != nil || rep.References != n {
				b.Fatalf("rename: %v (%+v)", err, rep)
			}
			b.ReportMetric(float64(n)/time.Since(start).Seconds(), "refs/s")
		}
	})
	b.Run("delete-field", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			db := setup(b)
			b.StartTimer()
			start := time.Now()
			testkit.MustLoad(b, db, "- {classname: _schema, keyname: user, note: {_action: delete}}\n",
				store.LoadOptions{System: true})
			b.ReportMetric(float64(n)/time.Since(start).Seconds(), "instances/s")
		}
	})
}
