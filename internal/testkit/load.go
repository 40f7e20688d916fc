package testkit

import (
	"context"
	"testing"

	"dataservice/store"
	"dataservice/store/codec"
	"dataservice/store/model"
)

// Parse parses a YAML/JSON document or fails the test.
func Parse(tb testing.TB, doc string) []*model.Entry {
	tb.Helper()
	entries, err := codec.ParseDocument("test.yml", []byte(doc))
	if err != nil {
		tb.Fatalf("parse: %v", err)
	}
	return entries
}

// Load parses doc and loads it with opts; a load-level error fails the test
// (per-entry errors are in the result).
func Load(tb testing.TB, db *store.DB, doc string, opts store.LoadOptions) *store.LoadResult {
	tb.Helper()
	return LoadEntries(tb, db, Parse(tb, doc), opts)
}

// LoadEntries loads entries with opts; a load-level error fails the test.
func LoadEntries(tb testing.TB, db *store.DB, entries []*model.Entry, opts store.LoadOptions) *store.LoadResult {
	tb.Helper()
	res, err := db.Load(context.Background(), entries, opts)
	if err != nil {
		tb.Fatalf("load: %v", err)
	}
	return res
}

// MustLoad is Load that also fails the test on any per-entry error.
func MustLoad(tb testing.TB, db *store.DB, doc string, opts store.LoadOptions) *store.LoadResult {
	tb.Helper()
	res := Load(tb, db, doc, opts)
	if res.Errors != 0 {
		tb.Fatalf("load: %d errors: %v", res.Errors, res.Messages)
	}
	return res
}
