package server_test

import (
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// from returns a client whose connections to the test server come from the loopback
// address ip (all of 127.0.0.0/8 is loopback on Linux), so one test can be several
// clients with their own addresses while the server listens on 127.0.0.1 only.
func (e *env) from(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext}
	e.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// holdDerivations holds every credential derivation for which hold(name) is true
// (name is the credential's, e.g. "apikey:k") until releaseAll is called or the test
// ends; the others run at once. Tests use it to keep checks in flight.
func (e *env) holdDerivations(hold func(name string) bool) (releaseAll func()) {
	gate := make(chan struct{})
	e.db.SetDerivationHook(func(name string) {
		if hold(name) {
			<-gate
		}
	})
	var once sync.Once
	releaseAll = func() { once.Do(func() { close(gate) }) }
	e.t.Cleanup(releaseAll)
	return releaseAll
}

// sendAsync sends a GET of path with cred from client in a goroutine of its own and
// puts its status on statuses (0 when the request failed).
func (e *env) sendAsync(client *http.Client, path string, cred func(*http.Request), statuses chan<- int) {
	go func() {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
		cred(req)
		resp, err := client.Do(req)
		if err != nil {
			statuses <- 0
			return
		}
		resp.Body.Close()
		statuses <- resp.StatusCode
	}()
}

// movableClock makes the database's clock (which the credential throttle reads)
// testkit.Now plus an offset the test moves.
func (e *env) movableClock() *atomic.Int64 {
	var off atomic.Int64
	e.db.Now = func() time.Time { return testkit.Now.Add(time.Duration(off.Load())) }
	return &off
}

// retryAfter checks a 429 with its Retry-After (whole seconds) and returns it.
func retryAfter(t *testing.T, r reply) time.Duration {
	t.Helper()
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("status = %d, want 429 (body %s)", r.status, r.body)
	}
	n, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || n < 1 {
		t.Fatalf("Retry-After %q: want a number of seconds", r.header.Get("Retry-After"))
	}
	wantError(t, r, http.StatusTooManyRequests, "too many failed authentication attempts; retry after "+strconv.Itoa(n)+" seconds")
	return time.Duration(n) * time.Second
}

// TestBasicAuthGuessingIsThrottled: wrong passwords for a login get a growing delay
// (429 with Retry-After, the password unchecked) up to a cap at the guessing address;
// the login's owner elsewhere is never locked out: from an address that never failed
// it gets in at once, from one that failed once within the cap.
//
// Serial: it fills or holds the credential checks, whose slots and queue the whole
// process shares, so it runs apart from the parallel tests.
func TestBasicAuthGuessingIsThrottled(t *testing.T) {
	e := newEnv(t, envOptions{NoRunner: true})
	clock := e.movableClock()
	guesser := e.from("127.0.0.2")
	wrong, right := basic("admin", "wrong"), adminCred

	var refused, throttled int
	for i := 0; i < 30; i++ {
		switch r := e.doWith(guesser, "GET", "/api/pipelines/", wrong, nil); r.status {
		case http.StatusUnauthorized:
			refused++
		case http.StatusTooManyRequests:
			retryAfter(t, r)
			throttled++
		default:
			t.Fatalf("guess %d: status %d", i+1, r.status)
		}
	}
	if refused != store.ThrottleFreeLogin || throttled != 30-store.ThrottleFreeLogin {
		t.Fatalf("30 wrong passwords: %d checked (401), %d throttled (429); want %d and %d",
			refused, throttled, store.ThrottleFreeLogin, 30-store.ThrottleFreeLogin)
	}
	// The right password from the guessing address waits too: it is not checked.
	if d := retryAfter(t, e.doWith(guesser, "GET", "/api/pipelines/", right, nil)); d != store.ThrottleBaseDelay {
		t.Fatalf("Retry-After after %d refusals = %v, want %v", store.ThrottleFreeLogin, d, store.ThrottleBaseDelay)
	}
	// The owner from an address that never failed is not delayed.
	if r := e.get("/api/pipelines/", right); r.status != http.StatusOK {
		t.Fatalf("admin from a clean address: status %d %s", r.status, r.body)
	}

	// The delay doubles with each refusal of the login, up to the cap.
	var delays []string
	for i := 0; i < 8; i++ {
		d := retryAfter(t, e.doWith(guesser, "GET", "/api/pipelines/", wrong, nil))
		delays = append(delays, strconv.Itoa(int(d/time.Second)))
		clock.Add(int64(d))
		if r := e.doWith(guesser, "GET", "/api/pipelines/", wrong, nil); r.status != http.StatusUnauthorized {
			t.Fatalf("a guess after waiting %v: status %d, want 401 (checked)", d, r.status)
		}
	}
	if got, want := strings.Join(delays, ","), "1,2,4,8,16,32,60,60"; got != want {
		t.Fatalf("Retry-After of successive refusals = %s, want %s", got, want)
	}

	// An owner who mistyped once, from another address, waits at most the cap.
	owner := e.from("127.0.0.3")
	if r := e.doWith(owner, "GET", "/api/pipelines/", wrong, nil); r.status != http.StatusUnauthorized {
		t.Fatalf("the owner's first attempt from a new address: status %d, want 401 (checked)", r.status)
	}
	d := retryAfter(t, e.doWith(owner, "GET", "/api/pipelines/", right, nil))
	if d > store.ThrottleMaxDelay {
		t.Fatalf("the owner waits %v, more than the cap %v", d, store.ThrottleMaxDelay)
	}
	clock.Add(int64(d))
	// The guesser keeps guessing meanwhile; its own delay does not hold the owner.
	e.doWith(guesser, "GET", "/api/pipelines/", wrong, nil)
	if r := e.doWith(owner, "GET", "/api/pipelines/", right, nil); r.status != http.StatusOK {
		t.Fatalf("the owner after waiting %v: status %d %s", d, r.status, r.body)
	}
}

