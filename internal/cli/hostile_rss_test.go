package cli

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
)

// vmHWM is the peak resident memory of process pid in MiB (VmHWM of /proc/PID/status).
func vmHWM(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no VmHWM in /proc/%d/status", pid)
	}
	kb, _ := strconv.Atoi(string(m[1]))
	return kb / 1024
}

// cpuTime is the CPU time (user + system) the process pid has used so far, from
// /proc/<pid>/stat in clock ticks (USER_HZ, 100 a second on Linux): unlike the wall
// clock it does not grow when other work loads the machine.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	// The fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100
}

// TestHostileLoadsBounded starts the real server as a child process and sends the
// requests that took it down before: each costs it < 15 s of CPU time and the process's
// peak RSS stays < 400 MB.
func TestHostileLoadsBounded(t *testing.T) {
	t.Parallel()
	testkit.Slow(t)
	env := reliabilityEnv(t)
	migrateDB(t, quiet(env))
	parts := strings.Split(model.HashSecret("x"), "$")
	heavy := strings.Join([]string{"", "argon2id", "v=19", "m=1048576,t=16,p=1", parts[4], parts[5]}, "$")
	loadDoc(t, env, `
- {classname: _pipeline, keyname: doubling, content: "`+strings.Repeat(`- field_merge: ['', note, note, note]\n`, 28)+`"}
- {classname: _schema, keyname: thing, note: {dataformat: text}}
- {classname: _user, keyname: heavy, password: "plain"}
`)
	// A heavy hash already stored (written before the load-time check existed).
	db, err := testkit.OpenStore(t, env["SERVICE_DB"], store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	testkit.SetDataField(t, db, "_user", "heavy", "password", heavy)
	db.Close()

	c := startChild(t, env, "serve")
	base := c.baseURL()
	api := newAPIClient(base)
	pid := c.cmd.Process.Pid
	t.Logf("peak RSS after start: %d MiB", vmHWM(t, pid))

	// 600 small documents, each within the per-document alias budget before.
	doc := "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\na1: &a1 [*a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0]\n" +
		"a2: &a2 [*a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1]\na3: &a3 [*a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2]\n" +
		"a4: [*a3, *a3, *a3, *a3, *a3, *a3, *a3, *a3, *a3]\nclassname: thing\n"
	bomb := strings.Repeat("---\n"+doc, 600)
	var empties bytes.Buffer
	empties.WriteString("[")
	for empties.Len() < 32<<20-8 {
		empties.WriteString("{},")
	}
	empties.WriteString("{}]")

	steps := []struct {
		name, method, path string
		body               []byte
		login              [2]string
		want               int
		reply              string // a text the reply must contain
	}{
		{"alias bomb over 600 documents", "POST", "/api/load/", []byte(bomb), [2]string{}, 400, "alias bomb"},
		{"28 doubling merges on one entry", "POST", "/api/load/?pipeline=doubling", []byte(`[{"classname": "thing", "keyname": "t1", "note": "ab"}]`), [2]string{}, 200, "grew to"},
		{"32 MiB of empty entries", "POST", "/api/load/", empties.Bytes(), [2]string{}, 413, "more than 100000 entries"},
		{"login against a stored m=1 GiB, t=16 hash", "GET", "/api/pipelines/", nil, [2]string{"heavy", "plain"}, 401, "authentication required"},
	}
	for _, st := range steps {
		t0, cpu0 := time.Now(), cpuTime(t, pid)
		req, err := http.NewRequest(st.method, base+st.path, bytes.NewReader(st.body))
		if err != nil {
			t.Fatal(err)
		}
		if st.login[0] != "" {
			req.SetBasicAuth(st.login[0], st.login[1])
		} else {
			req.SetBasicAuth("admin", "s3cret-admin")
		}
		resp, err := api.hc.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		var out bytes.Buffer
		out.ReadFrom(resp.Body)
		resp.Body.Close()
		took, cpu := time.Since(t0), cpuTime(t, pid)-cpu0
		peak := vmHWM(t, pid)
		t.Logf("%s: status %d in %v (CPU %v), peak RSS so far %d MiB", st.name, resp.StatusCode,
			took.Round(time.Millisecond), cpu, peak)
		if resp.StatusCode != st.want {
			t.Errorf("%s: status %d, want %d: %.300s", st.name, resp.StatusCode, st.want, out.String())
		}
		if !strings.Contains(out.String(), st.reply) {
			t.Errorf("%s: reply %.300s does not contain %q", st.name, out.String(), st.reply)
		}
		// CPU time, not the wall clock: a machine loaded by other work answers later
		// but spends the same work. Before the fix each took tens of seconds.
		if cpu > 15*time.Second {
			t.Errorf("%s: the server spent %v of CPU time on it, want < 15 s", st.name, cpu)
		}
		if peak >= 400 {
			t.Errorf("%s: peak RSS %d MiB, want < 400", st.name, peak)
		}
	}
}
