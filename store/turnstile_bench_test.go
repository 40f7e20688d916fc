package store_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// BenchmarkWriteTxBegin is what the turnstile costs a write transaction: "store"
// begins (BEGIN IMMEDIATE through the turnstile) and rolls back an empty write
// transaction; "floor" does the same on a plain connection with the store's pragmas,
// no turnstile. A load of n entries begins n/1000 transactions (or one a quarter of a
// second); the difference times that is the turnstile's share of the load.
func BenchmarkWriteTxBegin(b *testing.B) {
	ctx := context.Background()
	b.Run("store", func(b *testing.B) {
		db := testkit.Open(b, filepath.Join(b.TempDir(), "tx.db"), testkit.Options{})
		for b.Loop() {
			tx, err := db.BeginAs(ctx, store.Revisions{})
			if err != nil {
				b.Fatal(err)
			}
			tx.Rollback()
		}
	})
	b.Run("floor", func(b *testing.B) {
		db := testkit.OpenFloorDB(b)
		for b.Loop() {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			tx.Rollback()
		}
	})
}

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
