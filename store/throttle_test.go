package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// throttleClock is a test clock that tests move by hand.
type throttleClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *throttleClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *throttleClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newThrottleClock() *throttleClock {
	return &throttleClock{now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
}

// throttleDB opens a new empty database whose clock is clock.
func throttleDB(t *testing.T, clock *throttleClock) *store.DB {
	t.Helper()
	return testkit.OpenEmpty(t, testkit.Options{Clock: clock.Now})
}

func fail(t *testing.T, th *store.Throttle, remote, login string) {
	t.Helper()
	if err := th.Fail(context.Background(), remote, login); err != nil {
		t.Fatal(err)
	}
}

// shortly is a context that ends in a tenth of a second: a request whose client goes
// while it waits for a place.
func shortly(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}

func entries(t *testing.T, th *store.Throttle) int {
	t.Helper()
	n, err := th.Entries(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestThrottleTableIsBounded: refusals from any number of addresses and logins keep
// the table within its bound, and an address refused after such a flood is still
// counted and throttled.
func TestThrottleTableIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newThrottleClock()
	th := throttleDB(t, clock).Throttle()
	const max = 60
	th.SetMaxEntriesForTest(max)
	for i := 0; i < 5*max; i++ {
		fail(t, th, fmt.Sprintf("10.0.%d.%d:1234", i>>8&255, i&255), fmt.Sprintf("login%d", i))
		if i%10 == 0 {
			clock.Add(time.Second)
		}
	}
	if n := entries(t, th); n > 3*max {
		t.Fatalf("%d entries after %d distinct addresses and logins, bound %d", n, 5*max, 3*max)
	}
	for i := 0; i < store.ThrottlePerAddress; i++ {
		if w := th.Wait(ctx, "192.0.2.7:999", ""); w != 0 {
			t.Fatalf("refusal %d: already waiting %v", i+1, w)
		}
		fail(t, th, "192.0.2.7:999", "")
	}
	if w := th.Wait(ctx, "192.0.2.7:1000", ""); w != store.ThrottleWindow {
		t.Fatalf("after %d refusals in a full table: wait %v, want %v", store.ThrottlePerAddress, w, store.ThrottleWindow)
	}
}

// TestThrottleExpiredRowsGo: a refusal deletes the rows whose refusals all left the
// window, so the table holds the window's refusals only.
func TestThrottleExpiredRowsGo(t *testing.T) {
	t.Parallel()
	clock := newThrottleClock()
	th := throttleDB(t, clock).Throttle()
	for i := range 10 {
		fail(t, th, fmt.Sprintf("10.0.0.%d:1", i), "someone")
	}
	if n, want := entries(t, th), 10+1+10; n != want {
		t.Fatalf("%d rows after 10 refusals of one login from 10 addresses, want %d", n, want)
	}
	clock.Add(store.ThrottleWindow + time.Second)
	fail(t, th, "10.0.1.1:1", "")
	if n := entries(t, th); n != 1 {
		t.Fatalf("%d rows after the window passed and one refusal, want 1", n)
	}
}

// TestThrottleAddress: the port goes, IPv4-mapped IPv6 is IPv4, IPv6 counts per /64.
func TestThrottleAddress(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"127.0.0.1:5000":             "127.0.0.1",
		"[::ffff:10.0.0.1]:80":       "10.0.0.1",
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2::9%eth0]:443": "2001:db8:1:2::/64",
		"not an address":             "not an address",
	} {
		if got := store.ThrottleAddress(in); got != want {
			t.Errorf("ThrottleAddress(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestThrottleCountsAttemptsInFlight: attempts from one address that Wait let through
// and whose outcome is not known yet count against the address, so parallel requests
// cannot get more than ThrottlePerAddress credentials checked; a success or a release
// gives the place back, a failure keeps it for the window.
func TestThrottleCountsAttemptsInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newThrottleClock()
	th := throttleDB(t, clock).Throttle()
	const addr = "192.0.2.7:999"
	for i := 0; i < store.ThrottlePerAddress; i++ {
		if w := th.Wait(ctx, addr, ""); w != 0 {
			t.Fatalf("attempt %d in flight: wait %v, want 0", i+1, w)
		}
	}
	// Every place is held: a request whose context ends meanwhile is answered "retry
	// in a second" rather than blocked for good.
	if w := th.Wait(shortly(t), addr, ""); w != time.Second {
		t.Fatalf("all places in flight, the request gone: wait %v, want a second", w)
	}
	if w := th.Wait(ctx, "192.0.2.8:1", ""); w != 0 {
		t.Fatalf("another address waits %v", w)
	}
	th.Release("192.0.2.8:1")
	// One in flight succeeds, one is released unchecked: two places come back.
	if err := th.Succeed(ctx, addr, ""); err != nil {
		t.Fatal(err)
	}
	th.Release(addr)
	if th.Wait(ctx, addr, "") != 0 || th.Wait(ctx, addr, "") != 0 {
		t.Fatal("the places of a success and a release did not come back")
	}
	// All places in flight: the next attempt waits for one to end, and is let
	// through when one does.
	place := make(chan time.Duration, 1)
	go func() { place <- th.Wait(ctx, addr, "") }()
	if err := th.Succeed(ctx, addr, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-place:
		if w != 0 {
			t.Fatalf("a place came back: wait %v, want 0", w)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting attempt was not let through when a place came back")
	}
	// All fail: the address waits for the window.
	for i := 0; i < store.ThrottlePerAddress; i++ {
		fail(t, th, addr, "")
	}
	if w := th.Wait(ctx, addr, ""); w != store.ThrottleWindow {
		t.Fatalf("after %d failures: wait %v, want %v", store.ThrottlePerAddress, w, store.ThrottleWindow)
	}
	if n := th.InFlight(addr); n != 0 {
		t.Fatalf("%d attempts in flight left after every outcome", n)
	}
}

// TestThrottleAttemptEndingDuringARead: an attempt in flight that fails while another
// attempt of its address reads the table is counted once, never zero times. The
// reader's read missed the refusal and the pending place is gone, so it reads again:
// with the limit's worth counted (one refusal and the rest in flight) it is refused
// unchecked until that refusal leaves the window, not let through as a 21st check.
func TestThrottleAttemptEndingDuringARead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	th := throttleDB(t, newThrottleClock()).Throttle()
	const addr = "192.0.2.9:1"
	for i := 0; i < store.ThrottlePerAddress; i++ {
		if w := th.Wait(ctx, addr, ""); w != 0 {
			t.Fatalf("attempt %d in flight: wait %v, want 0", i+1, w)
		}
	}
	var once sync.Once
	th.SetAfterReadForTest(func() { once.Do(func() { fail(t, th, addr, "") }) })
	if w := th.Wait(ctx, addr, ""); w != store.ThrottleWindow {
		t.Fatalf("an attempt failed during the read: wait %v, want %v", w, store.ThrottleWindow)
	}
	if n := th.InFlight(addr); n != store.ThrottlePerAddress-1 {
		t.Fatalf("%d attempts in flight, want %d", n, store.ThrottlePerAddress-1)
	}
}

// An attempt whose outcome is never reported (a panic between Wait and it) holds its
// address's place for a minute at most.
func TestThrottleAttemptInFlightExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newThrottleClock()
	th := throttleDB(t, clock).Throttle()
	const addr = "192.0.2.9:1"
	for range store.ThrottlePerAddress {
		if w := th.Wait(ctx, addr, ""); w != 0 {
			t.Fatalf("wait %v", w)
		}
	}
	if w := th.Wait(shortly(t), addr, ""); w != time.Second {
		t.Fatalf("every place held: wait %v, want a second", w)
	}
	clock.Add(time.Minute + time.Second)
	if w := th.Wait(ctx, addr, ""); w != 0 {
		t.Fatalf("places held past a minute: wait %v, want 0", w)
	}
	if n := th.InFlight(addr); n != 1 {
		t.Fatalf("%d attempts in flight, want the new one only", n)
	}
}

// TestThrottleSharedByProcesses: two handles on one database (two nodes) count
// refusals together: an address refused through one is throttled on the other at
// once, and so is a login's delay; a success on the other ends the delay for both.
func TestThrottleSharedByProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := newThrottleClock()
	addr := testkit.NewAddress(t, "shared.db")
	a := testkit.Open(t, addr, testkit.Options{Clock: clock.Now}).Throttle()
	b := testkit.Open(t, addr, testkit.Options{Clock: clock.Now}).Throttle()
	const guesser, owner = "192.0.2.1:1", "192.0.2.2:1"
	for i := range store.ThrottleFreeLogin {
		if w := a.Wait(ctx, guesser, "admin"); w != 0 {
			t.Fatalf("refusal %d: wait %v on node A", i+1, w)
		}
		fail(t, a, guesser, "admin")
	}
	if w := b.Wait(ctx, guesser, "admin"); w != store.ThrottleBaseDelay {
		t.Fatalf("after %d refusals on node A: node B waits %v, want %v", store.ThrottleFreeLogin, w, store.ThrottleBaseDelay)
	}
	b.Release(guesser)
	if w := b.Wait(ctx, owner, "admin"); w != 0 {
		t.Fatalf("an address never refused for the login waits %v on node B", w)
	}
	b.Release(owner)
	// The success ends the delay of the login at the guesser's address, on both.
	clock.Add(store.ThrottleBaseDelay)
	if w := b.Wait(ctx, guesser, "admin"); w != 0 {
		t.Fatalf("after the delay: wait %v on node B", w)
	}
	if err := b.Succeed(ctx, guesser, "admin"); err != nil {
		t.Fatal(err)
	}
	fail(t, a, guesser, "other")
	if w := a.Wait(ctx, guesser, "admin"); w != 0 {
		t.Fatalf("after a success on node B: node A waits %v for the login", w)
	}
	a.Release(guesser)
	for range store.ThrottlePerAddress - store.ThrottleFreeLogin - 1 {
		fail(t, b, guesser, "")
	}
	if w := a.Wait(ctx, guesser, ""); w <= 0 || w > store.ThrottleWindow {
		t.Fatalf("after %d refusals on both nodes: wait %v on node A, want up to %v", store.ThrottlePerAddress, w, store.ThrottleWindow)
	}
}

// TestThrottleLoginNamesAreKeyed: a password typed into the login field is stored
// neither in clear nor as its plain SHA-256, and the same login gets different names
// in two databases (each keys the names with its own random salt), while one
// database's nodes agree (the name is found again: the login's refusals count).
func TestThrottleLoginNamesAreKeyed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const typed = "correct horse battery staple"
	names := func(db *store.DB) []string {
		_, rows := testkit.Rows(t, db, "SELECT name FROM throttle WHERE kind IN ('login', 'pair') ORDER BY kind")
		var l []string
		for _, r := range rows {
			l = append(l, fmt.Sprint(r[0]))
		}
		return l
	}
	clock := newThrottleClock()
	a, b := throttleDB(t, clock), throttleDB(t, clock)
	fail(t, a.Throttle(), "10.0.0.1:1", typed)
	fail(t, b.Throttle(), "10.0.0.1:1", typed)
	na, nb := names(a), names(b)
	if len(na) != 2 || len(nb) != 2 {
		t.Fatalf("login and pair rows: %q and %q", na, nb)
	}
	plain := sha256.Sum256([]byte("login\x00" + typed))
	for _, n := range append(na, nb...) {
		if strings.Contains(n, typed) || n == hex.EncodeToString(plain[:]) {
			t.Fatalf("the typed login is readable from the throttle table: %q", n)
		}
	}
	if na[0] == nb[0] || na[1] == nb[1] {
		t.Fatalf("two databases name the same login alike: %q and %q", na, nb)
	}
	// Another process of database a reads the same name: the login is throttled there.
	other := testkit.Open(t, store.AddressOf(a), testkit.Options{Clock: clock.Now})
	for range store.ThrottleFreeLogin + 1 {
		fail(t, other.Throttle(), "10.0.9.9:1", typed)
	}
	if w := a.Throttle().Wait(ctx, "10.0.9.9:2", typed); w == 0 {
		t.Fatal("refusals of the login at an address through another process of the database do not delay it")
	}
}
