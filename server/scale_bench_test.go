package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"dataservice/bootstrap"
	"dataservice/builtin"
	"dataservice/internal/testkit"
	"dataservice/server"
	"dataservice/store"
	"dataservice/store/codec"
	"dataservice/store/model"
)

// scaleN is the number of instances of the scale benchmarks: BENCH_N, default 100000.
func scaleN() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_N")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

// scaleData is the data of instance i: about 200 bytes of JSON, six string fields.
func scaleData(i int) string {
	return fmt.Sprintf(`{"f1":"Host-%07d-ABCDEF","f2":"value-%07d","f3":"three-%07d","f4":"a-b-c-d-%07d","f5":"copy-me-%07d-xyz","f6":"old-value-%07d-tail"}`,
		i, i, i, i, i, i)
}

// scaleDB opens a bootstrapped database holding n "item" instances, written by plain
// INSERTs in transactions of 50,000 (the triggers keep the counts and list the rows
// for the search index, whose catch-up then indexes them all), and its address (a file, or on the PostgreSQL pass a
// database of the test cluster).
func scaleDB(b *testing.B, n int) (*store.DB, string) {
	b.Helper()
	ctx := context.Background()
	addr := testkit.NewAddress(b, "scale.db")
	db, err := testkit.OpenStore(b, addr, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	if err := bootstrap.Run(ctx, testkit.Migrator(b, db), bootstrap.Options{Version: "4.9.0", VersionDate: "2026-11-22",
		Init: builtin.Init(), AdminPassword: adminPassword}); err != nil {
		b.Fatal(err)
	}
	entries, err := codec.ParseDocument("schema.yml", []byte(`
- {classname: _schema, keyname: item, f1: {dataformat: string}, f2: {dataformat: string}, f3: {dataformat: string},
   f4: {dataformat: string}, f5: {dataformat: string}, f6: {dataformat: string}}`))
	if err != nil {
		b.Fatal(err)
	}
	if res, err := db.Load(ctx, entries, store.LoadOptions{System: true}); err != nil || res.Errors != 0 {
		b.Fatalf("schema: %v %v", err, res)
	}
	start := time.Now()
	next := testkit.NextInstanceID(b, db)
	for from := 0; from < n; from += 50_000 {
		err = testkit.Migrator(b, db).Migrate(ctx, func(m *store.Migration) error {
			const insert = `INSERT INTO instances(id, classname, keyname, displayname, is_enabled, data,
				created_at, updated_at) VALUES(?, 'item', ?, '', 1, ?, '2026-11-22T10:00:00Z', '2026-11-22T10:00:00Z')`
			for i := from; i < min(from+50_000, n); i++ {
				if err := m.Exec(ctx, insert, next+int64(i), fmt.Sprintf("item-%07d", i), scaleData(i)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.CatchUpSearch(ctx); err != nil {
		b.Fatal(err)
	}
	b.Logf("set-up: %d instances in %v", n, time.Since(start).Round(time.Millisecond))
	return db, addr
}

// latencies records request times and reports their median and 99th percentile.
type latencies []time.Duration

func (l latencies) report(b *testing.B, cpu time.Duration) {
	if len(l) == 0 {
		return
	}
	// Process CPU time (server and client, user + system) per request: a machine shared
	// with other work slows the wall clock much more than it changes this.
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(l)), "cpu-us/req")
	slices.Sort(l)
	b.ReportMetric(float64(l[len(l)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(l[len(l)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(len(l))/b.Elapsed().Seconds(), "req/s")
	b.ReportMetric(0, "ns/op")
}

// reportAs reports the median, the 99th percentile and the rate (requests per second
// of the time spent in them) of the requests l, their names prefixed.
func (l latencies) reportAs(b *testing.B, prefix string) {
	var sum time.Duration
	for _, d := range l {
		sum += d
	}
	slices.Sort(l)
	b.ReportMetric(float64(l[len(l)/2].Microseconds())/1000, prefix+"p50-ms")
	b.ReportMetric(float64(l[len(l)*99/100].Microseconds())/1000, prefix+"p99-ms")
	b.ReportMetric(float64(len(l))/sum.Seconds(), prefix+"req/s")
}

// BenchmarkScale measures, at BENCH_N instances, the product's requests through the
// real HTTP stack (a cached API key, one client) and their floors: net/http and one
// prepared SELECT of the same rows, encoded as JSON. Each request is timed alone;
// p50/p99 are of b.N requests.
//   - page: GET ?size=50&page=P (P random in 1..20) and, alternately, GET ?after=<random id>&size=50
//   - search: GET ?search=<a 7-digit number of a random instance>&size=50
//   - one: GET /api/instances/item/<key>/; one/interleaved alternates the product's
//     and the floor's (product-* and floor-* metrics of one run)
//   - search-behind-K (SQLite): the search while K rows (at most BENCH_N) wait for the
//     search index, listed as a write lists them and staged as the serving catch-up
//     stages them: each search reads their staged copies beside the index's answer;
//     search-behind-K-unstaged: listed only (each search reads the K instances)
func BenchmarkScale(b *testing.B) {
	n := scaleN()
	db, addr := scaleDB(b, n)
	h := server.New(server.Options{DB: db, Version: "4.9.0", VersionDate: "2026-11-22"})
	srv := httptest.NewServer(h)
	defer srv.Close()
	secret := makeBenchKey(b, db)
	client := srv.Client()
	get := func(b *testing.B, url string) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("%s: %d %s", url, resp.StatusCode, body)
		}
	}
	floor := httptest.NewServer(floorHandler(b, addr))
	defer floor.Close()
	rng := rand.New(rand.NewPCG(16, 16))
	urls := map[string]func(i int) string{
		"page": func(i int) string {
			if i%2 == 0 {
				return fmt.Sprintf("/api/instances/item/?size=50&page=%d", 1+rng.IntN(20))
			}
			return fmt.Sprintf("/api/instances/item/?size=50&after=%d", rng.IntN(n))
		},
		"search": func(int) string { return fmt.Sprintf("/api/instances/item/?size=50&search=%07d", rng.IntN(n)) },
		"one":    func(int) string { return fmt.Sprintf("/api/instances/item/item-%07d/", rng.IntN(n)) },
	}
	for _, name := range []string{"page", "search", "one"} {
		for _, which := range []string{"product", "floor"} {
			b.Run(fmt.Sprintf("n=%d/%s/%s", n, name, which), func(b *testing.B) {
				base := srv.URL
				if which == "floor" {
					base = floor.URL
				}
				get(b, base+urls[name](0)) // warm: the key's verification is cached
				reqs := b.N
				if v, err := strconv.Atoi(os.Getenv("BENCH_SEARCH_REQS")); err == nil && v > 0 && name == "search" {
					reqs = min(b.N, v) // fewer searches (they used to read every row)
				}
				l := make(latencies, 0, reqs)
				c0 := cpuTime()
				b.ResetTimer()
				for i := 0; i < reqs; i++ {
					u := base + urls[name](i)
					t0 := time.Now()
					get(b, u)
					l = append(l, time.Since(t0))
				}
				b.StopTimer()
				l.report(b, cpuTime()-c0)
			})
		}
	}
	if db.IsFile() {
		for _, behind := range []int{10_000, 100_000} {
			for _, state := range []string{"", "-unstaged"} {
				b.Run(fmt.Sprintf("n=%d/search-behind-%d%s/product", n, behind, state), func(b *testing.B) {
					searchBehind(b, db, n, behind, state == "", func(i int) { get(b, srv.URL+urls["search"](i)) })
				})
			}
		}
	}
	// one/interleaved alternates the product's and the floor's one-instance requests, so
	// both meet the same moments of a shared machine: run one after the other, their
	// tails measure the machine's load at different times as much as the requests.
	b.Run(fmt.Sprintf("n=%d/one/interleaved", n), func(b *testing.B) {
		get(b, srv.URL+urls["one"](0))
		get(b, floor.URL+urls["one"](0))
		prod := make(latencies, 0, b.N)
		flo := make(latencies, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			get(b, srv.URL+urls["one"](i))
			t1 := time.Now()
			get(b, floor.URL+urls["one"](i))
			prod, flo = append(prod, t1.Sub(t0)), append(flo, time.Since(t1))
		}
		b.StopTimer()
		prod.reportAs(b, "product-")
		flo.reportAs(b, "floor-")
		b.ReportMetric(0, "ns/op")
	})
}

// floorHandler answers the same URLs with net/http and one prepared SELECT of the
// rows the product returns with the same SQL (no authentication, no count), encoded
// as JSON, on a read-only pool of its own on the database at addr (scaleFloor: the
// pass's engine, its driver and statements).
func floorHandler(b *testing.B, addr string) http.Handler {
	ctx := context.Background()
	f := scaleFloor(addr)
	// The store hands out no raw pool: the floor prepares on a read-only pool of its
	// own on the same database, as the store's read pool is.
	pool, err := sql.Open(f.driver, f.dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pool.Close() })
	prep := func(q string) *sqlStmt {
		st, err := pool.PrepareContext(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		return &sqlStmt{st}
	}
	page := prep(f.page)
	var dirty *sqlStmt
	if f.dirty != "" {
		dirty = prep(f.dirty)
	}
	search := prep(f.search)
	one := prep(f.one)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var out []map[string]any
		var err error
		switch {
		case q.Get("search") != "":
			v := q.Get("search") // digits only: nothing to escape or quote
			pat := "%" + v + "%"
			var backlog int
			if dirty != nil {
				err = dirty.QueryRowContext(r.Context(), store.SearchBacklogLimit+1).Scan(&backlog)
			}
			if err == nil {
				out, err = search.rows(r.Context(), f.match(v), "item", pat, pat, pat, 51)
			}
		case q.Get("after") != "":
			after, _ := strconv.Atoi(q.Get("after"))
			out, err = page.rows(r.Context(), "item", after, 50, 0)
		case q.Get("page") != "":
			p, _ := strconv.Atoi(q.Get("page"))
			out, err = page.rows(r.Context(), "item", 0, 50, (p-1)*50)
		default:
			key := filepath.Base(r.URL.Path)
			out, err = one.rows(r.Context(), "item", key)
		}
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	})
}

// makeBenchKey creates an API key with the data permissions and returns its bearer token.
func makeBenchKey(b *testing.B, db *store.DB) string {
	doc, _ := json.Marshal([]any{map[string]any{"classname": "_apikey", "keyname": "bench",
		"secret": sha256Hash([]byte("salt-bench"), "s3cret-bench"), "permissions": []string{"p_data_access", "p_data_read"}}})
	entries, err := codec.ParseDocument("key.json", doc)
	if err != nil {
		b.Fatal(err)
	}
	if res, err := db.Load(context.Background(), entries, store.LoadOptions{System: true}); err != nil || res.Errors != 0 {
		b.Fatalf("key: %v %+v", err, res)
	}
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	bearer("bench", "s3cret-bench")(req)
	return req.Header.Get("Authorization")[len("Bearer "):]
}

// sqlStmt runs a prepared query and returns its rows as JSON-ready maps, the data
// decoded as the store decodes it.
type sqlStmt struct{ *sql.Stmt }

func (s *sqlStmt) rows(ctx context.Context, args ...any) ([]map[string]any, error) {
	rows, err := s.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []map[string]any
	for rows.Next() {
		var id int64
		var cls, key, disp, raw, cr, up string
		var en bool
		if err := rows.Scan(&id, &cls, &key, &disp, &en, &raw, &cr, &up); err != nil {
			return nil, err
		}
		data, err := model.DecodeData(raw)
		if err != nil {
			return nil, err
		}
		m := map[string]any{"classname": cls, "keyname": key, "displayname": disp, "is_enabled": en}
		for k, v := range data {
			m[k] = v
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// cpuTime is the CPU time (user + system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// searchBehind times search (at most 200 requests, or BENCH_SEARCH_REQS) while behind
// rows (at most n) wait for the search index: the API key's row and the first rows of
// a spread of ids, as
// writes list them, staged as the serving catch-up stages a backlog above one batch
// (staged) or just listed (as a CLI load leaves them until a server starts). The index
// still holds them (it is exact for them), so emptying the list afterwards leaves the
// database as it was.
func searchBehind(b *testing.B, db *store.DB, n, behind int, staged bool, search func(i int)) {
	// The API key's row is listed too: a request's once-a-minute last_used write lists
	// it, and would otherwise take the list one row past the count measured (past
	// SearchBacklogLimit at 100,000).
	testkit.Exec(b, db, `INSERT INTO instances_search_dirty(id) SELECT id FROM instances WHERE classname = '_apikey'
		ON CONFLICT(id) DO NOTHING`)
	var listed int
	if err := db.Reader().QueryRowContext(context.Background(), "SELECT count(*) FROM instances_search_dirty").Scan(&listed); err != nil {
		b.Fatal(err)
	}
	testkit.Exec(b, db, fmt.Sprintf(`INSERT INTO instances_search_dirty(id)
		SELECT id FROM instances WHERE classname = 'item' ORDER BY (id * 7919) %% %d, id LIMIT %d`, n, behind-listed))
	defer testkit.Exec(b, db, "DELETE FROM instances_search_dirty")
	defer testkit.Exec(b, db, "DELETE FROM instances_search_staged")
	if staged {
		if got, err := db.StageSearch(context.Background()); err != nil || got < int64(min(behind, n)) {
			b.Fatalf("staged %d rows (%v), want at least %d", got, err, min(behind, n))
		}
	}
	search(0)
	reqs := min(b.N, 200)
	if v, err := strconv.Atoi(os.Getenv("BENCH_SEARCH_REQS")); err == nil && v > 0 {
		reqs = min(b.N, v)
	}
	l := make(latencies, 0, reqs)
	c0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < reqs; i++ {
		t0 := time.Now()
		search(i)
		l = append(l, time.Since(t0))
	}
	b.StopTimer()
	l.report(b, cpuTime()-c0)
}
