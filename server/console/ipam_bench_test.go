package console_test

import (
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"dataservice/internal/testkit"
)

// BenchmarkIPAMPages times the IPAM pages over 200,000 addresses (in 1,000 /24s under
// one /8) and 100,000 instances with an ipv4 field, as the server sees them, and
// reports p50 and p99 in ms:
//
//	go test -run '^$' -bench IPAMPages -benchtime 50x ./server/console/
func BenchmarkIPAMPages(b *testing.B) {
	var mu sync.Mutex
	var times []time.Duration
	e := newEnvWith(b, "", func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			h.ServeHTTP(w, r)
			d := time.Since(start)
			mu.Lock()
			times = append(times, d)
			mu.Unlock()
		})
	})
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
	for _, pg := range pages {
		b.Run(pg.name, func(b *testing.B) {
			if p := br.get(pg.path); p.status != 200 {
				b.Fatalf("%s: %d\n%s", pg.path, p.status, p.body)
			}
			mu.Lock()
			times = times[:0]
			mu.Unlock()
			for i := 0; i < b.N; i++ {
				br.get(pg.path)
			}
			mu.Lock()
			defer mu.Unlock()
			sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
			at := func(q float64) float64 {
				return float64(times[min(len(times)-1, int(q*float64(len(times))))].Microseconds()) / 1000
			}
			b.ReportMetric(at(0.50), "p50-ms")
			b.ReportMetric(at(0.99), "p99-ms")
		})
	}
}
