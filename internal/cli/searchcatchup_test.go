package cli

import (
	"context"
	"net/url"
	"regexp"
	"testing"
	"time"

	"dataservice/internal/testkit"
)

// metricsRE finds the metrics listener's address in a serving process's log.
var metricsRE = regexp.MustCompile(`msg="metrics listening" addr=(127\.0\.0\.1:\d+)`)

// TestSearchIndexCatchUpAfterKill: a server catching up a backlog of rows written
// without indexing is killed (SIGKILL) midway; the file then holds an index exact for
// every row not listed, and the rows still listed. Searches by the API are exact
// while the index lags. The next server indexes exactly the rows still listed (its
// catch-up counter says so: no rebuild from scratch), and leaves an index equal to
// one rebuilt from the instances.
func TestSearchIndexCatchUpAfterKill(t *testing.T) {
	testkit.SQLiteOnly(t, "the catch-up is SQLite's: PostgreSQL's engine maintains its index in every write")
	t.Parallel()
	const rows = 12000
	env := reliabilityEnv(t)
	path := env["SERVICE_DB"]
	if code, _, stderr := runCLI(t, quiet(env), "migrate"); code != 0 {
		t.Fatalf("migrate: exit %d: %s", code, stderr)
	}
	loadDoc(t, env, "- {classname: _schema, keyname: sbox, note: {dataformat: string}}\n")
	db := openStore(t, path)
	if _, err := db.CatchUpSearch(context.Background()); err != nil {
		t.Fatal(err)
	}
	insertInstances(t, db, "sbox", "s", rows, func(i int) map[string]any { return map[string]any{"note": "needle"} })
	db.Close()
	r := openReader(t, path)
	defer r.Close()
	listed := func() int64 { return queryInt(t, r, "SELECT count(*) FROM instances_search_dirty") }
	if n := listed(); n != rows {
		t.Fatalf("%d rows listed after the insert, want %d", n, rows)
	}

	// Each indexed row takes 100 µs longer: a batch of 2,000 holds the writer 0.2 s,
	// the whole backlog over a second.
	slow := map[string]string{"DATASERVICE_TEST_HOLD": (100 * time.Microsecond).String()}
	for k, v := range env {
		slow[k] = v
	}
	c := startChild(t, slow, "serve")
	api := newAPIClient(c.baseURL())
	// Exact while the index lags: every row matches, a word no row holds matches none.
	var page struct {
		Count int `json:"count"`
	}
	api.json(t, "GET", "/api/instances/sbox/?size=1&count=exact&search="+url.QueryEscape("needle"), "", 200, &page)
	if page.Count != rows {
		t.Fatalf("search while the index lags: count %d, want %d", page.Count, rows)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for n := listed(); n == rows || n > rows-2*2000; n = listed() {
		if time.Now().After(deadline) || c.exited() {
			t.Fatalf("the catch-up never indexed two batches (%d listed); output:\n%s", n, tail(c.out.String()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.kill()
	left := testkit.CheckSearchIndex(t, path, "after the kill")
	if left == 0 || left >= rows {
		t.Fatalf("after the kill %d rows listed: want part of the backlog left", left)
	}
	t.Logf("killed with %d of %d rows left to index", left, rows)

	// A new server indexes what is left, and only that.
	fast := map[string]string{"SERVICE_METRICS_LISTEN": "127.0.0.1:0"}
	for k, v := range env {
		fast[k] = v
	}
	c = startChild(t, fast, "serve")
	api = newAPIClient(c.baseURL())
	api.json(t, "GET", "/api/instances/sbox/?size=1&count=exact&search=haystack", "", 200, &page)
	if page.Count != 0 {
		t.Fatalf("search of a word no row holds: count %d", page.Count)
	}
	m := metricsRE.FindStringSubmatch(c.out.String())
	if m == nil {
		t.Fatalf("no metrics address in the log:\n%s", tail(c.out.String()))
	}
	metricsURL := "http://" + m[1] + "/metrics"
	// A deadline of its own: the check above takes a while under the race detector.
	deadline = time.Now().Add(2 * time.Minute)
	for listed() > 0 {
		if time.Now().After(deadline) || c.exited() {
			t.Fatalf("the catch-up after the restart left %d rows; output:\n%s", listed(), tail(c.out.String()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := scrape(t, metricsURL)
	if got["dataservice_search_index_caught_up_rows_total"] != float64(left) || got["dataservice_search_index_behind_rows"] != 0 ||
		got["dataservice_search_index_behind_seconds"] != 0 {
		t.Fatalf("metrics after the catch-up: indexed %v (want %d), behind %v rows, %v s", got["dataservice_search_index_caught_up_rows_total"],
			left, got["dataservice_search_index_behind_rows"], got["dataservice_search_index_behind_seconds"])
	}
	c.stop()
	testkit.CheckSearchIndexCaughtUp(t, path, "after the restart's catch-up")
}
