package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"dataservice/store"
	"dataservice/store/model"
)

// parityN is the number of instances of BenchmarkConsoleParity: BENCH_CONSOLE_N,
// default 200,000 (not BENCH_N: bench/run.sh measures the other rows at 1M).
func parityN() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_CONSOLE_N")); err == nil && n > 0 {
		return n
	}
	return 200_000
}

// parityClients is the number of concurrent clients of BenchmarkConsoleParity.
const parityClients = 16

// BenchmarkConsoleParity measures the console's pages against the API requests that
// read the same rows, on the same database in the same run, with 16 concurrent clients
// over the real HTTP stack on 127.0.0.1:
//   - list: console /data/private/host/?page=50&size=50 against
//     GET /api/instances/host/?page=50&size=50 (the same 50 rows);
//   - detail: console /data/private/host/<key>/ against GET /api/instances/host/<key>/
//     (the same random instances).
//
// The console user and the API key hold the same permissions (a role's p_data_access
// and p_data_read, not every permission). The two sides alternate in blocks of 160
// requests, so both meet the same moments of a shared machine; b.N requests each.
// Metrics: req/s (wall clock of the blocks), p50/p99, CPU µs per request (process
// user + system: server and client), allocations per request (process-wide), and
// console/api, the ratio of the rates (the aim is ≥ 0.5), and cpu-ratio, the same
// ratio of CPU time per request. BENCH_CONSOLE_N instances (default 200,000):
//
//	BENCH_CONSOLE_N=200000 go test -run '^$' -bench ConsoleParity -benchtime 2000x -timeout 1h ./server/console/
func BenchmarkConsoleParity(b *testing.B) {
	n := parityN()
	e := newEnv(b, "")
	e.load(`
- {classname: _user, keyname: viewer, password: viewer-pass-1}
- {classname: _role, keyname: viewers, permissions: [p_data_access, p_data_read], users: [viewer]}
- {classname: _apikey, keyname: bench, secret: s3cret-bench, permissions: [p_data_access, p_data_read]}
- {classname: _schema, keyname: site, name: {dataformat: string}}
- {classname: _schema, keyname: host, fqdn: {dataformat: string, order: 10}, site: {dataformat: schema, dataformat_ext: site, order: 20},
   cores: {dataformat: int, order: 30}, role: {dataformat: string, order: 40}, tags: {dataformat: string, cardinal_max: 0, order: 50}}
`)
	ctx := context.Background()
	start := time.Now()
	var sites []*model.Entry
	for i := range 100 {
		sites = append(sites, model.NewEntry(map[string]any{"classname": "site", "keyname": fmt.Sprintf("site%03d", i)}))
	}
	if res, err := e.db.Load(ctx, sites, store.LoadOptions{}); err != nil || res.Errors != 0 {
		b.Fatalf("load sites: %v %v", err, res.Messages)
	}
	for from := 0; from < n; from += 50_000 {
		hosts := make([]*model.Entry, 0, 50_000)
		for i := from; i < min(from+50_000, n); i++ {
			hosts = append(hosts, model.NewEntry(map[string]any{"classname": "host", "keyname": fmt.Sprintf("host%07d", i),
				"displayname": fmt.Sprintf("Host %d", i), "fqdn": fmt.Sprintf("host%07d.example.org", i),
				"site": fmt.Sprintf("site%03d", i%100), "cores": int64(i%64 + 1), "role": []string{"web", "db", "cache"}[i%3],
				"tags": []any{"prod", fmt.Sprintf("rack%d", i%40)}}))
		}
		if res, err := e.db.Load(ctx, hosts, store.LoadOptions{}); err != nil || res.Errors != 0 {
			b.Fatalf("load hosts: %v %v", err, res.Messages)
		}
	}
	b.Logf("set-up: %d instances in %v", n, time.Since(start).Round(time.Millisecond))

	br := e.browser()
	br.signIn("viewer", "viewer-pass-1")
	u, _ := url.Parse(e.srv.URL)
	var cookie string
	for _, ck := range br.c.Jar.Cookies(u) {
		if ck.Name == "ds_session" {
			cookie = ck.Name + "=" + ck.Value
		}
	}
	if cookie == "" {
		b.Fatal("no session cookie after signing in")
	}
	cl := &parityClient{base: e.srv.URL, c: &http.Client{Timeout: 60 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: parityClients, MaxConnsPerHost: parityClients}}}
	console := map[string]string{"Cookie": cookie, "Accept": "text/html"}
	api := map[string]string{"Authorization": "Bearer bench:s3cret-bench", "Accept": "application/json"}

	// The same rows: every keyname of the API's page is on the console's.
	const apiList, consoleList = "/api/instances/host/?page=50&size=50", "/data/private/host/?page=50&size=50"
	if n >= 2500 {
		apiBody, consoleBody := cl.get(b, apiList, api), cl.get(b, consoleList, console)
		keys := regexp.MustCompile(`"keyname":\s*"(host\d+)"`).FindAllStringSubmatch(apiBody, -1)
		if len(keys) != 50 {
			b.Fatalf("the API's page has %d rows, want 50", len(keys))
		}
		for _, k := range keys {
			if !regexp.MustCompile(`>` + k[1] + `<`).MatchString(consoleBody) {
				b.Fatalf("the console's page lacks %s of the API's page", k[1])
			}
		}
	}
	var seq atomic.Uint64
	key := func() string { return fmt.Sprintf("host%07d", (seq.Add(1)*7919)%uint64(n)) }
	pairs := []struct {
		name         string
		api, console func() string
	}{
		{"list", func() string { return apiList }, func() string { return consoleList }},
		{"detail", func() string { return "/api/instances/host/" + key() + "/" }, func() string { return "/data/private/host/" + key() + "/" }},
	}
	for _, p := range pairs {
		b.Run(fmt.Sprintf("n=%d/%s", n, p.name), func(b *testing.B) {
			cl.get(b, p.api(), api)
			cl.get(b, p.console(), console)
			var a, c paritySide
			const block = parityClients * 10
			b.ResetTimer()
			for done := 0; done < b.N; done += block {
				k := min(block, b.N-done)
				a.run(b, cl, k, p.api, api)
				c.run(b, cl, k, p.console, console)
			}
			b.StopTimer()
			a.report(b, "api-")
			c.report(b, "console-")
			b.ReportMetric(c.rate()/a.rate(), "console/api")
			b.ReportMetric(a.cpuPer()/c.cpuPer(), "cpu-ratio")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// parityClient makes the benchmark's requests.
type parityClient struct {
	base string
	c    *http.Client
}

// get makes one request and returns its body; anything but 200 fails the benchmark.
func (p *parityClient) get(b *testing.B, path string, hdr map[string]string) string {
	body, err := p.fetch(path, hdr)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// fetch makes one request and returns its body, or why it was not a 200.
func (p *parityClient) fetch(path string, hdr map[string]string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, p.base+path, nil)
	if err != nil {
		return "", err
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := p.c.Do(req)
	if err != nil {
		return "", err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %d\n%.2000s", path, resp.StatusCode, body)
	}
	return string(body), nil
}

// paritySide accumulates one side's blocks: their wall time, CPU time, allocations and
// each request's latency.
type paritySide struct {
	wall, cpu time.Duration
	mallocs   uint64
	lat       []time.Duration
}

// run makes k requests of path() with parityClients clients at once.
func (s *paritySide) run(b *testing.B, cl *parityClient, k int, path func() string, hdr map[string]string) {
	var mu sync.Mutex
	var next atomic.Int64
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m0, c0, t0 := ms.Mallocs, parityCPU(), time.Now()
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range parityClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for failed.Load() == nil && next.Add(1) <= int64(k) {
				t := time.Now()
				if _, err := cl.fetch(path(), hdr); err != nil {
					failed.Store(&err)
					return
				}
				d := time.Since(t)
				mu.Lock()
				s.lat = append(s.lat, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	s.wall += time.Since(t0)
	s.cpu += parityCPU() - c0
	runtime.ReadMemStats(&ms)
	s.mallocs += ms.Mallocs - m0
}

func (s *paritySide) rate() float64   { return float64(len(s.lat)) / s.wall.Seconds() }
func (s *paritySide) cpuPer() float64 { return float64(s.cpu.Microseconds()) / float64(len(s.lat)) }

func (s *paritySide) report(b *testing.B, prefix string) {
	if len(s.lat) == 0 {
		return
	}
	slices.Sort(s.lat)
	b.ReportMetric(s.rate(), prefix+"req/s")
	b.ReportMetric(float64(s.lat[len(s.lat)/2].Microseconds())/1000, prefix+"p50-ms")
	b.ReportMetric(float64(s.lat[len(s.lat)*99/100].Microseconds())/1000, prefix+"p99-ms")
	b.ReportMetric(s.cpuPer(), prefix+"cpu-us/req")
	b.ReportMetric(float64(s.mallocs)/float64(len(s.lat)), prefix+"allocs/req")
}

// parityCPU is the process's CPU time (user + system).
func parityCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
