package clientaddr

import (
	"net/http"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tr, err := Parse(" 10.0.0.0/8, 192.0.2.7 ,::ffff:198.51.100.1, 2001:db8::/32,")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(tr); got != 4 {
		t.Fatalf("%d entries, want 4: %v", got, tr)
	}
	if tr, err := Parse(""); err != nil || tr != nil {
		t.Fatalf("empty list: %v %v", tr, err)
	}
	for _, bad := range []string{"proxy.example", "10.0.0.0/33", "fe80::1%eth0", "10.0.0.1:80", strings.Repeat("x", 300)} {
		_, err := Parse("10.0.0.1," + bad)
		if err == nil || !strings.Contains(err.Error(), "not an IP address or CIDR") || len(err.Error()) > 120 {
			t.Errorf("Parse(%.20q): %v", bad, err)
		}
	}
}

func TestOf(t *testing.T) {
	tr, err := Parse("10.0.0.0/8,192.0.2.7")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		trusted Trusted
		peer    string
		xff     []string
		want    string
	}{
		{nil, "10.1.1.1:5000", []string{"203.0.113.9"}, "10.1.1.1"},                       // nothing trusted: header never read
		{tr, "198.51.100.3:5000", []string{"203.0.113.9"}, "198.51.100.3"},                // forged by an untrusted peer
		{tr, "10.1.1.1:5000", nil, "10.1.1.1"},                                            // proxy, no header
		{tr, "10.1.1.1:5000", []string{"203.0.113.9"}, "203.0.113.9"},                     // one proxy
		{tr, "10.1.1.1:5000", []string{"1.2.3.4, 203.0.113.9, 192.0.2.7"}, "203.0.113.9"}, // client-written hop ignored
		{tr, "10.1.1.1:5000", []string{"1.2.3.4", "203.0.113.9"}, "203.0.113.9"},          // several lines are one list
		{tr, "10.1.1.1:5000", []string{"10.2.2.2, 10.3.3.3"}, "10.2.2.2"},                 // all trusted: left-most
		{tr, "10.1.1.1:5000", []string{"203.0.113.9, junk"}, "10.1.1.1"},                  // malformed: the peer
		{tr, "10.1.1.1:5000", []string{"203.0.113.9,"}, "10.1.1.1"},                       // empty hop: the peer
		{tr, "10.1.1.1:5000", []string{"[2001:db8::1]:443"}, "2001:db8::1"},               // hop with port
		{tr, "[::ffff:10.1.1.1]:5000", []string{"::ffff:203.0.113.9"}, "203.0.113.9"},     // mapped addresses
		{tr, "junk", []string{"203.0.113.9"}, "junk"},
	} {
		r, _ := http.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.peer
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := c.trusted.Of(r); got != c.want {
			t.Errorf("peer %s, X-Forwarded-For %q: %s, want %s", c.peer, c.xff, got, c.want)
		}
	}
}
