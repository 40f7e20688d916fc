// Package netguard decides which addresses an outgoing webhook may connect to. The
// decision is made on the address actually dialled (net.Dialer's Control hook), after
// name resolution, so a name that resolves to an allowed address when a rule is stored
// and to a loopback one later (DNS rebinding) is still refused.
package netguard

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// metadata are the cloud providers' instance metadata addresses: AWS, GCP and Azure
// answer on 169.254.169.254 (already link-local), AWS also on fd00:ec2::254, Alibaba
// Cloud on 100.100.100.200 and Oracle Cloud on 192.0.0.192.
var metadata = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("100.100.100.200"),
	netip.MustParseAddr("192.0.0.192"),
}

// thisNetwork is 0.0.0.0/8: on Linux a connection to any of it reaches the local host.
var thisNetwork = netip.MustParsePrefix("0.0.0.0/8")

// Refusal says why an address is refused: "loopback", "link-local", ... ("" = allowed
// without an allow list entry). Private ranges (10/8, 172.16/12, 192.168/16, fc00::/7)
// are allowed: offline labs' receivers live there.
func Refusal(ip netip.Addr) string {
	ip = ip.Unmap()
	for _, m := range metadata {
		if ip == m {
			return "a cloud metadata address"
		}
	}
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsUnspecified() || (ip.Is4() && thisNetwork.Contains(ip)):
		return "unspecified"
	case ip.IsLinkLocalUnicast():
		return "link-local"
	case ip.IsMulticast():
		return "multicast"
	}
	return ""
}

// AllowList is the parsed WEBHOOK_ALLOW_PRIVATE: hosts (names or addresses as a URL
// names them) and address ranges that may be targeted although Refusal refuses them.
type AllowList struct {
	hosts    map[string]bool
	prefixes []netip.Prefix
}

// Parse reads a comma-separated list of host names, IP addresses and CIDR ranges;
// empty items are ignored. An error names the first item that is none of those.
func Parse(s string) (*AllowList, error) {
	a := &AllowList{hosts: map[string]bool{}}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if strings.Contains(item, "/") {
			p, err := netip.ParsePrefix(item)
			if err != nil {
				return nil, fmt.Errorf("%q is not a CIDR range (e.g. 127.0.0.0/8)", item)
			}
			a.prefixes = append(a.prefixes, p.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(strings.Trim(item, "[]")); err == nil {
			a.prefixes = append(a.prefixes, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
			continue
		}
		if !validHost(item) {
			return nil, fmt.Errorf("%q is not a host name, an IP address or a CIDR range", item)
		}
		a.hosts[strings.ToLower(strings.TrimSuffix(item, "."))] = true
	}
	return a, nil
}

// validHost reports whether s is a DNS name: labels of letters, digits and hyphens
// (underscores too, as some internal names have), 1 to 63 characters, 253 in all.
func validHost(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// allows reports whether the list names host (as dialled, before resolution) or
// contains ip.
func (a *AllowList) allows(host string, ip netip.Addr) bool {
	if a == nil {
		return false
	}
	if a.hosts[strings.ToLower(strings.TrimSuffix(host, "."))] {
		return true
	}
	ip = ip.Unmap()
	for _, p := range a.prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Check returns an error when a connection to ip, dialled for host, is refused.
func (a *AllowList) Check(host string, ip netip.Addr) error {
	why := Refusal(ip)
	if why == "" || a.allows(host, ip) {
		return nil
	}
	return &RefusedError{Host: host, Addr: ip.Unmap(), Reason: why}
}

// RefusedError is a connection the guard refused.
type RefusedError struct {
	Host   string
	Addr   netip.Addr
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("address %s of %s is %s: refused (WEBHOOK_ALLOW_PRIVATE does not list it)", e.Addr, e.Host, e.Reason)
}

// DialContext returns a dial function for an http.Transport that connects only to
// addresses the allow list returned by allow (read at each dial) permits. The check
// runs in the dialer's Control hook, on the address being connected to: every address
// a name resolves to is checked as it is tried.
func DialContext(allow func() *AllowList, timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		list := allow()
		d := net.Dialer{Timeout: timeout, Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("dialled address %q: %w", address, err)
			}
			return list.Check(host, ap.Addr())
		}}
		return d.DialContext(ctx, network, addr)
	}
}
