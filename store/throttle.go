package store

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The credential throttle: one per open database, shared by every door that checks a
// password or a key secret (HTTP Basic and API keys on the API, the console's
// sign-in), its refusals kept in the database's throttle table.
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
// The refusals live in the database (the throttle table), so every process that
// shares it, each node of a PostgreSQL deployment, counts them together: a refusal on
// one node holds back the address and the login on all of them at once. Attempts in
// flight are this process's (a place in memory), so each node lets at most
// ThrottlePerAddress attempts of one address be checked at the same time; they become
// refusals of the table when they fail. Only refusals write: a check of credentials
// reads the table (one statement, by primary key), and a success writes only when it
// ends a delay that a refusal started. Logins are kept as keyed hashes (loginName), so
// a password typed into the login field is not written down in clear.
//
// The table is bounded whatever addresses and logins an attacker uses: each refusal
// first deletes the rows whose refusals have all left the window; each kind (address,
// login, login×address) holds at most throttleMaxEntries rows of at most throttleKept
// times, and when a kind is full, the tenth of its rows refused longest ago goes.
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
	// throttleWriteMax bounds the writing of one outcome, which does not end with the
	// request: a refusal counts even when its client has gone.
	throttleWriteMax = 30 * time.Second
)

// The kinds of the throttle table's rows.
const (
	throttleAddress = "address"
	throttleLogin   = "login"
	throttlePair    = "pair"
)

// Throttle counts refused credentials; see the constants above for its rules.
type Throttle struct {
	db *DB
	// maxEntries is the bound of rows per kind (throttleMaxEntries; tests lower it).
	maxEntries int
	mu         sync.Mutex
	// pending holds, per address, the start times of the attempts let through by Wait
	// whose outcome is not known yet; an entry exists only while one is in flight. A
	// start older than throttlePendingMax is dropped: a check ends within seconds, and
	// an outcome never reported (a panic between Wait and it) must not hold a place
	// for good.
	pending map[string][]int64
	// ended is closed, and replaced, whenever a pending attempt ends: Wait calls
	// blocked by attempts in flight then look again.
	ended chan struct{}
	// reading holds, per address with a Wait reading the table, how many read and how
	// many of the address's pending attempts ended meanwhile. Wait reads the table
	// outside mu: an attempt that failed during that read may be gone from pending
	// while its refusal is missing from what was read, so Wait decides only on a read
	// during which none of its address's attempts ended, and reads again otherwise.
	reading map[string]*throttleReads
	// afterRead, when set (tests only), runs after Wait's read of the table.
	afterRead func()
	// nameKey is the key of the login names (key), once read.
	nameKey []byte
}

// throttleReads is Throttle.reading's entry of one address.
type throttleReads struct {
	readers int
	endings uint64
}

// throttlePendingMax is how long an attempt in flight holds its address's place.
const throttlePendingMax = int64(time.Minute)

// Throttle is the database's credential throttle (its clock is db.Now).
func (db *DB) Throttle() *Throttle {
	db.throttleOnce.Do(func() {
		db.throttle = &Throttle{db: db, maxEntries: throttleMaxEntries, pending: map[string][]int64{},
			reading: map[string]*throttleReads{}, ended: make(chan struct{})}
	})
	return db.throttle
}

// SetMaxEntriesForTest lowers the bound of the throttle table's rows per kind, so a
// test reaches it with few refusals. Production never calls it.
func (t *Throttle) SetMaxEntriesForTest(n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.maxEntries = n
}

// SetAfterReadForTest makes f run after each read of the table by Wait, before its
// decision: a test ends other attempts there. Production never calls it.
func (t *Throttle) SetAfterReadForTest(f func()) { t.afterRead = f }

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

// loginName and pairName are the throttle table's names of a login and of a login at
// an address: HMAC-SHA256 under the database's own random key (key), so a password
// typed into the login field is not stored in clear, nor as a plain hash a table
// precomputed once would reverse for every database (and a login holding a NUL,
// which PostgreSQL's text refuses, is stored).
func loginName(key []byte, login string) string { return hashName(key, "login\x00"+login) }

func pairName(key []byte, login, addr string) string {
	return hashName(key, "pair\x00"+login+"\x00"+addr)
}

func hashName(key []byte, s string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return hex.EncodeToString(m.Sum(nil))
}

// key is the key of the table's login names: the database's node salt (random, made
// at first use and shared by every node of the database), read once.
func (t *Throttle) key(ctx context.Context) ([]byte, error) {
	t.mu.Lock()
	k := t.nameKey
	t.mu.Unlock()
	if k != nil {
		return k, nil
	}
	k, err := t.db.NodeSalt(ctx)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.nameKey = k
	t.mu.Unlock()
	return k, nil
}

// tracked reports whether login counts for itself (not an API key's "", not too long).
func tracked(login string) bool { return login != "" && len(login) <= throttleMaxLogin }

