package testkit

import (
	"os"
	"testing"
)

// NewPostgresAddress is the URL of a new, empty database of the test cluster
// (dropped when the test ends) on either pass, for tests that move data between the
// engines. Without a cluster (DATASERVICE_TEST_PG unset or unreachable) the test
// skips saying so, or fails where the PostgreSQL pass is required (CI).
func NewPostgresAddress(tb testing.TB) string {
	tb.Helper()
	if _, err := PostgresCluster(); err != nil {
		if os.Getenv(EnvRequirePostgres) != "" {
			tb.Fatalf("no PostgreSQL cluster, and %s is set: %v", EnvRequirePostgres, err)
		}
		tb.Skipf("no PostgreSQL cluster to copy to and from (set %s to a cluster's URL): %v", EnvPostgres, err)
	}
	return newPostgresDatabase(tb, "")
}
