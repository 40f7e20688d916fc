package server_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// TestAuthBurstDoesNotDelayVerifiedKey: while a burst of bogus keys is being derived, a
// key verified before is answered without waiting for those derivations: every one of
// its requests gets 200 while the bogus derivations are held, and none of them starts
// a derivation of its own (the verified-secret cache answers it).
//
// The bogus derivations are held at the store's derivation hook until the key's
// requests are done, not hoped to be slow, and no latency is bounded: without the
// cache's fast path each of the key's requests would either derive (counted) or queue
// behind the held derivations (its client gives up after 30 s, failing the test).
// BenchmarkVerifiedKeyUnderAttack measures the latency itself.
//
// Serial: it fills or holds the credential checks, whose slots and queue the whole
// process shares, so it runs apart from the parallel tests.
func TestAuthBurstDoesNotDelayVerifiedKey(t *testing.T) {
	e := newEnv(t, envOptions{NoRunner: true})
	good := e.key("verified", keySpec{perms: []string{"p_data_access"}, plain: true})
	if r := e.get("/api/pipelines/", good); r.status != http.StatusOK { // derived once, then cached
		t.Fatalf("verified key: status %d", r.status)
	}

	var held, derivedGood atomic.Int64
	entered := make(chan struct{}, 64)
	releaseAll := e.holdDerivations(func(name string) bool {
		if name == "apikey:verified" {
			derivedGood.Add(1)
			return false
		}
		held.Add(1)
		entered <- struct{}{}
		return true
	})

	// The burst comes from another address: from the key's own address, the
	// credential throttle would refuse the key too once the address's refusals pass
	// its limit (16 stay below it).
	const burst = 16
	bogus := e.from("127.0.0.11")
	statuses := make(chan int, burst)
	for range burst {
		e.sendAsync(bogus, "/api/pipelines/", bearer("bogus", "guess"), statuses)
	}
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("no bogus key reached its derivation within a minute")
	}

	// The key's requests, each with a client that gives up after 30 s.
	client := e.from("127.0.0.1")
	const requests = 20
	for i := range requests {
		if r := e.doWith(client, http.MethodGet, "/api/pipelines/", good, nil); r.status != http.StatusOK {
			t.Fatalf("verified key, request %d during the burst: status %d %s", i, r.status, r.body)
		}
	}
	if n := derivedGood.Load(); n != 0 {
		t.Fatalf("the verified key's %d requests ran %d derivations, want 0 (answered from the cache)", requests, n)
	}
	if n := len(statuses); n != 0 {
		t.Fatalf("%d bogus requests were answered while their derivations were held", n)
	}
	t.Logf("%d requests of the verified key answered 200 while %d bogus derivations were held", requests, held.Load())

	releaseAll()
	for range burst {
		if s := <-statuses; s != http.StatusUnauthorized {
			t.Fatalf("bogus key: status %d, want 401", s)
		}
	}
	if n := derivedGood.Load(); n != 0 {
		t.Fatalf("the verified key ran %d derivations", n)
	}
}
