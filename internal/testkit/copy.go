package testkit

import (
	"net/url"
	"strings"
	"testing"

	"dataservice/store"
)

// CopyPostgres is the URL of a new database of the test cluster holding a copy of
// the PostgreSQL database at addr (made with CREATE DATABASE … TEMPLATE, dropped when
// the test ends). No session may be connected to the database at addr meanwhile: its
// handles must have closed their idle connections.
func CopyPostgres(tb testing.TB, addr string) string {
	tb.Helper()
	u, err := url.Parse(addr)
	if err != nil {
		tb.Fatalf("testkit: copy %s: the URL does not parse", store.RedactURL(addr))
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" || strings.ContainsAny(name, "\"'; /") {
		tb.Fatalf("testkit: copy %s: no database name", store.RedactURL(addr))
	}
	return newPostgresDatabase(tb, name)
}
