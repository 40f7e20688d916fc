package server_test

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"dataservice/internal/testkit"
)

// TestAuthBurstDoesNotDelayVerifiedKey: while 100 requests with bogus keys arrive at
// once, a key verified before is answered without waiting for their derivations.
//
// The key's median latency during the burst is compared with its median latency
// measured just before, in the same run: the burst may add a few milliseconds, never
// a derivation's worth of queueing. A loaded machine slows both measurements alike;
// an attempt disturbed by unrelated load is repeated, at most three times.
func TestAuthBurstDoesNotDelayVerifiedKey(t *testing.T) {
	testkit.Slow(t)
	e := newEnv(t, envOptions{NoRunner: true})
	good := e.key("verified", keySpec{perms: []string{"p_data_access"}, plain: true})
	if r := e.get("/api/pipelines/", good); r.status != http.StatusOK {
		t.Fatalf("verified key: status %d", r.status)
	}
	// timed answers the verified key's requests while more reports true, at most n.
	timed := func(n int, more func() bool) []time.Duration {
		var lat []time.Duration
		for len(lat) < n && more() {
			t0 := time.Now()
			if r := e.get("/api/pipelines/", good); r.status != http.StatusOK {
				t.Fatalf("verified key: status %d", r.status)
			}
			if more() { // only requests answered while the burst still ran count
				lat = append(lat, time.Since(t0))
			}
		}
		return lat
	}
	median := func(lat []time.Duration) time.Duration {
		slices.Sort(lat)
		return lat[len(lat)/2]
	}
	const attempts, samples, minSamples = 3, 21, 7
	const allowed = 25 * time.Millisecond
	var failures []string
	for a := 1; a <= attempts; a++ {
		base := median(timed(samples, func() bool { return true }))
		// The burst comes from another address (one per attempt): from the key's own
		// address, the credential throttle would refuse the key too once the
		// address's refusals pass its limit.
		bogus := e.from("127.0.0." + strconv.Itoa(10+a))
		var wg sync.WaitGroup
		var over atomic.Bool
		start := make(chan struct{})
		for i := 0; i < 100; i++ {
			wg.Go(func() {
				<-start
				req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/api/pipelines/", nil)
				bearer("bogus", "guess")(req)
				if resp, err := bogus.Do(req); err == nil {
					resp.Body.Close()
				}
			})
		}
		close(start)
		go func() { wg.Wait(); over.Store(true) }()
		time.Sleep(50 * time.Millisecond) // the burst is under way
		lat := timed(samples, func() bool { return !over.Load() })
		wg.Wait()
		if len(lat) < minSamples {
			failures = append(failures, fmt.Sprintf("attempt %d: the burst ended after %d timed requests, want %d", a, len(lat), minSamples))
			continue
		}
		during := median(lat)
		t.Logf("attempt %d: verified key median %v before, %v during a burst of 100 bogus keys (max %v, %d requests)",
			a, base, during, lat[len(lat)-1], len(lat))
		if during-base <= allowed {
			return
		}
		failures = append(failures, fmt.Sprintf("attempt %d: median %v during the burst, %v before (+%v, allowed +%v)",
			a, during, base, during-base, allowed))
	}
	t.Fatalf("the verified key waited for the burst:\n%s", strings.Join(failures, "\n"))
}
