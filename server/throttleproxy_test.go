package server_test

import (
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"dataservice/store"
)

// signIn posts the console's sign-in form from client and returns the status, the
// Retry-After header and the page.
func (e *env) signIn(client *http.Client, login, password string, xff string) (int, string, string) {
	e.t.Helper()
	form := url.Values{"login": {login}, "password": {password}, "next": {"/"}}
	req, _ := http.NewRequest("POST", e.srv.URL+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", e.srv.URL)
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	noRedirect := *client
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noRedirect.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), b.String()
}

// TestThrottleBehindTrustedProxy: behind a trusted proxy every client shares the
// proxy's TCP address; the throttle counts each client under its forwarded address,
// so one guesser (or a cron job with an expired key) through the proxy gets 429 while
// the admin and API keys through the same proxy are answered, on the API and the
// console alike. API keys' IP filters see the same forwarded address, and a peer that
// is not a trusted proxy cannot forge one.
//
// Serial: it fills or holds the credential checks, whose slots and queue the whole
// process shares, so it runs apart from the parallel tests.
func TestThrottleBehindTrustedProxy(t *testing.T) {
	e := newEnv(t, envOptions{NoRunner: true, TrustedProxies: "127.0.0.7"})
	good := e.key("verified", keySpec{perms: []string{"p_data_access"}})
	filtered := e.key("office", keySpec{perms: []string{"p_data_access"}, ipFilter: []string{"198.51.100.0/24"}})
	proxy := e.from("127.0.0.7")
	via := func(client string, c cred) cred { return both(c, header("X-Forwarded-For", client)) }

	// The guesser, forwarded by the proxy (with a forged hop of its own on the left).
	guesser := both(bearer("verified", "wrong"), header("X-Forwarded-For", "198.51.100.1, 203.0.113.9"))
	for i := 0; i < store.ThrottlePerAddress; i++ {
		if r := e.doWith(proxy, "GET", "/api/pipelines/", guesser, nil); r.status != http.StatusUnauthorized {
			t.Fatalf("guess %d: status %d, want 401", i+1, r.status)
		}
	}
	retryAfter(t, e.doWith(proxy, "GET", "/api/pipelines/", guesser, nil))
	// Everyone else through the proxy is answered.
	for _, c := range []struct {
		name string
		cred cred
	}{
		{"admin", via("198.51.100.2", adminCred)},
		{"API key", via("198.51.100.3", good)},
		{"filtered key from its network", via("198.51.100.4", filtered)},
		{"admin with no forwarded address (the proxy's own)", adminCred},
	} {
		if r := e.doWith(proxy, "GET", "/api/pipelines/", c.cred, nil); r.status != http.StatusOK {
			t.Fatalf("%s through the proxy while a guesser is throttled: status %d %s", c.name, r.status, r.body)
		}
	}
	if status, _, _ := e.signIn(proxy, "admin", adminPassword, "198.51.100.2"); status != http.StatusSeeOther {
		t.Fatalf("console sign-in through the proxy: status %d, want 303", status)
	}
	if status, wait, _ := e.signIn(proxy, "admin", adminPassword, "203.0.113.9"); status != http.StatusTooManyRequests || wait == "" {
		t.Fatalf("console sign-in of the throttled client: status %d, Retry-After %q", status, wait)
	}

	// A filtered key from outside its network, through the proxy: refused.
	if r := e.doWith(proxy, "GET", "/api/pipelines/", via("192.0.2.1", filtered), nil); r.status != http.StatusUnauthorized {
		t.Fatalf("filtered key from 192.0.2.1 through the proxy: status %d, want 401", r.status)
	}
	// A peer that is not a trusted proxy: its X-Forwarded-For is ignored, for the IP
	// filter and for the throttle (its own refusals count under its own address).
	direct := e.from("127.0.0.8")
	if r := e.doWith(direct, "GET", "/api/pipelines/", via("198.51.100.5", filtered), nil); r.status != http.StatusUnauthorized {
		t.Fatalf("forged X-Forwarded-For from an untrusted peer passed the IP filter: status %d", r.status)
	}
	if r := e.doWith(direct, "GET", "/api/pipelines/", via("203.0.113.9", good), nil); r.status != http.StatusOK {
		t.Fatalf("an untrusted peer naming the throttled client: status %d, want 200 (header ignored)", r.status)
	}
}

