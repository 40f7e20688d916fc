package main

import (
	"context"
	"database/sql"
	"os"
	"testing"

	"dataservice/internal/testkit"
)

// TestPostgresPass is the sentinel of the PostgreSQL pass: the whole suite runs a second
// time against a PostgreSQL cluster (DATASERVICE_TEST_DB=postgres, with the cluster's URL
// in DATASERVICE_TEST_PG; .ci/run starts a throwaway one with .ci/postgres.sh). On a fresh
// clone without PostgreSQL this test skips, saying the pass did not run; in CI
// (DATASERVICE_REQUIRE_POSTGRES=1) it fails instead, so the pass cannot be lost silently.
func TestPostgresPass(t *testing.T) {
	addr, err := testkit.PostgresCluster()
	if err != nil {
		if os.Getenv(testkit.EnvRequirePostgres) == "1" {
			t.Fatalf("the PostgreSQL pass cannot run: %v", err)
		}
		t.Skipf("skipped: the PostgreSQL pass did not run (%v); `bash .ci/run` runs it against a throwaway cluster", err)
	}
	// The cluster can hold the service's databases: the kit makes one per test, and the
	// layout needs pg_trgm.
	db, err := sql.Open("pgx", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var trgm int
	if err := db.QueryRowContext(context.Background(),
		"SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_trgm'").Scan(&trgm); err != nil {
		t.Fatalf("query the test cluster: %v", err)
	}
	if trgm != 1 {
		t.Fatal("the test cluster has no pg_trgm extension (Debian: postgresql-contrib is part of postgresql)")
	}
	if os.Getenv(testkit.EnvRequirePostgres) == "1" && !testkit.Postgres() {
		t.Logf("this is the SQLite pass; .ci/run runs the PostgreSQL pass next")
	}
}
