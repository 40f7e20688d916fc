package netguard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestRefusal(t *testing.T) {
	for _, c := range []struct{ ip, want string }{
		{"127.0.0.1", "loopback"},
		{"127.8.9.10", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "unspecified"},
		{"::", "unspecified"},
		{"169.254.1.1", "link-local"},
		{"fe80::1", "link-local"},
		{"224.0.0.1", "multicast"},
		{"ff02::1", "multicast"},
		{"169.254.169.254", "a cloud metadata address"},
		{"fd00:ec2::254", "a cloud metadata address"},
		{"100.100.100.200", "a cloud metadata address"},
		{"192.0.0.192", "a cloud metadata address"},
		{"10.1.2.3", ""},
		{"172.16.0.1", ""},
		{"192.168.1.1", ""},
		{"fd12::1", ""},
		{"100.100.100.199", ""},
		{"93.184.216.34", ""},
	} {
		if got := Refusal(netip.MustParseAddr(c.ip)); got != c.want {
			t.Errorf("Refusal(%s) = %q, want %q", c.ip, got, c.want)
		}
	}
}

func TestParseAndCheck(t *testing.T) {
	a, err := Parse(" 127.0.0.1 , 169.254.0.0/16,receiver.lab., [::1],")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		host, ip string
		ok       bool
	}{
		{"127.0.0.1", "127.0.0.1", true},
		{"x", "127.0.0.2", false},
		{"x", "169.254.169.254", true},
		{"Receiver.Lab", "127.0.0.5", true},
		{"other.lab", "127.0.0.5", false},
		{"x", "::1", true},
		{"x", "::ffff:127.0.0.1", true},
		{"x", "fe80::1", false},
		{"x", "10.0.0.1", true},
	} {
		err := a.Check(c.host, netip.MustParseAddr(c.ip))
		if (err == nil) != c.ok {
			t.Errorf("Check(%s, %s) = %v, want allowed %v", c.host, c.ip, err, c.ok)
		}
	}
	var none *AllowList
	if err := none.Check("h", netip.MustParseAddr("127.0.0.1")); err == nil {
		t.Fatal("a nil list allowed loopback")
	}
	for _, bad := range []string{"10.0.0.0/33", "host name", "-bad.lab", "a..b", "http://x/"} {
		if _, err := Parse(bad); err == nil || !strings.Contains(err.Error(), "not a") {
			t.Errorf("Parse(%q) = %v, want an error naming the item", bad, err)
		}
	}
}

// TestDialRefusesLoopback dials a real listener on 127.0.0.1: refused without an allow
// list entry (also through the name localhost), connected with one.
func TestDialRefusesLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	empty, _ := Parse("")
	for _, addr := range []string{ln.Addr().String(), net.JoinHostPort("localhost", port)} {
		_, err := DialContext(func() *AllowList { return empty }, 5*time.Second)(ctx, "tcp", addr)
		var re *RefusedError
		if !errors.As(err, &re) || re.Reason != "loopback" {
			t.Fatalf("dial %s: %v, want a loopback refusal", addr, err)
		}
	}
	allow, _ := Parse("127.0.0.1")
	c, err := DialContext(func() *AllowList { return allow }, 5*time.Second)(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial with 127.0.0.1 allowed: %v", err)
	}
	c.Close()
}