// TestOverloadedCheckIsNotARefusal: when the queue of credential checks is full, a
// credential that is not in the cache is not checked: the API answers 503 with
// Retry-After and the console a "busy" page, and neither counts as a refusal, so a
// flood of bogus credentials cannot get the real user's address and login throttled.
// The checks are held at the store's derivation hook until the queue is full.
//
// Serial: it fills or holds the credential checks, whose slots and queue the whole
// process shares, so it runs apart from the parallel tests.
func TestOverloadedCheckIsNotARefusal(t *testing.T) {
	e := newEnv(t, envOptions{NoRunner: true})
	ops := e.user("ops", true) // its password is not in the verified-secret cache yet
	entered := make(chan struct{}, 1024)
	releaseAll := e.holdDerivations(func(string) bool {
		entered <- struct{}{}
		return true
	})

	// The flood: bogus keys from several addresses, each below the address limit, more
	// than the derivation slots and the queue hold.
	slots := max(1, runtime.NumCPU()/2)
	const perAddr = 16
	addrs := (slots+64)/perAddr + 2
	statuses := make(chan int, addrs*perAddr)
	for a := range addrs {
		client := e.from("127.0.1." + strconv.Itoa(10+a))
		for range perAddr {
			e.sendAsync(client, "/api/pipelines/", bearer("bogus", "guess"), statuses)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for store.CredentialChecksWaiting() < 64 {
		if time.Now().After(deadline) {
			t.Fatalf("the queue of credential checks did not fill within a minute (%d waiting)", store.CredentialChecksWaiting())
		}
		time.Sleep(5 * time.Millisecond)
	}

	// The user, from its own address, while the queue is full: not checked, not counted.
	user := e.from("127.0.0.5")
	for i := 0; i < store.ThrottlePerAddress+5; i++ {
		r := e.doWith(user, "GET", "/api/pipelines/", ops, nil)
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
			t.Fatalf("attempt %d while overloaded: status %d, Retry-After %q, want 503 with Retry-After", i+1, r.status, r.header.Get("Retry-After"))
		}
		wantError(t, r, http.StatusServiceUnavailable, "too many credential checks in progress; retry shortly")
	}
	status, wait, page := e.signIn(user, "ops", "pw-ops", "")
	if status != http.StatusServiceUnavailable || wait == "" || !strings.Contains(page, "your password was not checked") {
		t.Fatalf("console sign-in while overloaded: status %d, Retry-After %q", status, wait)
	}

	releaseAll()
	for range addrs * perAddr {
		if s := <-statuses; s != http.StatusUnauthorized && s != http.StatusServiceUnavailable {
			t.Fatalf("bogus key: status %d, want 401 or 503", s)
		}
	}
	// Nothing was counted against the user's address or login.
	if r := e.doWith(user, "GET", "/api/pipelines/", ops, nil); r.status == http.StatusUnauthorized ||
		r.status == http.StatusTooManyRequests || r.status == http.StatusServiceUnavailable {
		t.Fatalf("the user after the flood: status %d %s", r.status, r.body)
	}
}

// TestParallelGuessesStayWithinTheLimit: parallel requests from one address cannot get
// more than the address limit of credentials checked: attempts being checked count
// against their address, so past the limit the others wait for a place, and once the
// checked ones have failed they get 429 unchecked. The checks are held at the
// derivation hook.
//
// Serial: it fills or holds the credential checks, whose slots and queue the whole
// process shares, so it runs apart from the parallel tests.
func TestParallelGuessesStayWithinTheLimit(t *testing.T) {
	e := newEnv(t, envOptions{NoRunner: true})
	var derived atomic.Int64
	releaseAll := e.holdDerivations(func(string) bool {
		derived.Add(1)
		return true
	})

	const n = store.ThrottlePerAddress + 10
	guesser := e.from("127.0.0.2")
	statuses := make(chan int, n)
	for i := range n {
		e.sendAsync(guesser, "/api/pipelines/", bearer("bogus", "guess-"+strconv.Itoa(i)), statuses)
	}
	// While the checks are held, the limit's worth of guesses is in flight (deriving
	// or queued for a derivation) and the others wait for a place: nothing is answered.
	deadline := time.Now().Add(time.Minute)
	for derived.Load()+int64(store.CredentialChecksWaiting()) < store.ThrottlePerAddress {
		if time.Now().After(deadline) {
			t.Fatalf("%d guesses deriving and %d queued within a minute, want %d in flight", derived.Load(),
				store.CredentialChecksWaiting(), store.ThrottlePerAddress)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case s := <-statuses:
		t.Fatalf("an answer while every check in flight is held: status %d", s)
	default:
	}
	// Released, the checked guesses fail, and the waiting ones are then refused
	// unchecked: the address's refusals fill its limit.
	releaseAll()
	got := map[int]int{}
	for range n {
		got[<-statuses]++
	}
	if got[http.StatusUnauthorized] != store.ThrottlePerAddress || got[http.StatusTooManyRequests] != n-store.ThrottlePerAddress {
		t.Fatalf("statuses %v: want %d×401 and %d×429", got, store.ThrottlePerAddress, n-store.ThrottlePerAddress)
	}
	if got := derived.Load(); got != store.ThrottlePerAddress {
		t.Fatalf("%d guesses checked, want %d", got, store.ThrottlePerAddress)
	}
	retryAfter(t, e.doWith(guesser, "GET", "/api/pipelines/", bearer("bogus", "late"), nil))
}

// TestParallelRightKeysAreAllChecked: a client with many workers sends more parallel
// requests than the address limit with a right key that is not in the verified-secret
// cache yet (the first requests after a start): all are answered 200. The attempts
// past the limit wait for a place instead of being answered 429 while nothing failed
// (as they were when attempts in flight first counted against their address).
//
// Serial: it fills or holds the credential checks, whose slots and queue the whole
// process shares, so it runs apart from the parallel tests.
func TestParallelRightKeysAreAllChecked(t *testing.T) {
	e := newEnv(t, envOptions{NoRunner: true})
	key := e.key("workers", keySpec{perms: []string{"p_data_access"}, plain: true})
	var derived atomic.Int64
	releaseAll := e.holdDerivations(func(string) bool {
		derived.Add(1)
		return true
	})
	const n = store.ThrottlePerAddress + 20
	client := e.from("127.0.0.3")
	statuses := make(chan int, n)
	for range n {
		e.sendAsync(client, "/api/pipelines/", key, statuses)
	}
	deadline := time.Now().Add(time.Minute)
	for derived.Load()+int64(store.CredentialChecksWaiting()) < store.ThrottlePerAddress {
		if time.Now().After(deadline) {
			t.Fatalf("%d keys deriving and %d queued within a minute, want %d in flight", derived.Load(),
				store.CredentialChecksWaiting(), store.ThrottlePerAddress)
		}
		time.Sleep(10 * time.Millisecond)
	}
	releaseAll()
	got := map[int]int{}
	for range n {
		got[<-statuses]++
	}
	if got[http.StatusOK] != n {
		t.Fatalf("statuses %v: want %d×200", got, n)
	}
}
