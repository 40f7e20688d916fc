package model_test

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"dataservice/store/model"
)

// ipv4Seeds is the committed seed corpus of the IPv4 parsers: canonical and
// non-canonical addresses and subnets, IPv6 forms and garbage.
var ipv4Seeds = []string{
	"10.0.0.1", "0.0.0.0", "255.255.255.255", "192.168.1.0/24", "192.168.1.1/24", "10.0.0.0/8", "10.0.0.0/0",
	"10.0.0.0/32", "10.0.0.0/33", "10.0.0.0/-1", "010.0.0.1", "10.0.0.01", "10.0.0", "10.0.0.1.", "10.0.0.256",
	"1.2.3.4 ", " 1.2.3.4", "1.2.3.4/24 ", "::ffff:10.0.0.1", "::1", "fe80::1%eth0", "1.2.3.4%eth0", "1.2.3.4/",
	"/24", "", "0x0a.0.0.1", "1e1.0.0.1", "१.२.३.४", "10.0.0.1\x00", "10.0.0.0/8/8", "10.0.0.0/08", "a.b.c.d",
	strings.Repeat("1", 300),
}

// FuzzCheckIPv4: never panics; an accepted address or subnet is canonical (it parses
// back to itself); strict implies subnet and an aligned prefix; an address is
// accepted exactly when model.HexIP accepts it.
func FuzzCheckIPv4(f *testing.F) {
	for _, s := range ipv4Seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		addrErr := model.CheckIPv4(s, "")
		_, hexErr := model.HexIP(s)
		if (addrErr == nil) != (hexErr == nil) {
			t.Fatalf("CheckIPv4(%q) = %v but HexIP = %v", s, addrErr, hexErr)
		}
		if (addrErr == nil) != model.IsDottedIPv4(s) {
			t.Fatalf("CheckIPv4(%q) = %v but IsDottedIPv4 = %v", s, addrErr, model.IsDottedIPv4(s))
		}
		if addrErr == nil {
			a, err := netip.ParseAddr(s)
			if err != nil || !a.Is4() || a.String() != s {
				t.Fatalf("CheckIPv4 accepted %q, which is not a canonical IPv4 address", s)
			}
		}
		subErr := model.CheckIPv4(s, "subnet")
		strictErr := model.CheckIPv4(s, "subnet strict")
		if subErr == nil {
			p, err := netip.ParsePrefix(s)
			if err != nil || !p.Addr().Is4() || p.String() != s {
				t.Fatalf("CheckIPv4(%q, subnet) accepted a non-canonical IPv4 subnet", s)
			}
			if (strictErr == nil) != (p.Masked() == p) {
				t.Fatalf("CheckIPv4(%q, subnet strict) = %v, but masked %s", s, strictErr, p.Masked())
			}
		} else if strictErr == nil {
			t.Fatalf("CheckIPv4(%q, subnet strict) accepted what subnet refused (%v)", s, subErr)
		}
		if addrErr == nil && subErr == nil {
			t.Fatalf("%q accepted both as an address and as a subnet", s)
		}
	})
}

// FuzzHexIP: never panics; an accepted address gives 8 lowercase hex digits that
// decode back to the dotted form.
func FuzzHexIP(f *testing.F) {
	for _, s := range ipv4Seeds {
		f.Add(s)
	}
	f.Add("1.2.3.4")
	f.Add("0a000001")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := model.HexIP(s)
		if err != nil {
			if h != "" {
				t.Fatalf("HexIP(%q) = %q with error %v", s, h, err)
			}
			return
		}
		if len(h) != 8 || strings.ToLower(h) != h {
			t.Fatalf("HexIP(%q) = %q, want 8 lowercase hex digits", s, h)
		}
		b, err := hex.DecodeString(h)
		if err != nil {
			t.Fatalf("HexIP(%q) = %q: not hex: %v", s, h, err)
		}
		if back := fmt.Sprintf("%d.%d.%d.%d", b[0], b[1], b[2], b[3]); back != s {
			t.Fatalf("HexIP(%q) = %q, which decodes to %s", s, h, back)
		}
		if again, err := model.HexIP(s); err != nil || again != h {
			t.Fatalf("HexIP(%q) not deterministic: %q then %q (%v)", s, h, again, err)
		}
	})
}
