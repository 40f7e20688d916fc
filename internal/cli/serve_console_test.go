package cli

import (
	"net"
	"strings"
	"testing"
)

// TestConsoleSignIn: the console's URL is SERVICE_BASE_URL's, else the listen
// address's (localhost for a wildcard); without SERVICE_ADMIN_PASSWORD the hint says
// the admin account is locked and how to get in; the password itself never appears.
func TestConsoleSignIn(t *testing.T) {
	t.Parallel()
	addr := func(s string) net.Addr {
		a, err := net.ResolveTCPAddr("tcp", s)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	for _, c := range []struct {
		name, addr, base, password, url, hint string
	}{
		{"loopback", "127.0.0.1:8080", "", "pw-1", "http://127.0.0.1:8080/", "sign in as admin with the password SERVICE_ADMIN_PASSWORD holds"},
		{"wildcard", "0.0.0.0:9000", "", "pw-1", "http://localhost:9000/", "SERVICE_ADMIN_PASSWORD holds"},
		{"ipv6 wildcard", "[::]:9000", "", "pw-1", "http://localhost:9000/", "SERVICE_ADMIN_PASSWORD holds"},
		{"base URL", "0.0.0.0:9000", "https://data.example.org/ds", "pw-1", "https://data.example.org/ds/", "SERVICE_ADMIN_PASSWORD holds"},
		{"base URL with a slash", "0.0.0.0:9000", "https://data.example.org/", "pw-1", "https://data.example.org/", "SERVICE_ADMIN_PASSWORD holds"},
		{"admin locked", "127.0.0.1:8080", "", "", "http://127.0.0.1:8080/", "the admin account is locked (SERVICE_ADMIN_PASSWORD is not set)"},
	} {
		u, hint := consoleSignIn(addr(c.addr), &settings{BaseURL: c.base, AdminPassword: c.password})
		if u != c.url || !strings.Contains(hint, c.hint) || (c.password != "" && strings.Contains(hint, c.password)) {
			t.Fatalf("%s: %q, %q; want %q and a hint with %q", c.name, u, hint, c.url, c.hint)
		}
	}
}
