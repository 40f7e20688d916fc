package bootstrap_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"dataservice/bootstrap"
	"dataservice/builtin"
	"dataservice/internal/testkit"
	"dataservice/store"
)

// benchOptions start with the embedded built-ins and a discarding logger.
func benchOptions(adminPassword string) bootstrap.Options {
	return bootstrap.Options{Version: testVersion, VersionDate: testVersionDate, Init: builtin.Init(),
		AdminPassword: adminPassword}
}

// BenchmarkStartupEmpty measures the first start of the service: Open on a new file
// and Run (bootstrap and every block). Aim: under 200 ms.
func BenchmarkStartupEmpty(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	o := benchOptions("")
	n := 0
	for b.Loop() {
		n++
		db, err := testkit.OpenStore(b, filepath.Join(dir, fmt.Sprintf("empty-%d.db", n)), store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := bootstrap.Run(ctx, testkit.Migrator(b, db), o); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkStartupUpToDate measures a start with nothing pending (Run only). Without an
// admin password nothing is hashed; with a matching one each start pays one argon2id
// verification. Aim: under 30 ms without the password.
func BenchmarkStartupUpToDate(b *testing.B) {
	for _, c := range []struct{ name, password string }{
		{"no admin password", ""},
		{"admin password matches", "bench-admin-password"},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			db, err := testkit.OpenStore(b, filepath.Join(b.TempDir(), "data.db"), store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			o := benchOptions(c.password)
			if err := bootstrap.Run(ctx, testkit.Migrator(b, db), o); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := bootstrap.Run(ctx, testkit.Migrator(b, db), o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStartupFloor is the floor of BenchmarkStartupUpToDate without a password:
// the reads an up-to-date start cannot avoid (DB_VERSION, INSTANCE_UUID and the
// configuration), each one query on the same file, in one read transaction.
func BenchmarkStartupFloor(b *testing.B) {
	ctx := context.Background()
	db, err := testkit.OpenStore(b, filepath.Join(b.TempDir(), "data.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if err := bootstrap.Run(ctx, testkit.Migrator(b, db), benchOptions("")); err != nil {
		b.Fatal(err)
	}
	// The store hands out no raw pool: the floor reads through a read-only pool of
	// its own on the same file, as the store's read pool would.
	pool, err := sql.Open("sqlite", "file:"+db.Path()+"?mode=ro&_pragma=busy_timeout(15000)&_pragma=query_only(1)")
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	for b.Loop() {
		tx, err := pool.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		var v, u string
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT value FROM registry WHERE key = 'DB_VERSION'").Scan(&v); err != nil {
			b.Fatal(err)
		}
		if err := tx.QueryRowContext(ctx, "SELECT value FROM registry WHERE key = 'INSTANCE_UUID'").Scan(&u); err != nil {
			b.Fatal(err)
		}
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM configuration").Scan(&n); err != nil {
			b.Fatal(err)
		}
		tx.Rollback()
	}
}
