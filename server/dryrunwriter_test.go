package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// TestDryRunLoadDoesNotHoldWriter: small real writes made while a dry-run load of
// 50,000 entries runs each complete in less than a second, and the dry run reports
// what the real load of the same entries reports on a copy of the file (its later
// entries update and reference instances its earlier entries create).
func TestDryRunLoadDoesNotHoldWriter(t *testing.T) {
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
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	if err := e.db.Backup(context.Background(), copyPath); err != nil {
		t.Fatal(err)
	}

	type outcome struct {
		res loadResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		var o outcome
		defer func() { done <- o }()
		req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/api/load/?dryrun=1", bytes.NewReader(body))
		if err != nil {
			o.err = err
			return
		}
		req.Header.Set("Content-Type", "application/json")
		adminCred(req)
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			o.err = err
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d: %s", resp.StatusCode, b)
		}
		if err == nil {
			err = json.Unmarshal(b, &o.res)
		}
		o.err = err
	}()
	var worst time.Duration
	writes := 0
	deadline := time.After(3 * time.Minute)
	var dry outcome
	for running := true; running; {
		select {
		case dry = <-done:
			running = false
		case <-deadline:
			t.Fatal("the dry-run load did not finish within 3 minutes")
		default:
			t0 := time.Now()
			r := e.post("/api/load/", adminCred, []byte(fmt.Sprintf(`[{"classname": "item", "keyname": "probe%d", "n": 1}]`, writes)))
			if r.status != http.StatusOK {
				t.Fatalf("small write: %d %s", r.status, r.body)
			}
			worst = max(worst, time.Since(t0))
			writes++
			time.Sleep(20 * time.Millisecond)
		}
	}
	if dry.err != nil {
		t.Fatalf("dry-run load: %v", dry.err)
	}
	t.Logf("%d small writes during the dry run, worst %v", writes, worst)
	if writes < 2 {
		t.Fatalf("only %d small write(s) ran during the dry run", writes)
	}
	if worst >= time.Second {
		t.Fatalf("a small write took %v during the dry-run load", worst)
	}
	if !dry.res.DryRun || e.queryString("SELECT count(*) FROM instances WHERE classname = 'item' AND keyname LIKE 'item%'") != "0" {
		t.Fatalf("the dry run wrote: %+v", dry.res)
	}

	copyDB := testkit.Open(t, copyPath, testkit.Options{})
	list := testkit.Parse(t, string(body))
	real, err := copyDB.Load(context.Background(), list, store.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("created=%d updated=%d unchanged=%d errors=%d", dry.res.Created, dry.res.Updated, dry.res.Unchanged, dry.res.Errors)
	want := fmt.Sprintf("created=%d updated=%d unchanged=%d errors=%d", real.Created, real.Updated, real.Unchanged, real.Errors)
	if got != want || real.Created != half || real.Updated != half/2 || real.Unchanged != half/2 {
		t.Fatalf("dry run: %s\nreal run on a copy: %s (want created=%d updated=%d unchanged=%d)", got, want, half, half/2, half/2)
	}
}
