package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestThrottleTableIsBounded: refusals from any number of addresses and logins keep
// the tables within their bound, and an address refused after such a flood is still
// counted and throttled.
func TestThrottleTableIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	th := newThrottle(func() time.Time { return now })
	for i := 0; i < 5*throttleMaxEntries; i++ {
		th.Fail(fmt.Sprintf("10.%d.%d.%d:1234", i>>16&255, i>>8&255, i&255), fmt.Sprintf("login%d", i))
		if i%1000 == 0 {
			now = now.Add(time.Second)
		}
	}
	if n := th.Entries(); n > 3*throttleMaxEntries {
		t.Fatalf("%d entries after %d distinct addresses and logins, bound %d", n, 5*throttleMaxEntries, 3*throttleMaxEntries)
	}
	for i := 0; i < ThrottlePerAddress; i++ {
		if w := th.Wait(ctx, "192.0.2.7:999", ""); w != 0 {
			t.Fatalf("refusal %d: already waiting %v", i+1, w)
		}
		th.Fail("192.0.2.7:999", "")
	}
	if w := th.Wait(ctx, "192.0.2.7:1000", ""); w != ThrottleWindow {
		t.Fatalf("after %d refusals in a full table: wait %v, want %v", ThrottlePerAddress, w, ThrottleWindow)
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
		if got := ThrottleAddress(in); got != want {
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
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	th := newThrottle(func() time.Time { return now })
	const addr = "192.0.2.7:999"
	// A request whose context has ended: Wait answers it rather than block.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	let := 0
	for i := 0; i < 3*ThrottlePerAddress; i++ {
		if th.Wait(gone, addr, "") == 0 {
			let++
		}
	}
	if let != ThrottlePerAddress {
		t.Fatalf("%d attempts in flight at once were let through, want %d", let, ThrottlePerAddress)
	}
	if w := th.Wait(ctx, "192.0.2.8:1", ""); w != 0 {
		t.Fatalf("another address waits %v", w)
	}
	th.Release("192.0.2.8:1")
	// One in flight succeeds, one is released unchecked: two places come back.
	th.Succeed(addr, "")
	th.Release(addr)
	if th.Wait(ctx, addr, "") != 0 || th.Wait(ctx, addr, "") != 0 {
		t.Fatal("the places of a success and a release did not come back")
	}
	// All places in flight: the next attempt waits for one to end (a request whose
	// context ends meanwhile is answered "retry in a second"), and is let through when
	// one does.
	if w := th.Wait(gone, addr, ""); w != time.Second {
		t.Fatalf("all places in flight, the request gone: wait %v, want a second", w)
	}
	place := make(chan time.Duration, 1)
	go func() { place <- th.Wait(ctx, addr, "") }()
	th.Succeed(addr, "")
	select {
	case w := <-place:
		if w != 0 {
			t.Fatalf("a place came back: wait %v, want 0", w)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting attempt was not let through when a place came back")
	}
	// All fail: the address waits for the window.
	for i := 0; i < ThrottlePerAddress; i++ {
		th.Fail(addr, "")
	}
	if w := th.Wait(ctx, addr, ""); w != ThrottleWindow {
		t.Fatalf("after %d failures: wait %v, want %v", ThrottlePerAddress, w, ThrottleWindow)
	}
	if n := len(th.pending); n != 0 {
		t.Fatalf("%d pending entries left after every outcome", n)
	}
}

// An attempt whose outcome is never reported (a panic between Wait and it) holds its
// address's place for throttlePendingMax at most.
func TestThrottleAttemptInFlightExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	th := newThrottle(func() time.Time { return now })
	const addr = "192.0.2.9:1"
	for range ThrottlePerAddress {
		if w := th.Wait(ctx, addr, ""); w != 0 {
			t.Fatalf("wait %v", w)
		}
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if w := th.Wait(gone, addr, ""); w != time.Second {
		t.Fatalf("every place held: wait %v, want a second", w)
	}
	now = now.Add(time.Duration(throttlePendingMax) + time.Second)
	if w := th.Wait(gone, addr, ""); w != 0 {
		t.Fatalf("places held past %v: wait %v, want 0", time.Duration(throttlePendingMax), w)
	}
	if n := len(th.pending[ThrottleAddress(addr)]); n != 1 {
		t.Fatalf("%d attempts in flight, want the new one only", n)
	}
}
