package console_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"dataservice/store"
	"dataservice/store/model"
)

// BenchmarkPages100k times the list and detail pages over a schema of 100,000
// instances, as the server sees them (from the request to the last byte written),
// and reports p50 and p99 in ms:
//
//	go test -run '^$' -bench Pages100k -benchtime 200x ./server/console/
func BenchmarkPages100k(b *testing.B) {
	var pt pageTimer
	e := newEnvWith(b, "", pt.wrap)
	e.load(`
- {classname: _schema, keyname: site, name: {dataformat: string}}
- {classname: _schema, keyname: host, fqdn: {dataformat: string, order: 10}, site: {dataformat: schema, dataformat_ext: site, order: 20},
   cores: {dataformat: int, order: 30}, role: {dataformat: string, order: 40}, tags: {dataformat: string, cardinal_max: 0, order: 50}}
`)
	ctx := context.Background()
	var sites []*model.Entry
	for i := 0; i < 100; i++ {
		sites = append(sites, model.NewEntry(map[string]any{"classname": "site", "keyname": fmt.Sprintf("site%03d", i)}))
	}
	hosts := make([]*model.Entry, 0, 100_000)
	for i := 0; i < 100_000; i++ {
		hosts = append(hosts, model.NewEntry(map[string]any{"classname": "host", "keyname": fmt.Sprintf("host%06d", i),
			"displayname": fmt.Sprintf("Host %d", i), "fqdn": fmt.Sprintf("host%06d.example.org", i),
			"site": fmt.Sprintf("site%03d", i%100), "cores": int64(i%64 + 1), "role": []string{"web", "db", "cache"}[i%3],
			"tags": []any{"prod", fmt.Sprintf("rack%d", i%40)}}))
	}
	for _, batch := range [][]*model.Entry{sites, hosts} {
		res, err := e.db.Load(ctx, batch, store.LoadOptions{})
		if err != nil || res.Errors != 0 {
			b.Fatalf("load: %v %v", err, res.Messages)
		}
	}
	br := e.browser()
	br.signIn("admin", adminPassword)
	pages := []struct{ name, path string }{
		{"list_first_page", "/data/private/host/"},
		{"list_page_400", "/data/private/host/?page=400"},
		{"list_search", "/data/private/host/?search=host09999"},
		{"list_sorted_by_keyname_desc", "/data/private/host/?sort=-keyname"},
		{"list_sorted_by_field", "/data/private/host/?sort=cores"},
		{"detail", "/data/private/host/host054321/"},
		{"detail_referenced_by_1000", "/data/private/site/site042/"},
		{"dashboard", "/"},
	}
	pt.benchPages(b, br, pages)
}

// pageTimer records how long the server takes for each request (from the request to
// the last byte written) and reports a page's p50 and p99 in ms.
type pageTimer struct {
	mu    sync.Mutex
	times []time.Duration
}

// wrap is the handler wrapper for newEnvWith.
func (pt *pageTimer) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h.ServeHTTP(w, r)
		d := time.Since(start)
		pt.mu.Lock()
		pt.times = append(pt.times, d)
		pt.mu.Unlock()
	})
}

// benchPages runs one sub-benchmark per page: a warm-up request that must answer 200,
// then b.N timed requests, reported as p50-ms and p99-ms.
func (pt *pageTimer) benchPages(b *testing.B, br *browser, pages []struct{ name, path string }) {
	for _, pg := range pages {
		b.Run(pg.name, func(b *testing.B) {
			if p := br.get(pg.path); p.status != 200 {
				b.Fatalf("%s: %d\n%s", pg.path, p.status, p.body)
			}
			pt.mu.Lock()
			pt.times = pt.times[:0]
			pt.mu.Unlock()
			for i := 0; i < b.N; i++ {
				br.get(pg.path)
			}
			pt.mu.Lock()
			defer pt.mu.Unlock()
			times := pt.times
			sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
			at := func(q float64) float64 {
				return float64(times[min(len(times)-1, int(q*float64(len(times))))].Microseconds()) / 1000
			}
			b.ReportMetric(at(0.50), "p50-ms")
			b.ReportMetric(at(0.99), "p99-ms")
		})
	}
}
