package tasks

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"dataservice/internal/netguard"
)

// TestWebhookClientRefusals: the client refuses loopback without an allow list entry
// (by address and by a name resolving to it), the metadata address, follows no
// redirect, ignores the environment's proxy, and reads a bounded part of the answer;
// no error holds the URL or the secret.
func TestWebhookClientRefusals(t *testing.T) {
	var hits atomic.Int32
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/big":
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte("boom\n" + strings.Repeat("x", 1<<20)))
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	defer recv.Close()
	// A proxy in the environment that would answer 2xx to everything: never used.
	var proxied atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer proxy.Close()
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)

	_, port, _ := net.SplitHostPort(strings.TrimPrefix(recv.URL, "http://"))
	secret := []byte("the-secret-value")
	post := func(allow, target string) (int, error) {
		list, err := netguard.Parse(allow)
		if err != nil {
			t.Fatal(err)
		}
		c := newWebhookClient(func() *netguard.AllowList { return list })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return c.post(ctx, target, "ev-1", secret, []byte(`{}`), time.Now())
	}
	noSecret := func(err error, target string) {
		t.Helper()
		if err != nil && (strings.Contains(err.Error(), string(secret)) || strings.Contains(err.Error(), target)) {
			t.Errorf("error %q holds the secret or the URL", err)
		}
	}

	for _, target := range []string{recv.URL + "/ok", "http://localhost:" + port + "/ok"} {
		status, err := post("", target)
		if status != 0 || err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Fatalf("%s without WEBHOOK_ALLOW_PRIVATE: %d %v, want a loopback refusal", target, status, err)
		}
		noSecret(err, target)
	}
	if status, err := post("", "http://169.254.169.254/latest/meta-data/"); err == nil || !strings.Contains(err.Error(), "metadata") {
		t.Fatalf("metadata address: %d %v, want a refusal", status, err)
	}
	// Listed as a range, 169.254.169.254 is still not reachable through the
	// allow list of 127.0.0.1 alone.
	if _, err := post("127.0.0.1", "http://169.254.169.254/"); err == nil {
		t.Fatal("metadata address allowed by an allow list that does not name it")
	}
	if hits.Load() != 0 || proxied.Load() != 0 {
		t.Fatalf("refused requests reached the receiver (%d) or the proxy (%d)", hits.Load(), proxied.Load())
	}

	status, err := post("127.0.0.1", recv.URL+"/ok")
	if status != http.StatusNoContent || err != nil {
		t.Fatalf("allowed: %d %v, want 204", status, err)
	}
	status, err = post("127.0.0.1", recv.URL+"/redirect")
	if status != http.StatusFound || err == nil || !strings.Contains(err.Error(), "redirects are not followed") {
		t.Fatalf("redirect: %d %v, want 302 as a failure", status, err)
	}
	if got := hits.Load(); got != 2 {
		t.Fatalf("receiver saw %d requests, want 2 (the redirect not followed)", got)
	}
	status, err = post("127.0.0.1", recv.URL+"/big")
	if status != http.StatusInternalServerError || err == nil || err.Error() != "answered 500: boom "+strings.Repeat("x", 195) {
		t.Fatalf("big answer: %d %q", status, err)
	}
	if proxied.Load() != 0 {
		t.Fatalf("the environment's proxy was used %d times", proxied.Load())
	}
	_, err = post("127.0.0.1", "ftp://127.0.0.1/x")
	noSecret(err, "ftp://127.0.0.1/x")
	if err == nil {
		t.Fatal("an ftp URL was accepted")
	}
}

// TestWebhookClientTimeout: an attempt ends at its context's deadline, as a time-out.
func TestWebhookClientTimeout(t *testing.T) {
	release := make(chan struct{})
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		<-release
	}))
	defer recv.Close()
	defer close(release)
	list, _ := netguard.Parse("127.0.0.1")
	c := newWebhookClient(func() *netguard.AllowList { return list })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.post(ctx, recv.URL, "ev", nil, []byte(`{}`), time.Now())
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("slow receiver: %v, want a time-out", err)
	}
}