// TestKeySecretGuessingIsThrottledPerAddress: wrong key secrets count for their
// address: past the limit every credential from it, right or wrong, key or password,
// API or console sign-in, gets 429 unchecked (no argon2id run), until the window has
// passed. A verified key used from another address meanwhile is answered every time.
//
// Serial: it fills or holds the credential checks, whose slots and queue the whole
// process shares, so it runs apart from the parallel tests.
func TestKeySecretGuessingIsThrottledPerAddress(t *testing.T) {
	e := newEnv(t, envOptions{NoRunner: true})
	clock := e.movableClock()
	good := e.key("verified", keySpec{perms: []string{"p_data_access"}})
	guesser := e.from("127.0.0.2")

	var refused, throttled, served int
	for i := 0; i < 2*store.ThrottlePerAddress; i++ {
		switch r := e.doWith(guesser, "GET", "/api/pipelines/", bearer("verified", "guess-"+strconv.Itoa(i)), nil); r.status {
		case http.StatusUnauthorized:
			refused++
		case http.StatusTooManyRequests:
			if d := retryAfter(t, r); d != store.ThrottleWindow {
				t.Fatalf("Retry-After %v, want the window %v (fixed clock)", d, store.ThrottleWindow)
			}
			throttled++
		default:
			t.Fatalf("guess %d: status %d", i+1, r.status)
		}
		if r := e.get("/api/pipelines/", good); r.status == http.StatusOK {
			served++
		}
	}
	if refused != store.ThrottlePerAddress || throttled != store.ThrottlePerAddress {
		t.Fatalf("%d wrong secrets: %d checked, %d throttled; want %d each", 2*store.ThrottlePerAddress, refused, throttled, store.ThrottlePerAddress)
	}
	if served != 2*store.ThrottlePerAddress {
		t.Fatalf("the verified key from another address was answered %d times of %d", served, 2*store.ThrottlePerAddress)
	}

	// Every credential from the throttled address waits, unchecked.
	retryAfter(t, e.doWith(guesser, "GET", "/api/pipelines/", bearer("verified", "s3cret-verified"), nil))
	retryAfter(t, e.doWith(guesser, "GET", "/api/pipelines/", adminCred, nil))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < 10; i++ {
		retryAfter(t, e.doWith(guesser, "GET", "/api/pipelines/", basic("admin", "guess-"+strconv.Itoa(i)), nil))
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 8<<20 {
		t.Fatalf("10 throttled guesses allocated %d MiB: they were checked (one argon2id run is 19 MiB)", got>>20)
	}
	// The console's sign-in shares the throttle.
	form := url.Values{"login": {"admin"}, "password": {adminPassword}, "next": {"/"}}
	req, _ := http.NewRequest("POST", e.srv.URL+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", e.srv.URL)
	noRedirect := *guesser
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("console sign-in from the throttled address: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	clock.Add(int64(store.ThrottleWindow))
	if r := e.doWith(guesser, "GET", "/api/pipelines/", good, nil); r.status != http.StatusOK {
		t.Fatalf("after the window: status %d %s", r.status, r.body)
	}
}
