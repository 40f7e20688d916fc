package testkit

import (
	"runtime"
	"testing"
	"time"
)

// WaitFor polls cond every few milliseconds until it holds, failing the test when
// limit passes first.
func WaitFor(tb testing.TB, limit time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("gave up after %v waiting for %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Allocated returns the bytes allocated in this process while fn runs (for
// structural assertions such as "one argon2id run allocates its memory once").
func Allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
