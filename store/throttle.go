package store

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// The credential throttle: one per open database (and so per process), shared by
// every door that checks a password or a key secret (HTTP Basic and API keys on the
// API, the console's sign-in), in memory.
//
//   - Per client address: ThrottlePerAddress refused credentials within ThrottleWindow
//     and every further attempt from that address, right or wrong, is refused without
//     being checked until the oldest of those refusals leaves the window. IPv6
//     addresses count per /64 (one host usually holds a whole /64).
//   - Per login (passwords only, not key names): after ThrottleFreeLogin refusals of a
//     login within the window, an address that has itself been refused for that login
//     waits ThrottleBaseDelay, doubled with each further refusal of the login, at most
//     ThrottleMaxDelay, after its own last refusal before its next attempt for that
//     login is checked. The delay is the login's, the waiting is each address's: an
//     address never refused for the login is not delayed, and one that was waits at
//     most ThrottleMaxDelay, so guessing from elsewhere slows a login's guessers but
//     never locks its owner out.
//   - A success ends the delay of that login at that address only; the login's count
//     stays until its refusals leave the window.
//   - An attempt being checked counts as a refusal of its address from Wait until its
//     outcome (Fail, Succeed or Release): parallel attempts from one address cannot get
//     more than ThrottlePerAddress credentials checked within the window. When only
//     attempts in flight fill the address's limit, the next one waits for one of them
//     to end instead of being refused: many parallel requests with right credentials
//     (a client with many workers) are checked, 20 at a time.
//
// Memory is bounded whatever addresses and logins an attacker uses: each of the three
// tables (addresses, logins, login×address) holds at most throttleMaxEntries entries
// of at most throttleKept times; when a table is full, entries whose refusals have
// all left the window go first, then the tenth of the table refused longest ago.
const (
	ThrottleWindow     = 15 * time.Minute
	ThrottlePerAddress = 20
	ThrottleFreeLogin  = 5
	ThrottleBaseDelay  = time.Second
	ThrottleMaxDelay   = time.Minute
	throttleMaxEntries = 10000
	// throttleKept bounds the times kept per entry: the address limit, and more than
	// the login refusals that reach the delay's cap (5 free, then 1 s doubled 6 times).
	throttleKept = ThrottlePerAddress
	// throttleMaxLogin is the longest login tracked; longer ones are refused anyway
	// (and still count for their address).
	throttleMaxLogin = 256
)

// Throttle counts refused credentials; see the constants above for its rules.
type Throttle struct {
	mu     sync.Mutex
	now    func() time.Time
	addrs  map[string][]int64 // refusal times (Unix ns) per address
	logins map[string][]int64 // refusal times per login
	pairs  map[string][]int64 // last refusal time per login and address (one element)
	// pending holds, per address, the start times of the attempts let through by Wait
	// whose outcome is not known yet; an entry exists only while one is in flight. A
	// start older than throttlePendingMax is dropped: a check ends within seconds, and
	// an outcome never reported (a panic between Wait and it) must not hold a place
	// for good.
	pending map[string][]int64
	// ended is closed, and replaced, whenever a pending attempt ends: Wait calls
	// blocked by attempts in flight then look again.
	ended chan struct{}
}

// throttlePendingMax is how long an attempt in flight holds its address's place.
const throttlePendingMax = int64(time.Minute)

func newThrottle(now func() time.Time) *Throttle {
	return &Throttle{now: now, addrs: map[string][]int64{}, logins: map[string][]int64{}, pairs: map[string][]int64{},
		pending: map[string][]int64{}, ended: make(chan struct{})}
}

// Throttle is the database's credential throttle (its clock is db.Now).
func (db *DB) Throttle() *Throttle {
	db.throttleOnce.Do(func() { db.throttle = newThrottle(func() time.Time { return db.Now() }) })
	return db.throttle
}

