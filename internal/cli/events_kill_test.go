package cli

import (
	"encoding/json"
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

// killReceiver accepts its first accept requests (204), then holds every further one
// until it is opened, after which it accepts everything. It records each request's
// event id, in order, and whether it was accepted.
type killReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	ids    []string
	ok     []bool
	held   int
	accept int
	open   chan struct{}
	once   sync.Once
}

func newKillReceiver(t *testing.T, accept int) *killReceiver {
	rc := &killReceiver{accept: accept, open: make(chan struct{})}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Dataservice-Event")
		rc.mu.Lock()
		n := len(rc.ids)
		rc.ids, rc.ok = append(rc.ids, id), append(rc.ok, false)
		hold := n >= rc.accept && !rc.isOpen()
		if hold {
			rc.held++
		}
		rc.mu.Unlock()
		if hold {
			// The sender is killed meanwhile: nobody reads this answer.
			<-rc.open
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		rc.mu.Lock()
		rc.ok[n] = true
		rc.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	t.Cleanup(rc.release) // runs first: held handlers end before Close waits for them
	return rc
}

func (rc *killReceiver) isOpen() bool {
	select {
	case <-rc.open:
		return true
	default:
		return false
	}
}

func (rc *killReceiver) release() { rc.once.Do(func() { close(rc.open) }) }

// snapshot returns the ids received so far and which were accepted, and how many are held.
func (rc *killReceiver) snapshot() (ids []string, ok []bool, held int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.ids...), append([]bool(nil), rc.ok...), rc.held
}

// TestWebhookDeliveryAcrossSIGKILL: a serving process is SIGKILLed while events it
// recorded are partly delivered (some accepted and recorded, some on the wire, the
// rest pending); after a restart every event is delivered, none is lost, and no event
// whose 2xx was recorded before the kill is sent again.
func TestWebhookDeliveryAcrossSIGKILL(t *testing.T) {
	t.Parallel()
	const n, accept = 12, 3
	rc := newKillReceiver(t, accept)
	env := reliabilityEnv(t)
	env["SERVICE_ACCESS_LOG"] = "off"
	// Both processes seal and open the rule's secret with one key file (PostgreSQL
	// has no default one, and none is made there).
	keyFile := filepath.Join(t.TempDir(), "events.key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("5a", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env["SERVICE_SECRET_KEY_FILE"] = keyFile
	srv := startChild(t, env, "serve")
	api := newAPIClient(srv.baseURL())
	api.json(t, "POST", "/api/conf/", `{"WEBHOOK_ALLOW_PRIVATE": "127.0.0.1", "WEBHOOK_TIMEOUT_SECONDS": "2"}`, 200, nil)
	load := func(doc string) {
		t.Helper()
		var res struct {
			Errors        int             `json:"errors"`
			ErrorMessages json.RawMessage `json:"error_messages"`
		}
		api.json(t, "POST", "/api/load/", doc, 200, &res)
		if res.Errors != 0 {
			t.Fatalf("load: %s", res.ErrorMessages)
		}
	}
	load(fmt.Sprintf(`
- {classname: _schema, keyname: host, note: {dataformat: string}}
- {classname: _eventrule, keyname: hook, schemas: [host], webhook_url: %q, secret: kill-test-secret}
`, rc.URL+"/hook"))
	var doc strings.Builder
	for i := range n {
		fmt.Fprintf(&doc, "- {classname: host, keyname: h%02d, note: n}\n", i)
	}
	load(doc.String())

	// Killed once the receiver accepted its first events and holds at least one on
	// the wire: the accepted ones are recorded or in the crash window, the held ones
	// leased, the others pending.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ids, _, held := rc.snapshot()
		if held > 0 && len(ids) > accept {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("receiver: %d requests, %d held, after 2 minutes; server output:\n%s", len(ids), held, tail(srv.out.String()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.kill()

	r := openReader(t, env["SERVICE_DB"])
	recorded := map[string]bool{}
	rows, err := r.Query("SELECT id FROM events WHERE status = 'delivered'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		recorded[id] = true
	}
	rows.Close()
	if got := queryInt(t, r.Reader, "SELECT count(*) FROM events"); got != n {
		t.Fatalf("%d events recorded for %d committed writes", got, n)
	}
	if len(recorded) == n {
		t.Fatalf("every event was delivered before the kill: the test killed nothing in between")
	}
	r.Close()
	before, _, _ := rc.snapshot()
	rc.release()

	srv = startChild(t, env, "serve")
	srv.baseURL()
	deadline = time.Now().Add(3 * time.Minute)
	r = openReader(t, env["SERVICE_DB"])
	for queryInt(t, r.Reader, "SELECT count(*) FROM events WHERE status = 'delivered'") != n {
		if time.Now().After(deadline) {
			t.Fatalf("not every event delivered 3 minutes after the restart; server output:\n%s", tail(srv.out.String()))
		}
		time.Sleep(50 * time.Millisecond)
	}
	ids, ok, _ := rc.snapshot()
	accepted := map[string]int{}
	for i, id := range ids {
		if ok[i] {
			accepted[id]++
		}
	}
	for i := len(before); i < len(ids); i++ {
		if recorded[ids[i]] {
			t.Errorf("event %s, recorded delivered before the kill, was sent again after the restart", ids[i])
		}
	}
	rows, err = r.Query("SELECT id FROM events")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		if accepted[id] == 0 {
			t.Errorf("event %s is recorded delivered but the receiver never accepted it", id)
		}
	}
	srv.stop()
}