// refusals are the times (Unix ns, oldest first) within the window that the throttle
// table holds for an attempt's address, its login and the login at the address.
type refusals struct {
	addr, login, pair []int64
}

// Wait reports how long an attempt from the client at remote (its address, from
// clientaddr; a "host:port" is accepted too) for login ("" for an API key) must wait
// before its credentials may be checked. Attempts that must wait are refused unchecked
// and are not counted. 0 means check them now: the attempt is then pending, counted
// against the address until the caller reports its outcome with exactly one of Fail,
// Succeed or Release. While only attempts in flight fill the address's limit, Wait
// blocks until one of them ends (or ctx does: then it reports a second's wait). When
// the table cannot be read, the attempt waits a second rather than be checked
// unthrottled.
func (t *Throttle) Wait(ctx context.Context, remote, login string) time.Duration {
	addr := ThrottleAddress(remote)
	for {
		t.mu.Lock()
		reads := t.reading[addr]
		if reads == nil {
			reads = &throttleReads{}
			t.reading[addr] = reads
		}
		reads.readers++
		endings := reads.endings
		t.mu.Unlock()
		now := t.db.Now().UnixNano()
		r, err := t.read(ctx, addr, login, now)
		if t.afterRead != nil {
			t.afterRead()
		}
		t.mu.Lock()
		if reads.readers--; reads.readers == 0 {
			delete(t.reading, addr)
		}
		if err != nil {
			t.mu.Unlock()
			if ctx.Err() == nil {
				t.db.log.Error("read the credential throttle", "error", err)
			}
			return time.Second
		}
		if reads.endings != endings {
			t.mu.Unlock()
			continue
		}
		wait, inFlight := t.wait(r, addr, login, now)
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

// read returns the refusals within the window at now of addr, login and the pair.
func (t *Throttle) read(ctx context.Context, addr, login string, now int64) (refusals, error) {
	var r refusals
	key, err := t.key(ctx)
	if err != nil {
		return r, err
	}
	rows, err := t.db.rquery(ctx, `SELECT kind, times FROM throttle
		WHERE (kind = 'address' AND name = ?) OR (kind = 'login' AND name = ?) OR (kind = 'pair' AND name = ?)`,
		addr, loginName(key, login), pairName(key, login, addr))
	if err != nil {
		return r, err
	}
	defer rows.Close()
	cut := now - int64(ThrottleWindow)
	for rows.Next() {
		var kind, times string
		if err := rows.Scan(&kind, &times); err != nil {
			return r, err
		}
		switch l := parseTimes(times, cut); kind {
		case throttleAddress:
			r.addr = l
		case throttleLogin:
			r.login = l
		case throttlePair:
			r.pair = l
		}
	}
	return r, rows.Err()
}

// parseTimes reads a row's times, keeping those after cut. A malformed time (the
// table written by hand) is skipped.
func parseTimes(text string, cut int64) []int64 {
	var l []int64
	for _, f := range strings.Fields(text) {
		if v, err := strconv.ParseInt(f, 10, 64); err == nil && v > cut {
			l = append(l, v)
		}
	}
	return l
}

// formatTimes is parseTimes' text.
func formatTimes(l []int64) string {
	b := make([]byte, 0, 20*len(l))
	for i, v := range l {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, v, 10)
	}
	return string(b)
}

// wait is Wait's decision at now (t.mu held): how long the attempt must wait, and
// inFlight when only attempts in flight make it wait.
func (t *Throttle) wait(r refusals, addr, login string, now int64) (wait int64, inFlight bool) {
	l := r.addr
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
	if tracked(login) {
		if n := len(r.login); n >= ThrottleFreeLogin && len(r.pair) > 0 {
			wait = max(wait, r.pair[len(r.pair)-1]+int64(loginDelay(n))-now)
		}
	}
	if wait > 0 {
		return wait, false
	}
	return 0, inFlight
}

// done ends a pending attempt of addr and wakes the Wait calls blocked by attempts
// in flight.
func (t *Throttle) done(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.pending[addr]; len(p) > 1 {
		t.pending[addr] = p[1:]
	} else {
		delete(t.pending, addr)
	}
	if reads := t.reading[addr]; reads != nil {
		reads.endings++
	}
	close(t.ended)
	t.ended = make(chan struct{})
}

// Release ends a pending attempt from remote whose credentials were not checked after
// all (the server was too busy): it counts neither way.
func (t *Throttle) Release(remote string) {
	t.done(ThrottleAddress(remote))
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

// Fail counts a refused attempt from remote for login ("" for an API key), then ends
// its pending attempt (in that order, so the place is not free before the refusal
// counts). The refusal is written even when ctx has ended; an error means it was not
// counted.
func (t *Throttle) Fail(ctx context.Context, remote, login string) error {
	addr := ThrottleAddress(remote)
	defer t.done(addr)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), throttleWriteMax)
	defer cancel()
	if err := t.record(ctx, addr, login); err != nil {
		return fmt.Errorf("count refused credentials: %w", err)
	}
	return nil
}