// ThrottleAddress is the address a request from remote (a net/http RemoteAddr,
// "host:port" or a bare host) counts under: the IP, or its /64 for IPv6.
func ThrottleAddress(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		if len(host) > 64 {
			host = host[:64]
		}
		return host
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

func pairKey(login, addr string) string { return login + "\x00" + addr }

// Wait reports how long an attempt from the client at remote (its address, from
// clientaddr; a "host:port" is accepted too) for login ("" for an API key) must wait
// before its credentials may be checked. Attempts that must wait are refused unchecked
// and are not counted. 0 means check them now: the attempt is then pending, counted
// against the address until the caller reports its outcome with exactly one of Fail,
// Succeed or Release. While only attempts in flight fill the address's limit, Wait
// blocks until one of them ends (or ctx does: then it reports a second's wait).
func (t *Throttle) Wait(ctx context.Context, remote, login string) time.Duration {
	addr := ThrottleAddress(remote)
	for {
		t.mu.Lock()
		now := t.now().UnixNano()
		wait, inFlight := t.wait(addr, login, now)
		if wait == 0 && !inFlight {
			t.pending[addr] = append(t.pending[addr], now)
		}
		ended := t.ended
		t.mu.Unlock()
		if !inFlight {
			return time.Duration(wait)
		}
		select {
		case <-ended:
		case <-ctx.Done():
			return time.Second
		}
	}
}

// wait is Wait's decision at now (t.mu held): how long the attempt must wait, and
// inFlight when only attempts in flight make it wait.
func (t *Throttle) wait(addr, login string, now int64) (wait int64, inFlight bool) {
	l := t.recent(t.addrs, addr, now)
	p := t.pending[addr]
	for len(p) > 0 && p[0] <= now-throttlePendingMax {
		p = p[1:]
	}
	if len(p) == 0 {
		delete(t.pending, addr)
	} else {
		t.pending[addr] = p
	}
	if n := len(l) + len(p); n >= ThrottlePerAddress {
		// The attempt may be checked once n is below the limit: when the refusal at
		// index n-limit has left the window, or, when that index is an attempt in
		// flight, when one ends.
		if i := n - ThrottlePerAddress; i < len(l) {
			wait = l[i] + int64(ThrottleWindow) - now
		} else {
			inFlight = true
		}
	}
	if login != "" && len(login) <= throttleMaxLogin {
		if n := len(t.recent(t.logins, login, now)); n >= ThrottleFreeLogin {
			if p := t.recent(t.pairs, pairKey(login, addr), now); len(p) > 0 {
				wait = max(wait, p[0]+int64(loginDelay(n))-now)
			}
		}
	}
	if wait > 0 {
		return wait, false
	}
	return 0, inFlight
}

// done ends a pending attempt of addr (t.mu held) and wakes the Wait calls blocked
// by attempts in flight.
func (t *Throttle) done(addr string) {
	if p := t.pending[addr]; len(p) > 1 {
		t.pending[addr] = p[1:]
	} else {
		delete(t.pending, addr)
	}
	close(t.ended)
	t.ended = make(chan struct{})
}

// Release ends a pending attempt from remote whose credentials were not checked after
// all (the server was too busy): it counts neither way.
func (t *Throttle) Release(remote string) {
	addr := ThrottleAddress(remote)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done(addr)
}

// loginDelay is the delay after n refusals of a login within the window (n >= the
// free ones): the base, doubled with each further refusal, at most the cap.
func loginDelay(n int) time.Duration {
	d := ThrottleBaseDelay
	for i := ThrottleFreeLogin; i < n && d < ThrottleMaxDelay; i++ {
		d *= 2
	}
	return min(d, ThrottleMaxDelay)
}

// Fail counts a refused attempt from remote for login ("" for an API key), ending
// its pending attempt.
func (t *Throttle) Fail(remote, login string) {
	addr := ThrottleAddress(remote)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done(addr)
	now := t.now().UnixNano()
	t.add(t.addrs, addr, now, false)
	if login != "" && len(login) <= throttleMaxLogin {
		t.add(t.logins, login, now, false)
		t.add(t.pairs, pairKey(login, addr), now, true)
	}
}

// Succeed ends the pending attempt from remote, and the delay of login ("" for an
// API key) at remote's address, after accepted credentials.
func (t *Throttle) Succeed(remote, login string) {
	addr := ThrottleAddress(remote)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done(addr)
	if login != "" && len(login) <= throttleMaxLogin {
		delete(t.pairs, pairKey(login, addr))
	}
}

// Entries is how many entries the throttle's tables hold (for tests of the bound).
func (t *Throttle) Entries() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.addrs) + len(t.logins) + len(t.pairs) + len(t.pending)
}

// recent returns key's times inside the window, dropping older ones (and the entry
// when none is left).
func (t *Throttle) recent(m map[string][]int64, key string, now int64) []int64 {
	l, ok := m[key]
	if !ok {
		return nil
	}
	cut := now - int64(ThrottleWindow)
	i := 0
	for i < len(l) && l[i] <= cut {
		i++
	}
	if i == len(l) {
		delete(m, key)
		return nil
	}
	if i > 0 {
		l = append(l[:0], l[i:]...)
		m[key] = l
	}
	return l
}

// add records a refusal at now under key: the last time only when last is set, else
// appended (keeping the newest throttleKept). A new key in a full table first makes
// room.
func (t *Throttle) add(m map[string][]int64, key string, now int64, last bool) {
	l, ok := m[key]
	if !ok && len(m) >= throttleMaxEntries {
		t.makeRoom(m, now)
	}
	switch {
	case last:
		l = append(l[:0], now)
	case len(l) >= throttleKept:
		l = append(l[1:len(l):len(l)], now) // drop the oldest; the next append reallocates
	default:
		l = append(l, now)
	}
	m[key] = l
}

// makeRoom drops the entries whose refusals all left the window, and when the table
// is still full, the tenth of it refused longest ago (a batch, so a flood of new keys
// sorts the table once per thousand of them, not scans it for each).
func (t *Throttle) makeRoom(m map[string][]int64, now int64) {
	cut := now - int64(ThrottleWindow)
	newest := make([]int64, 0, len(m))
	for k, l := range m {
		if l[len(l)-1] <= cut {
			delete(m, k)
			continue
		}
		newest = append(newest, l[len(l)-1])
	}
	if len(m) < throttleMaxEntries {
		return
	}
	slices.Sort(newest)
	limit := newest[len(newest)/10]
	for k, l := range m {
		if l[len(l)-1] <= limit {
			delete(m, k)
		}
	}
}
