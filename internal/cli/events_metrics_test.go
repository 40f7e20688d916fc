package cli

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestEventMetrics: a serving process counts the events its writes recorded, their
// deliveries (with the latency histogram), retries and dead letters, and shows the
// outbox's pending and dead events.
func TestEventMetrics(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	answers := map[string]int{}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		answers[r.URL.Path]++
		n := answers[r.URL.Path]
		mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "/down") {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError) // the first attempt of /up fails once
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(recv.Close)
	env := testEnv(t)
	keyFile := filepath.Join(t.TempDir(), "events.key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("3c", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env["SERVICE_SECRET_KEY_FILE"] = keyFile
	apiURL, metricsURL, stop := servingProcess(t, env)
	api := newAPIClient(apiURL)
	api.json(t, "POST", "/api/conf/", `{"WEBHOOK_ALLOW_PRIVATE": "127.0.0.1", "WEBHOOK_MAX_ATTEMPTS": "2"}`, 200, nil)
	var res struct {
		Errors int `json:"errors"`
	}
	api.json(t, "POST", "/api/load/", fmt.Sprintf(`
- {classname: _schema, keyname: host, note: {dataformat: string}}
- {classname: _eventrule, keyname: up, schemas: [host], webhook_url: %q, secret: s1}
- {classname: _eventrule, keyname: down, schemas: [host], webhook_url: %q, secret: s2}
`, recv.URL+"/up", recv.URL+"/down"), 200, &res)
	if res.Errors != 0 {
		t.Fatalf("rules: %d errors", res.Errors)
	}
	api.json(t, "POST", "/api/load/", "- {classname: host, keyname: a}\n", 200, nil)
	// up: fails once, then is delivered; down: fails twice, then is dead. The retry
	// waits 2.5 to 5 s (the first back-off).
	deadline := time.Now().Add(2 * time.Minute)
	var m map[string]float64
	for {
		m = scrape(t, metricsURL)
		if m["dataservice_events_delivered_total"] == 1 && m["dataservice_events_dead_total"] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics after 2 minutes: delivered %v dead %v", m["dataservice_events_delivered_total"],
				m["dataservice_events_dead_total"])
		}
		time.Sleep(50 * time.Millisecond)
	}
	// One scrape more: within a scrape the outbox gauge's query may run before the
	// last outcome commits and its counter after (a full run saw pending 1 beside both
	// counters at 1); every outcome is in by now.
	m = scrape(t, metricsURL)
	for name, want := range map[string]float64{
		"dataservice_events_recorded_total":        2,
		"dataservice_events_retried_total":         2,
		"dataservice_event_delivery_seconds_count": 1,
		`dataservice_events{status="pending"}`:     0,
		`dataservice_events{status="dead"}`:        1,
	} {
		if got := m[name]; got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	stop()
}
