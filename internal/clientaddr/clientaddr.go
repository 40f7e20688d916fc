// Package clientaddr tells the address of the client behind a request: the TCP peer,
// or, when the peer is a trusted reverse proxy, the address the proxies forwarded in
// X-Forwarded-For. The credential throttle, API keys' IP filters and the console's
// sessions all use it, so one client has one address everywhere.
package clientaddr

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Trusted is the set of reverse proxies whose X-Forwarded-For is believed. The zero
// value trusts none: X-Forwarded-For is never read.
type Trusted []netip.Prefix

// Parse reads a comma-separated list of CIDRs ("10.0.0.0/8") and addresses
// ("192.0.2.7", a /32 or /128); "" is the empty list.
func Parse(list string) (Trusted, error) {
	var t Trusted
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if p, err := netip.ParsePrefix(item); err == nil {
			t = append(t, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(item)
		if err != nil || a.Zone() != "" {
			if len(item) > 64 {
				item = item[:64] + "..."
			}
			return nil, fmt.Errorf("%q: not an IP address or CIDR", item)
		}
		a = a.Unmap()
		t = append(t, netip.PrefixFrom(a, a.BitLen()))
	}
	return t, nil
}

func (t Trusted) contains(a netip.Addr) bool {
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parse reads an address as a peer or a forwarded hop: a bare IP or IP:port, without
// zone, IPv4-mapped IPv6 as IPv4.
func parse(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	}
	return a.Unmap().WithZone(""), true
}

// Of is the client address of r (an IP, no port). When the TCP peer is a trusted
// proxy, it is the right-most X-Forwarded-For hop that is not itself a trusted proxy
// (the left-most hop when all are trusted); a missing or malformed header gives the
// peer. Hops left of the first untrusted one are whatever the client wrote, so they
// are never used.
func (t Trusted) Of(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, ok := parse(host)
	if !ok {
		return host
	}
	if len(t) == 0 || !t.contains(peer) {
		return peer.String()
	}
	// Several X-Forwarded-For lines are one list, in order (RFC 9110 field lines).
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	if len(hops) == 1 && strings.TrimSpace(hops[0]) == "" {
		return peer.String()
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parse(hops[i])
		if !ok {
			return peer.String()
		}
		client = a
		if !t.contains(a) {
			break
		}
	}
	return client.String()
}
