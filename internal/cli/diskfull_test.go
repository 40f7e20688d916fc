package cli

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"dataservice/internal/testkit"
)

// TestDiskFullIsAnOperatorsMessage fills a small filesystem made for the test under a
// serving process: writes answer 507 naming the full disk and the file (not 500
// "internal error"), the episode is logged at error level once, /readyz says so, the
// free-space gauge and the low-space warning show it, a CLI load says how many entries
// it committed and that loading the same file again completes it; once space is freed
// writes work again, the reload completes the load and integrity_check is ok.
func TestDiskFullIsAnOperatorsMessage(t *testing.T) {
	testkit.SQLiteOnly(t, "fills a small tmpfs under an SQLite file; the PostgreSQL form is TestServerDiskFullIsAnOperatorsMessage")
	t.Parallel()
	if testing.Short() {
		t.Skip("slow: fills a 24 MB filesystem")
	}
	dir := testkit.SmallFS(t, 24<<20)
	env := reliabilityEnv(t)
	env["SERVICE_DB"] = filepath.Join(dir, "full.db")
	env["SERVICE_METRICS_LISTEN"] = "127.0.0.1:0"
	env["SERVICE_ACCESS_LOG"] = "off"
	// SERVICE_DISK_WARN is left at its default, 1GiB: more than this filesystem holds.
	srv := startChild(t, env, "serve")
	api := newAPIClient(srv.baseURL())
	metricsURL := "http://" + regexp.MustCompile(`msg="metrics listening" addr=(127\.0\.0\.1:\d+)`).
		FindStringSubmatch(srv.out.String())[1] + "/metrics"
	api.json(t, "POST", "/api/load/", `[{classname: _schema, keyname: box, note: {dataformat: string}}]`, 200, nil)

	if n := strings.Count(srv.out.String(), `msg="disk space low`); n != 1 {
		t.Fatalf("%d low-space warnings at start, want 1 (free space below the 1GiB default):\n%s", n, tail(srv.out.String()))
	}

	// The WAL is emptied first, so that no write finds room in it once the disk is full.
	w, err := sql.Open("sqlite", "file:"+env["SERVICE_DB"]+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var busy, logFrames, done int
	if err := w.QueryRow("PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logFrames, &done); err != nil || busy != 0 {
		t.Fatalf("checkpoint: busy %d, %v", busy, err)
	}
	ballast := filepath.Join(dir, "ballast")
	testkit.FillDisk(t, ballast, 0)

	// The API: three loads in a row, each refused with 507, the episode logged once.
	body := boxes("api", 0, 2000)
	for i := range 3 {
		code, b, err := api.do("POST", "/api/load/", "application/yaml", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var reply struct{ Error string }
		json.Unmarshal(b, &reply)
		if code != http.StatusInsufficientStorage || !strings.Contains(reply.Error, "disk full") ||
			!strings.Contains(reply.Error, env["SERVICE_DB"]) ||
			!strings.Contains(reply.Error, "0 entries of this load were committed before it: sending the same body again completes the load") {
			t.Fatalf("load %d on a full disk: %d %s, want 507 naming the full disk and %s", i, code, b, env["SERVICE_DB"])
		}
	}
	if n := strings.Count(srv.out.String(), `level=ERROR msg="disk full`); n != 1 {
		t.Fatalf("%d error lines for one disk-full episode of 3 requests, want 1:\n%s", n, tail(srv.out.String()))
	}
	if strings.Contains(srv.out.String(), "internal error") || strings.Contains(srv.out.String(), `msg="request failed"`) {
		t.Fatalf("a full disk logged as an internal error:\n%s", tail(srv.out.String()))
	}
	api.json(t, "GET", "/readyz", "", 200, nil)
	var rz map[string]string
	api.json(t, "GET", "/readyz", "", 200, &rz)
	if rz["disk"] != "full" {
		t.Fatalf("/readyz on a full disk: %v, want disk: full", rz)
	}
	if free := diskGauge(t, metricsURL, dir); free > 1<<20 {
		t.Fatalf("dataservice_disk_free_bytes %v on a full disk", free)
	}

	// The CLI: room for a few batches, not for the 20,000 entries.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	testkit.FillDisk(t, ballast, 3<<20)
	file := filepath.Join(t.TempDir(), "boxes.yml")
	const total = 20000
	if err := os.WriteFile(file, []byte(boxes("cli", 0, total)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(t, quiet(env), "load", file)
	m := regexp.MustCompile(`(\d+) entries were committed before the disk filled \(created (\d+),`).FindStringSubmatch(stderr)
	if code != 1 || m == nil || !strings.Contains(stderr, "disk full") || !strings.Contains(stderr, env["SERVICE_DB"]) ||
		!strings.Contains(stderr, "load the same files again to complete the load") {
		t.Fatalf("CLI load on a filling disk: exit %d, stdout %q, stderr:\n%s", code, out, stderr)
	}
	committed, _ := strconv.Atoi(m[1])
	r := openReader(t, env["SERVICE_DB"])
	inDB := queryInt(t, r, "SELECT count(*) FROM instances WHERE classname = 'box' AND keyname LIKE 'cli%'")
	if committed == 0 || int64(committed) != inDB || committed >= total {
		t.Fatalf("CLI says %d entries committed, the file holds %d of %d", committed, inDB, total)
	}
	t.Logf("CLI load stopped after %d of %d entries: %s", committed, total, stderr)

	// Space freed: writes work again, the same load completes, the file is sound.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	if free := diskGauge(t, metricsURL, dir); free < 10<<20 {
		t.Fatalf("dataservice_disk_free_bytes %v after freeing space", free)
	}
	api.json(t, "POST", "/api/load/", body, 200, nil)
	api.json(t, "GET", "/readyz", "", 200, &rz)
	if rz["disk"] != "ok" {
		t.Fatalf("/readyz after a write committed again: %v, want disk: ok", rz)
	}
	code, out, stderr = runCLI(t, quiet(env), "load", file)
	if want := fmt.Sprintf("created %d, updated 0, unchanged %d,", total-committed, committed); code != 0 ||
		!strings.Contains(out, want) {
		t.Fatalf("the same load again: exit %d, %q (want %q) %s", code, out, want, stderr)
	}
	if got := queryInt(t, r, "SELECT count(*) FROM instances WHERE classname = 'box'"); got != total+2000 {
		t.Fatalf("%d boxes after the reload, want %d", got, total+2000)
	}
	if got := queryText(t, r, "PRAGMA integrity_check"); got != "ok" {
		t.Fatalf("integrity_check: %s", got)
	}
}

// boxes is a YAML load document of n box entries named prefix<from>...
func boxes(prefix string, from, n int) string {
	var b strings.Builder
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&b, "- {classname: box, keyname: %s%06d, note: %q}\n", prefix, i, strings.Repeat("x", 80)+strconv.Itoa(i))
	}
	return b.String()
}

// diskGauge scrapes dataservice_disk_free_bytes and checks it against statfs of the
// same filesystem (within 1 MiB: the service may write between the two readings).
func diskGauge(t *testing.T, metricsURL, dir string) float64 {
	t.Helper()
	before := statfsFree(t, dir)
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`(?m)^dataservice_disk_free_bytes (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no dataservice_disk_free_bytes in /metrics:\n%s", b)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	after := statfsFree(t, dir)
	if v < min(before, after)-1<<20 || v > max(before, after)+1<<20 {
		t.Fatalf("dataservice_disk_free_bytes %v, statfs says %v then %v", v, before, after)
	}
	return v
}

// statfsFree is the free space of the filesystem holding path, as the gauge reads it.
func statfsFree(t *testing.T, path string) float64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		t.Fatal(err)
	}
	return float64(st.Bavail) * float64(st.Bsize)
}

// TestDiskWarnSetting: SERVICE_DISK_WARN takes a size or a percentage, --disk-warn wins,
// and anything else is refused naming the variable.
func TestDiskWarnSetting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value string
		want  diskWarn
	}{
		{"", diskWarn{bytes: 1 << 30}},
		{"0", diskWarn{}},
		{"500MB", diskWarn{bytes: 500e6}},
		{"2GiB", diskWarn{bytes: 2 << 30}},
		{"1073741824", diskWarn{bytes: 1 << 30}},
		{"5%", diskWarn{pct: 5}},
		{"0.5%", diskWarn{pct: 0.5}},
	} {
		s, err := loadSettings(envOf(map[string]string{"SERVICE_DISK_WARN": tc.value}), &settingFlags{})
		if err != nil || s.DiskWarn != tc.want {
			t.Fatalf("%q: %+v, %v; want %+v", tc.value, s.DiskWarn, err, tc.want)
		}
	}
	s, err := loadSettings(envOf(map[string]string{"SERVICE_DISK_WARN": "5%"}), &settingFlags{diskWarn: "3MiB"})
	if err != nil || s.DiskWarn != (diskWarn{bytes: 3 << 20}) {
		t.Fatalf("--disk-warn 3MiB: %+v, %v", s.DiskWarn, err)
	}
	if got := (diskWarn{pct: 10}).threshold(1000); got != 100 {
		t.Fatalf("10%% of 1000 bytes: %d", got)
	}
	for _, bad := range []string{"lots", "-1", "5 %", "100%", "0%", "1.5GiB", "GiB", "1PiB", "99999999999TiB", " 1GiB"} {
		_, err := loadSettings(envOf(map[string]string{"SERVICE_DISK_WARN": bad}), &settingFlags{})
		if err == nil || !strings.Contains(err.Error(), "SERVICE_DISK_WARN") {
			t.Fatalf("%q accepted or not named: %v", bad, err)
		}
	}
}
