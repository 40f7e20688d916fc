package server_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// An HTTP/1.0 request may come without a Host header: task_url is still absolute,
// built from the address the request arrived on.
func TestPipelineRunTaskURLWithoutHost(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t, envOptions{NoRunner: true})
	probe, _ := http.NewRequest(http.MethodPost, "/", nil)
	e.run(probe)
	addr := strings.TrimPrefix(e.srv.URL, "http://")
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	req := "POST /api/pipelines/upper/?schema=server HTTP/1.0\r\n" +
		"Authorization: " + probe.Header.Get("Authorization") + "\r\n" +
		"Content-Length: 0\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status = %d, want 202 (body %s)", resp.StatusCode, body)
	}
	var rr runReply
	if err := json.Unmarshal(body, &rr); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if got, want := rr.TaskURL, "http://"+addr+"/api/tasks/"+rr.Handle+"/"; got != want {
		t.Fatalf("task_url = %q, want %q", got, want)
	}
}