// record writes a refusal of addr (and of login, and of login at addr) at the
// clock's time, in one write transaction: writers take turns, so the rows read are
// the rows rewritten.
func (t *Throttle) record(ctx context.Context, addr, login string) error {
	key, err := t.key(ctx)
	if err != nil {
		return err
	}
	raw, release, err := t.db.beginWriter(ctx)
	if err != nil {
		return err
	}
	defer release()
	defer raw.Rollback()
	c := conn{raw, t.db.dia}
	now := t.db.Now().UnixNano()
	cut := now - int64(ThrottleWindow)
	// The rows whose refusals all left the window go with every refusal, so the table
	// holds the window's refusals only.
	if _, err := c.execContext(ctx, "DELETE FROM throttle WHERE kind IN ('address', 'login', 'pair') AND last <= ?", cut); err != nil {
		return err
	}
	if err := t.add(ctx, c, throttleAddress, addr, now, cut, false); err != nil {
		return err
	}
	if tracked(login) {
		if err := t.add(ctx, c, throttleLogin, loginName(key, login), now, cut, false); err != nil {
			return err
		}
		if err := t.add(ctx, c, throttlePair, pairName(key, login, addr), now, cut, true); err != nil {
			return err
		}
	}
	return raw.Commit()
}

// add records a refusal at now in the row of kind and name: the last time only when
// last is set, else appended (keeping the newest throttleKept). A new row in a full
// kind first makes room.
func (t *Throttle) add(ctx context.Context, c conn, kind, name string, now, cut int64, last bool) error {
	var times string
	err := c.queryRowContext(ctx, "SELECT times FROM throttle WHERE kind = ? AND name = ?", kind, name).Scan(&times)
	if errors.Is(err, sql.ErrNoRows) {
		err = t.makeRoom(ctx, c, kind)
	}
	if err != nil {
		return err
	}
	l := parseTimes(times, cut)
	if last {
		l = l[:0]
	}
	l = append(l, now)
	if len(l) > throttleKept {
		l = l[len(l)-throttleKept:]
	}
	_, err = c.execContext(ctx, `INSERT INTO throttle(kind, name, times, last) VALUES(?, ?, ?, ?)
		ON CONFLICT(kind, name) DO UPDATE SET times = excluded.times, last = excluded.last`,
		kind, name, formatTimes(l), now)
	return err
}

// makeRoom drops, when kind holds maxEntries rows, the tenth of them refused longest
// ago (a batch, so a flood of new names counts the rows once per thousand of them,
// not once each). Expired rows are gone already (record).
func (t *Throttle) makeRoom(ctx context.Context, c conn, kind string) error {
	t.mu.Lock()
	limit := t.maxEntries
	t.mu.Unlock()
	var n int
	if err := c.queryRowContext(ctx, "SELECT count(*) FROM throttle WHERE kind = ?", kind).Scan(&n); err != nil {
		return err
	}
	if n < limit {
		return nil
	}
	var oldest int64
	if err := c.queryRowContext(ctx, "SELECT last FROM throttle WHERE kind = ? ORDER BY last LIMIT 1 OFFSET ?",
		kind, n/10).Scan(&oldest); err != nil {
		return err
	}
	_, err := c.execContext(ctx, "DELETE FROM throttle WHERE kind = ? AND last <= ?", kind, oldest)
	return err
}

// Succeed ends the pending attempt from remote, and the delay of login ("" for an
// API key) at remote's address, after accepted credentials. Most successes follow no
// refusal of the login at the address: they read the table and write nothing.
func (t *Throttle) Succeed(ctx context.Context, remote, login string) error {
	addr := ThrottleAddress(remote)
	t.done(addr)
	if !tracked(login) {
		return nil
	}
	key, err := t.key(ctx)
	if err != nil {
		return fmt.Errorf("end the sign-in delay: %w", err)
	}
	name := pairName(key, login, addr)
	var one int
	err = t.db.rqueryRow(ctx, "SELECT 1 FROM throttle WHERE kind = 'pair' AND name = ?", name).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), throttleWriteMax)
		defer cancel()
		_, err = t.db.execWriter(ctx, "DELETE FROM throttle WHERE kind = 'pair' AND name = ?", name)
	}
	if err != nil {
		return fmt.Errorf("end the sign-in delay: %w", err)
	}
	return nil
}

// Entries is how many rows the throttle table holds plus the addresses with attempts
// in flight (for tests of the bound).
func (t *Throttle) Entries(ctx context.Context) (int, error) {
	var n int
	if err := t.db.reader().queryRowContext(ctx, "SELECT count(*) FROM throttle").Scan(&n); err != nil {
		return 0, fmt.Errorf("count throttle rows: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return n + len(t.pending), nil
}

// InFlight is how many attempts from remote's address are in flight (for tests).
func (t *Throttle) InFlight(remote string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending[ThrottleAddress(remote)])
}
