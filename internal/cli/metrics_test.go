package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// scrape reads /metrics into "name{labels}" -> value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("scrape: %d %s", resp.StatusCode, b)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// servingProcess runs "serve" in this process until the test ends; it returns the
// API and metrics base URLs.
func servingProcess(t *testing.T, env map[string]string) (api, metricsURL string, stop func() string) {
	t.Helper()
	env["SERVICE_LISTEN"] = "127.0.0.1:0"
	env["SERVICE_METRICS_LISTEN"] = "127.0.0.1:0"
	env["SERVICE_LOG_LEVEL"] = "info"
	ctx, cancel := context.WithCancel(context.Background())
	var stderr testkit.Buffer
	done := make(chan int, 1)
	go func() { done <- Run(ctx, []string{"serve"}, envOf(env), nil, io.Discard, &stderr) }()
	stop = func() string {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("serve exit %d: %s", code, stderr.String())
			}
		case <-time.After(20 * time.Second):
			t.Error("serve did not stop")
		}
		return stderr.String()
	}
	t.Cleanup(func() { cancel() })
	apiRE := regexp.MustCompile(`msg=listening addr=(127\.0\.0\.1:\d+)`)
	metRE := regexp.MustCompile(`msg="metrics listening" addr=(127\.0\.0\.1:\d+)`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("serve not ready: %s", stderr.String())
		}
		log := stderr.String()
		a, m := apiRE.FindStringSubmatch(log), metRE.FindStringSubmatch(log)
		if a != nil && m != nil && strings.Contains(log, "msg=ready") {
			return "http://" + a[1], "http://" + m[1] + "/metrics", stop
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMetricsCountRequestsLoadsPipelinesAndState(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	// A first start creates the database; scheduled backups are then switched on so
	// the serving process takes one at once.
	if code, _, stderr := runCLI(t, env, "migrate"); code != 0 {
		t.Fatalf("migrate: %s", stderr)
	}
	db, err := store.Open(context.Background(), env["SERVICE_DB"], store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetConfig(context.Background(), map[string]string{"BACKUP_INTERVAL_HOURS": "24"}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	api, metricsURL, stop := servingProcess(t, env)
	call := func(method, path, body string, login, password string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, api+path, strings.NewReader(body))
		req.SetBasicAuth(login, password)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// The scheduled backup is taken right after start-up (on files: PostgreSQL's
	// backups are pg_dump's, and scheduled ones are off there).
	deadline := time.Now().Add(20 * time.Second)
	for !testkit.Postgres() && scrape(t, metricsURL)[`dataservice_scheduled_backups_total{result="ok"}`] != 1 {
		if time.Now().After(deadline) {
			t.Fatal("no scheduled backup counted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	before := scrape(t, metricsURL)

	var doc strings.Builder
	doc.WriteString("- {classname: _schema, keyname: vm, ram: {dataformat: int}}\n")
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&doc, "- {classname: vm, keyname: vm%02d, ram: %d, is_enabled: %v}\n", i, i, i%4 != 0)
	}
	doc.WriteString("- {classname: vm, keyname: bad, ram: notanumber}\n")
	if code, body := call("POST", "/api/load/", doc.String(), "admin", "s3cret-admin"); code != 200 {
		t.Fatalf("load: %d %s", code, body)
	}
	for i := 0; i < 3; i++ {
		if code, _ := call("GET", "/api/version/", "", "admin", "wrong"); code != 401 {
			t.Fatalf("wrong password: %d", code)
		}
	}
	code, body := call("POST", "/api/pipelines/bulk_delete_disabled/?schema=vm", "", "admin", "s3cret-admin")
	if code != 202 {
		t.Fatalf("run: %d %s", code, body)
	}
	handle := regexp.MustCompile(`"handle":"([^"]+)"`).FindStringSubmatch(body)[1]
	for !strings.Contains(body, `"status":"succeeded"`) {
		if time.Now().After(deadline) {
			t.Fatalf("task did not finish: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
		_, body = call("GET", "/api/tasks/"+handle+"/", "", "admin", "s3cret-admin")
	}
	after := scrape(t, metricsURL)

	delta := func(key string) float64 { return after[key] - before[key] }
	for key, want := range map[string]float64{
		`dataservice_http_requests_total{method="POST",route="/api/load/",status="200"}`:           1,
		`dataservice_http_requests_total{method="GET",route="/api/version/",status="401"}`:         3,
		`dataservice_http_requests_total{method="POST",route="/api/pipelines/*rest",status="202"}`: 1,
		`dataservice_http_request_duration_seconds_count{method="POST",route="/api/load/"}`:        1,
		`dataservice_http_request_duration_seconds_count{method="GET",route="/api/version/"}`:      3,
		`dataservice_auth_failures_total{credential="basic"}`:                                      3,
		`dataservice_auth_failures_total{credential="apikey"}`:                                     0,
		`dataservice_load_entries_total{outcome="created"}`:                                        21,
		`dataservice_load_entries_total{outcome="errors"}`:                                         1,
		`dataservice_load_entries_total{outcome="updated"}`:                                        0,
		`dataservice_pipeline_instances_processed_total`:                                           20,
		`dataservice_tasks{status="succeeded"}`:                                                    1,
		`dataservice_scheduled_backups_total{result="ok"}`:                                         0,
		`dataservice_scheduled_backups_total{result="failed"}`:                                     0,
		`dataservice_schedule_runs_total{result="submitted"}`:                                      0,
		`dataservice_schedule_runs_total{result="skipped"}`:                                        0,
	} {
		if _, ok := after[key]; !ok {
			t.Errorf("%s missing from the scrape", key)
			continue
		}
		if got := delta(key); got != want {
			t.Errorf("%s moved by %v, want %v", key, got, want)
		}
	}
	polls := after[`dataservice_http_requests_total{method="GET",route="/api/tasks/:handle/",status="200"}`]
	if polls < 1 {
		t.Errorf("task polls not counted: %v", polls)
	}
	for key, want := range map[string]float64{
		`dataservice_task_queue_depth`:                0,
		`dataservice_tasks{status="queued"}`:          0,
		`dataservice_startup_block_ran{block="none"}`: 1,
	} {
		if got, ok := after[key]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", key, got, ok, want)
		}
	}
	for _, key := range []string{"dataservice_startup_duration_seconds", "go_goroutines", "process_resident_memory_bytes"} {
		if after[key] <= 0 {
			t.Errorf("%s = %v, want > 0", key, after[key])
		}
	}
	fileGauges := []string{"dataservice_db_size_bytes", "dataservice_last_backup_timestamp_seconds",
		"dataservice_wal_size_bytes", "dataservice_last_backup_age_seconds", "dataservice_disk_free_bytes"}
	if testkit.Postgres() {
		// The database is the server's: no gauge of this host's files or disk.
		for _, key := range fileGauges {
			if _, ok := after[key]; ok {
				t.Errorf("%s present on PostgreSQL", key)
			}
		}
	}
	for _, key := range fileGauges[:2] {
		if !testkit.Postgres() && after[key] <= 0 {
			t.Errorf("%s = %v, want > 0", key, after[key])
		}
	}
	if _, ok := after["dataservice_wal_size_bytes"]; !ok && !testkit.Postgres() {
		t.Error("dataservice_wal_size_bytes missing")
	}
	if age := after["dataservice_last_backup_age_seconds"]; !testkit.Postgres() && (age < 0 || age > 60) {
		t.Errorf("last backup age %v s", age)
	}
	log := stop()
	if strings.Contains(log, "s3cret-admin") {
		t.Error("the admin password appears in the log")
	}
}

func TestMetricsStartupBlocksOnAFreshDatabase(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	_, metricsURL, stop := servingProcess(t, env)
	m := scrape(t, metricsURL)
	for _, b := range []string{"bootstrap", "4.4.0", "4.9.0"} {
		if m[`dataservice_startup_block_ran{block="`+b+`"}`] != 1 {
			t.Errorf("block %s not reported", b)
		}
	}
	if _, ok := m[`dataservice_startup_block_ran{block="none"}`]; ok {
		t.Error(`block="none" reported although blocks ran`)
	}
	// No backup exists: the backup age is absent rather than a made-up value.
	if _, ok := m["dataservice_last_backup_age_seconds"]; ok {
		t.Error("backup age reported without a backup")
	}
	stop()
}

func TestMetricsOffByDefault(t *testing.T) {
	t.Parallel()
	s, err := loadSettings(envOf(testEnv(t)), &settingFlags{})
	if err != nil {
		t.Fatal(err)
	}
	if s.MetricsListen != "" {
		t.Fatalf("metrics listen %q by default", s.MetricsListen)
	}
	if _, err := loadSettings(envOf(map[string]string{"SERVICE_METRICS_LISTEN": "nonsense"}), &settingFlags{}); err == nil ||
		!strings.Contains(err.Error(), "SERVICE_METRICS_LISTEN") {
		t.Fatalf("bad SERVICE_METRICS_LISTEN: %v", err)
	}
}
