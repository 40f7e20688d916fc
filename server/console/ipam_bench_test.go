package console_test

import (
	"fmt"
	"testing"

	"dataservice/internal/testkit"
)

// BenchmarkIPAMPages times the IPAM pages over 200,000 addresses (in 1,000 /24s under
// one /8) and 100,000 instances with an ipv4 field, as the server sees them, and
// reports p50 and p99 in ms:
//
//	go test -run '^$' -bench IPAMPages -benchtime 50x ./server/console/
func BenchmarkIPAMPages(b *testing.B) {
	var pt pageTimer
	e := newEnvWith(b, "", pt.wrap)
	e.load(`- {classname: _schema, keyname: host, mgmt: {dataformat: ipv4}, role: {dataformat: string}}`)
	subnets := []testkit.Row{{Keyname: "10.0.0.0/8", Enabled: true, Data: map[string]any{}}}
	var ips []testkit.Row
	for n := 0; n < 1000; n++ {
		net := fmt.Sprintf("10.%d.%d", n/256, n%256)
		subnets = append(subnets, testkit.Row{Keyname: net + ".0/24", Enabled: true, Data: map[string]any{"site": "s1"}})
		for h := 1; h <= 200; h++ {
			a := 10<<24 | n<<8 | h
			ips = append(ips, testkit.Row{Keyname: fmt.Sprintf("%08x", a), Displayname: fmt.Sprintf("%s.%d", net, h), Enabled: true,
				Data: map[string]any{"hostname": fmt.Sprintf("h%d-%d", n, h), "collected": h%2 == 0}})
		}
	}
	testkit.InsertInstances(b, e.db, "ipam_subnet", subnets)
	testkit.InsertInstances(b, e.db, "ipam_ip", ips)
	var hosts []testkit.Row
	for i := 0; i < 100_000; i++ {
		hosts = append(hosts, testkit.Row{Keyname: fmt.Sprintf("host%06d", i), Enabled: true,
			Data: map[string]any{"mgmt": ips[i].Displayname, "role": "web"}})
	}
	testkit.InsertInstances(b, e.db, "host", hosts)
	br := e.browser()
	br.signIn("admin", adminPassword)
	pages := []struct{ name, path string }{
		{"subnets_first_page", "/data/private/ipam/"},
		{"subnets_page_5", "/data/private/ipam/?page=5"},
		{"subnet_8_200k_addresses", "/data/private/ipam/10.0.0.0/8/"},
		{"subnet_8_from_middle", "/data/private/ipam/10.0.0.0/8/?from=10.1.200.1"},
		{"subnet_24", "/data/private/ipam/10.2.100.0/24/"},
		{"find_ip_scan_100k", "/data/private/ipam/find/?ip=10.1.2.3"},
	}
	pt.benchPages(b, br, pages)
}
