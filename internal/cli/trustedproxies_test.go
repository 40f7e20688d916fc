package cli

import (
	"strings"
	"testing"
)

// TestTrustedProxiesSetting: SERVICE_TRUSTED_PROXIES takes comma-separated CIDRs and
// addresses (default none), --trusted-proxies wins, and anything else is refused
// naming the variable and the bad item.
func TestTrustedProxiesSetting(t *testing.T) {
	t.Parallel()
	s, err := loadSettings(envOf(map[string]string{}), &settingFlags{})
	if err != nil || len(s.TrustedProxies) != 0 {
		t.Fatalf("default: %v, %v; want none", s.TrustedProxies, err)
	}
	s, err = loadSettings(envOf(map[string]string{"SERVICE_TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.7,2001:db8::/48"}), &settingFlags{})
	if err != nil || len(s.TrustedProxies) != 3 || s.TrustedProxies[1].String() != "192.0.2.7/32" {
		t.Fatalf("three entries: %v, %v", s.TrustedProxies, err)
	}
	s, err = loadSettings(envOf(map[string]string{"SERVICE_TRUSTED_PROXIES": "10.0.0.0/8"}), &settingFlags{trustedProxies: "127.0.0.1"})
	if err != nil || len(s.TrustedProxies) != 1 || s.TrustedProxies[0].String() != "127.0.0.1/32" {
		t.Fatalf("--trusted-proxies 127.0.0.1: %v, %v", s.TrustedProxies, err)
	}
	for _, bad := range []string{"proxy.internal", "10.0.0.0/40", "10.0.0.1:443", "10.0.0.1;10.0.0.2"} {
		_, err := loadSettings(envOf(map[string]string{"SERVICE_TRUSTED_PROXIES": bad}), &settingFlags{})
		if err == nil || !strings.Contains(err.Error(), "SERVICE_TRUSTED_PROXIES") || !strings.Contains(err.Error(), "not an IP address or CIDR") {
			t.Fatalf("%q accepted or not named: %v", bad, err)
		}
	}
}
