package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"dataservice/builtin"
	"dataservice/store"
)

// fixedNow is the clock of every test database.
var fixedNow = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// tbWriter sends log output to t.Log.
type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Helper()
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// newTestDB opens a fresh database file in t.TempDir() with the built-in definitions
// loaded as bootstrap loads them: 00_permission.yml first, then the other files in name
// order, with every permission and without revisions.
func newTestDB(tb testing.TB) *store.DB {
	tb.Helper()
	db := openEmptyDB(tb)
	loadBuiltins(tb, db)
	return db
}

// openEmptyDB opens a fresh database file without any definitions.
func openEmptyDB(tb testing.TB) *store.DB {
	tb.Helper()
	logger := slog.New(slog.NewTextHandler(tbWriter{tb}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := store.Open(context.Background(), filepath.Join(tb.TempDir(), "test.db"), store.Options{Logger: logger})
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	db.Now = func() time.Time { return fixedNow }
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return db
}

func loadBuiltins(tb testing.TB, db *store.DB) {
	tb.Helper()
	fsys := builtin.Init()
	names, err := fs.Glob(fsys, "*.yml")
	if err != nil {
		tb.Fatalf("list built-ins: %v", err)
	}
	sort.Strings(names)
	order := []string{"00_permission.yml"}
	for _, n := range names {
		if n != "00_permission.yml" {
			order = append(order, n)
		}
	}
	for _, n := range order {
		data, err := fs.ReadFile(fsys, n)
		if err != nil {
			tb.Fatalf("read %s: %v", n, err)
		}
		entries, err := store.ParseDocument(n, data)
		if err != nil {
			tb.Fatalf("parse %s: %v", n, err)
		}
		res, err := db.Load(context.Background(), entries, store.LoadOptions{System: true, NoRevisions: true})
		if err != nil {
			tb.Fatalf("load %s: %v", n, err)
		}
		if res.Errors != 0 {
			tb.Fatalf("load %s: %d errors: %v", n, res.Errors, res.Messages)
		}
	}
}

// parse parses a YAML/JSON document or fails the test.
func parse(tb testing.TB, doc string) []*store.Entry {
	tb.Helper()
	entries, err := store.ParseDocument("test.yml", []byte(doc))
	if err != nil {
		tb.Fatalf("parse: %v", err)
	}
	return entries
}

// load parses doc and loads it with opts; a load-level error fails the test
// (per-entry errors are in the result).
func load(tb testing.TB, db *store.DB, doc string, opts store.LoadOptions) *store.LoadResult {
	tb.Helper()
	res, err := db.Load(context.Background(), parse(tb, doc), opts)
	if err != nil {
		tb.Fatalf("load: %v", err)
	}
	return res
}

// mustLoad is load that also fails the test on any per-entry error.
func mustLoad(tb testing.TB, db *store.DB, doc string, opts store.LoadOptions) *store.LoadResult {
	tb.Helper()
	res := load(tb, db, doc, opts)
	if res.Errors != 0 {
		tb.Fatalf("load: %d errors: %v", res.Errors, res.Messages)
	}
	return res
}

// counts renders the outcome counters of a result, for comparisons.
func counts(r *store.LoadResult) string {
	return fmt.Sprintf("created=%d updated=%d unchanged=%d deleted=%d enabled=%d disabled=%d skipped=%d errors=%d",
		r.Created, r.Updated, r.Unchanged, r.Deleted, r.Enabled, r.Disabled, r.Skipped, r.Errors)
}

// messages joins the per-entry error messages of a result.
func messages(r *store.LoadResult) string {
	var parts []string
	for _, m := range r.Messages {
		parts = append(parts, m.String())
	}
	return strings.Join(parts, "\n")
}

// instance reads an instance or fails the test.
func instance(tb testing.TB, db *store.DB, cls, key string) *store.Instance {
	tb.Helper()
	in, err := db.Instance(context.Background(), cls, key)
	if err != nil {
		tb.Fatalf("read %s %s: %v", cls, key, err)
	}
	return in
}

// absent fails the test when the instance exists.
func absent(tb testing.TB, db *store.DB, cls, key string) {
	tb.Helper()
	_, err := db.Instance(context.Background(), cls, key)
	if got, want := store.ErrorCode(err), store.ENotFound; got != want {
		tb.Fatalf("read %s %s: error code %q (%v), want %q", cls, key, got, err, want)
	}
}

// queryInt runs a query returning one integer through the read pool.
func queryInt(tb testing.TB, db *store.DB, query string, args ...any) int {
	tb.Helper()
	var n int
	if err := db.Reader().QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
	return n
}

// queryString runs a query returning one text value (NULL reads as "<null>").
func queryString(tb testing.TB, db *store.DB, query string, args ...any) string {
	tb.Helper()
	var s sql.NullString
	if err := db.Reader().QueryRowContext(context.Background(), query, args...).Scan(&s); err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
	if !s.Valid {
		return "<null>"
	}
	return s.String
}

// exec runs a raw statement in a write transaction (to set up states loads cannot).
func exec(tb testing.TB, db *store.DB, query string, args ...any) {
	tb.Helper()
	err := db.WithTx(context.Background(), func(tx *store.Tx) error {
		_, err := tx.ExecContext(context.Background(), query, args...)
		return err
	})
	if err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
}

// userAuth is a user context holding exactly perms.
func userAuth(perms ...string) *store.Auth {
	return &store.Auth{Kind: "user", Name: "tester", User: "tester", Perms: perms}
}

// fmtValue renders a stored value with its Go type, so 1 and "1" differ.
func fmtValue(v any) string { return fmt.Sprintf("%T(%v)", v, v) }

// serverSchema is a user schema used by many tests.
const serverSchema = `
- classname: _schema
  keyname: site
  displayname: Sites
  city: {dataformat: string}
- classname: _schema
  keyname: server
  displayname: Servers
  hostname: {dataformat: string}
  port: {dataformat: int, dataformat_ext: gte_1 lte_65535}
  mgmt_ip: {dataformat: ipv4}
  tags: {dataformat: string, cardinal_max: 0}
  site: {dataformat: schema, dataformat_ext: site}
  site_city: {dataformat: external, dataformat_ext: site city}
`
