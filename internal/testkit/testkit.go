// Package testkit is the one set of test helpers every package's tests use: a
// migrated database in t.TempDir() with a fixed clock and a t.Log logger, YAML
// loading, query helpers, a log recorder, and the real HTTP stack on 127.0.0.1:0.
//
// It depends on store, builtin, bootstrap and tasks, never on server: tests inside
// package server (and any black-box test) can use it, and the stack helpers take the
// HTTP handler as an argument. Tests of a package it imports use it from their
// external test package (package store_test, tasks_test, bootstrap_test).
package testkit

import (
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// Now is the fixed clock of test databases (API key expiry is judged by it).
var Now = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// FixedClock always reads Now.
func FixedClock() time.Time { return Now }

// TickingClock is a fixed clock that moves one second at every reading, from base,
// so every write shows as a distinct created_at/updated_at.
func TickingClock(base time.Time) func() time.Time {
	var n atomic.Int64
	return func() time.Time { return base.Add(time.Duration(n.Add(1)) * time.Second) }
}

// Version and VersionDate are the code version the tests start with: the version of
// the newest migration block.
const (
	Version     = "4.9.0"
	VersionDate = "2026-11-22"
)

// OldTime is the created_at/updated_at of rows tests insert by SQL, so any later
// write shows as a changed updated_at.
const OldTime = "2020-01-01T00:00:00Z"

// Slow marks one of the slow crash and hostile-input tests: `go test -short` skips
// it, saying so; plain `go test ./...` runs it.
func Slow(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("slow crash/hostile test: skipped with -short; plain go test ./... runs it")
	}
}

// Seed is the seed of a test's generated input: the environment variable name when
// set, else def, so a failing run can be replayed. It is logged.
func Seed(tb testing.TB, name string, def uint64) uint64 {
	tb.Helper()
	seed := def
	if v := os.Getenv(name); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			tb.Fatalf("%s %q: %v", name, v, err)
		}
		seed = n
	}
	tb.Logf("seed %d (replay or change it with %s=%d)", seed, name, seed)
	return seed
}
