package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"dataservice/store"
)

// BenchmarkSearchIndexLayout measures the first start of a file written before the
// search index: BENCH_N instances (about 200 bytes of JSON each), the index's
// objects dropped and the layout version set back, then store.Open builds the index
// (timed).
func BenchmarkSearchIndexLayout(b *testing.B) {
	n := scaleN()
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		path := filepath.Join(b.TempDir(), "old.db")
		db, err := store.Open(ctx, path, store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		db.Close()
		sdb, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
		if err != nil {
			b.Fatal(err)
		}
		sdb.SetMaxOpenConns(1)
		tx, err := sdb.Begin()
		if err != nil {
			b.Fatal(err)
		}
		for _, q := range []string{"DROP TRIGGER instances_search_insert", "DROP TRIGGER instances_search_delete",
			"DROP TRIGGER instances_search_move", "DROP TABLE instances_search_staged", "DROP TABLE instances_search_dirty", "DROP TABLE instances_search",
			"DROP TABLE nodes", "DROP TABLE node_salt", "DROP TABLE throttle", "DROP TABLE events"} {
			if _, err := tx.Exec(q); err != nil {
				b.Fatal(err)
			}
		}
		st, err := tx.Prepare(`INSERT INTO instances(id, classname, keyname, data, created_at, updated_at) VALUES(?, 'item', ?, ?, '', '')`)
		if err != nil {
			b.Fatal(err)
		}
		for j := range n {
			data := fmt.Sprintf(`{"f1":"Host-%07d-ABCDEF","f2":"value-%07d","f3":"three-%07d","f4":"a-b-c-d-%07d","f5":"copy-me-%07d-xyz","f6":"old-value-%07d-tail"}`,
				j, j, j, j, j, j)
			if _, err := st.Exec(int64(j+1000), fmt.Sprintf("item-%07d", j), data); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := tx.Exec("PRAGMA user_version = 9"); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		sdb.Close()
		b.StartTimer()
		t0 := time.Now()
		db, err = store.Open(ctx, path, store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		b.ReportMetric(time.Since(t0).Seconds(), "open-s")
		var size int64
		if err := db.Reader().QueryRowContext(context.Background(), "SELECT page_count * page_size FROM pragma_page_count, pragma_page_size").Scan(&size); err != nil {
			b.Fatal(err)
		}
		var index int64
		db.Reader().QueryRowContext(context.Background(), "SELECT sum(pgsize) FROM dbstat WHERE name LIKE 'instances_search%'").Scan(&index)
		b.ReportMetric(float64(size)/(1<<20), "file-MB")
		b.ReportMetric(float64(index)/(1<<20), "index-MB")
		db.Close()
		b.StartTimer()
	}
	b.ReportMetric(0, "ns/op")
}
