package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// TestDryRunLoadDoesNotHoldWriter: a dry-run load of 50,000 entries over HTTP, held
// mid-run by a test hook, lets a small real load over HTTP commit (a dry run takes no
// writer), writes nothing, and reports what the real load of the same entries reports
// afterwards on the same database (its later entries update and reference instances its earlier
// entries create). Nothing here depends on the machine's speed.
func TestDryRunLoadDoesNotHoldWriter(t *testing.T) {
	t.Parallel()
	testkit.Slow(t)
	e := newEnv(t, envOptions{NoRunner: true})
	e.load(`[{classname: _schema, keyname: item, n: {dataformat: int}, prev: {dataformat: schema, dataformat_ext: item}}]`)
	const half = 25000
	entries := make([]map[string]any, 0, 2*half)
	for i := range half {
		m := map[string]any{"classname": "item", "keyname": fmt.Sprintf("item%d", i), "n": i}
		if i > 0 {
			m["prev"] = fmt.Sprintf("item%d", i-1)
		}
		entries = append(entries, m)
	}
	for i := range half {
		n := i
		if i%2 == 0 {
			n = i + 1 // half of the updates change the value created above
		}
		entries = append(entries, map[string]any{"classname": "item", "keyname": fmt.Sprintf("item%d", i),
			"_action": "update", "n": n})
	}
	body, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}

	// Held by the hook at every 10,000th entry, the dry run waits for a small real load
	// over HTTP to finish: were the writer held, that load would wait for it and the
	// client would give up after 30 s.
	var mu sync.Mutex
	var probes []string
	client := &http.Client{Timeout: 30 * time.Second}
	e.db.SetDryRunHook(func(n int) {
		if n%10000 != 0 {
			return
		}
		body := fmt.Sprintf(`[{"classname": "item", "keyname": "probe%d", "n": 1}]`, n)
		req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/api/load/", strings.NewReader(body))
		outcome := ""
		if err == nil {
			req.Header.Set("Content-Type", "application/json")
			adminCred(req)
			var resp *http.Response
			if resp, err = client.Do(req); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				outcome = fmt.Sprintf("%d %s", resp.StatusCode, b)
			}
		}
		if err != nil {
			outcome = err.Error()
		}
		mu.Lock()
		probes = append(probes, fmt.Sprintf("entry %d: %s", n, outcome))
		mu.Unlock()
	})
	defer e.db.SetDryRunHook(nil)
	r := e.post("/api/load/?dryrun=1", adminCred, body)
	if r.status != http.StatusOK {
		t.Fatalf("dry-run load: %d %s", r.status, r.body)
	}
	var dry loadResult
	if err := json.Unmarshal(r.body, &dry); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(probes) != 5 {
		t.Fatalf("the hook held the dry run %d times, want 5: %q", len(probes), probes)
	}
	for _, p := range probes {
		if !strings.Contains(p, ": 200 ") || !strings.Contains(p, `"created":1`) {
			t.Errorf("a small real load while the dry run was held at %s", p)
		}
	}
	if n := e.queryString("SELECT count(*) FROM instances WHERE classname = 'item' AND keyname LIKE 'probe%'"); n != "5" {
		t.Errorf("%s small real loads committed, want 5", n)
	}
	if !dry.DryRun || e.queryString("SELECT count(*) FROM instances WHERE classname = 'item' AND keyname LIKE 'item%'") != "0" {
		t.Fatalf("the dry run wrote: %+v", dry)
	}

	// The real load of the same entries, now, on the same database: the probes it
	// holds since are other keys.
	list := testkit.Parse(t, string(body))
	real, err := e.db.Load(context.Background(), list, store.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("created=%d updated=%d unchanged=%d errors=%d", dry.Created, dry.Updated, dry.Unchanged, dry.Errors)
	want := fmt.Sprintf("created=%d updated=%d unchanged=%d errors=%d", real.Created, real.Updated, real.Unchanged, real.Errors)
	if got != want || real.Created != half || real.Updated != half/2 || real.Unchanged != half/2 {
		t.Fatalf("dry run: %s\nreal run: %s (want created=%d updated=%d unchanged=%d)", got, want, half, half/2, half/2)
	}
}
