package cli

// Crash and concurrency tests of the whole program (issue "Reliability and security",
// parts 1 and 2). The crash tests start the real program as a child process (see
// TestMain), SIGKILL it at random moments chosen by a logged seed, restart it and check
// with SQL that nothing is half-written. Every loop is bounded in count and time.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// TestCrashDuringPipelineRun kills the serving process three times while a pipeline
// task runs over 50k instances, restarting it each time; the task resumes from its
// checkpoint and every instance is transformed exactly once.
func TestCrashDuringPipelineRun(t *testing.T) {
	t.Parallel()
	testkit.Slow(t)
	const total, kills = 50000, 3
	rng := reliabilitySeed(t, 1)
	env := reliabilityEnv(t)
	// The dead process's lease must expire before the next one takes the task over.
	env["SERVICE_TASK_LEASE"] = "2s"
	if code, _, stderr := runCLI(t, quiet(env), "migrate"); code != 0 {
		t.Fatalf("migrate: exit %d: %s", code, stderr)
	}
	loadDoc(t, env, `
- {classname: _schema, keyname: crashbox, note: {dataformat: string}}
- classname: _pipeline
  keyname: append_x
  content: |
    - field_append: ['', note, X]
`)
	db := openStore(t, env["SERVICE_DB"])
	insertInstances(t, db, "crashbox", "box", total, func(int) map[string]any { return map[string]any{"note": ""} })
	db.Close()

	var handle string
	var lastDone int64
	start := time.Now()
	for round := 0; ; round++ {
		c := startChild(t, env, "serve")
		api := newAPIClient(c.baseURL())
		if handle == "" {
			var run struct {
				Handle string `json:"handle"`
			}
			api.json(t, "POST", "/api/pipelines/append_x/?schema=crashbox", "", 202, &run)
			handle = run.Handle
		}
		if round == kills {
			waitTask(t, api, handle, 120*time.Second)
			c.stop()
			break
		}
		// Kill once this process has committed batches of its own, at a random point
		// of the round's share of the run, then a random few milliseconds later.
		lo := int64(total) * int64(4*round+1) / int64(4*(kills+1))
		target := max(lastDone+1, lo+rng.Int64N(int64(total)/int64(2*(kills+1))))
		deadline := time.Now().Add(60 * time.Second)
		for {
			var tr taskReply
			api.json(t, "GET", "/api/tasks/"+handle+"/", "", 200, &tr)
			if tr.Status != "running" && tr.Status != "queued" {
				t.Fatalf("round %d: task %s before the kill (done %d, target %d)", round, tr.Status, tr.Progress.Done, target)
			}
			if tr.Progress.Done >= target {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: progress %d never reached %d", round, tr.Progress.Done, target)
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
		c.kill()
		lastDone = checkPipelineCommitted(t, env["SERVICE_DB"], handle, total)
		t.Logf("kill %d: %d of %d instances committed", round+1, lastDone, total)
	}
	t.Logf("pipeline run survived %d kills; %d instances verified in %v", kills, total, time.Since(start).Round(time.Millisecond))

	r := openReader(t, env["SERVICE_DB"])
	if got := queryInt(t, r, `SELECT count(*) FROM instances WHERE classname = 'crashbox'
		AND data ->> 'note' = 'X'`); got != total {
		t.Fatalf("%d instances transformed exactly once, want %d (others: %s)", got, total, noteCounts(t, r))
	}
	var status, result string
	var done, totalP int64
	if err := r.QueryRow("SELECT status, result, progress_done, progress_total FROM tasks WHERE handle = ?", handle).
		Scan(&status, &result, &done, &totalP); err != nil {
		t.Fatal(err)
	}
	var res struct{ Scanned, Updated, Unchanged, Errors int64 }
	if err := json.Unmarshal([]byte(result), &res); err != nil {
		t.Fatal(err)
	}
	if status != "succeeded" || done != total || totalP != total || res.Scanned != total || res.Updated != total ||
		res.Unchanged != 0 || res.Errors != 0 {
		t.Fatalf("task %s: progress %d/%d, result %+v; want succeeded, %d/%d, %d scanned and updated", status, done,
			totalP, res, total, total, total)
	}
	if got := queryInt(t, r, "SELECT count(DISTINCT keyname) FROM revisions WHERE author = ?", "task:"+handle); got != total {
		t.Fatalf("instances with a revision of the task = %d, want %d", got, total)
	}
	if got := queryInt(t, r, "SELECT count(*) FROM revisions WHERE author = ?", "task:"+handle); got != total {
		t.Fatalf("revisions of the task = %d, want %d (one per instance)", got, total)
	}
	checkIntegrity(t, r, "after the run")
}

// TestReliabilityTaskLeaseSetting checks the hidden SERVICE_TASK_LEASE setting the
// crash tests shorten the lease with: a duration from 1s to 1h, named when invalid.
func TestReliabilityTaskLeaseSetting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value string
		ok    bool
	}{{"1s", true}, {"1500ms", true}, {"1h", true}, {"5", false}, {"999ms", false}, {"-2s", false}, {"61m", false}} {
		s, err := loadSettings(envOf(map[string]string{"SERVICE_TASK_LEASE": tc.value}), &settingFlags{})
		if tc.ok && (err != nil || s.TaskLease.String() != mustDuration(t, tc.value).String()) {
			t.Fatalf("SERVICE_TASK_LEASE=%s: %v, %v", tc.value, s, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), `SERVICE_TASK_LEASE "`+tc.value+`"`)) {
			t.Fatalf("SERVICE_TASK_LEASE=%s: error %v, want one naming the variable", tc.value, err)
		}
	}
	if s, err := loadSettings(envOf(nil), &settingFlags{}); err != nil || s.TaskLease != 0 {
		t.Fatalf("unset: lease %v, %v; want 0 (the runner's 30s default)", s.TaskLease, err)
	}
}

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// legacyPipeline is a _pipeline content in the pre-4.6.0 form that block 4.6.0 flattens.
const (
	legacyPipeline = "csv_delimiter: ';'\nclassname: rhost\ntasks:\n  - field_lower: name\n  - field_set: ['', kind, host]\n"
	flatPipeline   = "- field_lower: name\n- field_set: ['', kind, host]\n"
)

// backupNameRE finds the DB_VERSION in a backup's name <db>.<DB_VERSION>.<timestamp>.bak.
var backupNameRE = regexp.MustCompile(`\.(\d+\.\d+\.\d+)\.\d{8}T[\d.]+Z(-\d+)?\.bak$`)

// TestCrashDuringMigration kills `migrate` at random moments inside blocks 4.6.0 (many
// legacy pipelines) and 4.8.0 (many dotted ipam_ip and references to them): after each
// kill every block is wholly applied or wholly absent, as DB_VERSION says, and a last
// `migrate` completes the upgrade.
func TestCrashDuringMigration(t *testing.T) {
	t.Parallel()
	testkit.Slow(t)
	const pipelines, ips, kills = 6000, 20000, 6
	rng := reliabilitySeed(t, 2)
	env := reliabilityEnv(t)
	env["SERVICE_BACKUP"] = "on"
	if !store.IsFileAddr(env["SERVICE_DB"]) {
		// PostgreSQL's backup before migrating is a pg_dump archive written into
		// SERVICE_BACKUP_DIR, which must be set there; checkMigrationBackups reads it.
		env["SERVICE_BACKUP_DIR"] = childDir(t)
	}
	if code, _, stderr := runCLI(t, quiet(env), "migrate"); code != 0 {
		t.Fatalf("migrate: exit %d: %s", code, stderr)
	}
	loadDoc(t, env, "- {classname: _schema, keyname: rhost, ip: {dataformat: schema, dataformat_ext: ipam_ip}}\n")
	db := openStore(t, env["SERVICE_DB"])
	// The 4.5 shape: legacy pipeline contents, ipam_ip keyed by dotted addresses (keyname
	// mode edit, no collected field), ipam_subnet with its subnet field.
	ctx := t.Context()
	for _, q := range []string{
		"UPDATE schemas SET keyname_mode = 'edit' WHERE keyname IN ('ipam_ip', 'ipam_subnet')",
		"DELETE FROM schema_fields WHERE classname = 'ipam_ip' AND keyname = 'collected'",
		`INSERT INTO schema_fields(classname, keyname, displayname, dataformat, dataformat_ext, sort_order)
			VALUES('ipam_subnet', 'subnet', 'Subnet', 'ipv4', 'subnet', 5)`,
	} {
		if err := testkit.Migrator(t, db).Migrate(ctx, func(m *store.Migration) error { return m.Exec(ctx, q) }); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// The dashboard entries blocks 4.6.0 and 4.8.0 reload as their last step.
	testkit.SetDataField(t, db, "_home", "code_editor", "url", "/code_editor/")
	testkit.SetDataField(t, db, "_home", "ipam", "url", "/ipam/")
	insertInstances(t, db, "_pipeline", "legacy", pipelines, func(int) map[string]any {
		return map[string]any{"content": legacyPipeline, "description": "legacy"}
	})
	dotted := func(i int) string { return fmt.Sprintf("10.%d.%d.%d", i/62500, i/250%250, i%250+1) }
	err := testkit.Migrator(t, db).Migrate(ctx, func(m *store.Migration) error {
		for i := 0; i < ips; i++ {
			for _, q := range []struct{ cls, key, data string }{
				{"ipam_ip", dotted(i), `{"hostname": "h` + strconv.Itoa(i) + `"}`},
				{"rhost", "h" + strconv.Itoa(i), `{"ip": "` + dotted(i) + `"}`},
			} {
				if err := m.Exec(ctx, `INSERT INTO instances(id, classname, keyname, displayname, data, created_at,
					updated_at) VALUES(`+testkit.NextInstanceIDSQL+`, ?, ?, ?, ?, '2020-01-01T00:00:00Z', '2020-01-01T00:00:00Z')`,
					q.cls, q.key, q.key, q.data); err != nil {
					return err
				}
			}
		}
		return m.SetRegistry(ctx, store.RegDBVersion, "4.5.0")
	})
	if err != nil {
		t.Fatal(err)
	}
	revisions := queryInt(t, db.Reader(), "SELECT count(*) FROM revisions")
	db.Close()

	check := func(when string) string {
		t.Helper()
		r := openReader(t, env["SERVICE_DB"])
		defer r.Close()
		v := queryText(t, r, "SELECT value FROM registry WHERE key = 'DB_VERSION'")
		want := func(what string, got, want int64) {
			t.Helper()
			if got != want {
				t.Fatalf("%s, DB_VERSION %s: %s = %d, want %d", when, v, what, got, want)
			}
		}
		legacy := queryInt(t, r, `SELECT count(*) FROM instances WHERE classname = '_pipeline' AND keyname LIKE 'legacy%'
			AND data ->> 'content' = ?`, legacyPipeline)
		flat := queryInt(t, r, `SELECT count(*) FROM instances WHERE classname = '_pipeline' AND keyname LIKE 'legacy%'
			AND data ->> 'content' = ?`, flatPipeline)
		homeURL := func(key, url string) int64 {
			return queryInt(t, r, `SELECT count(*) FROM instances WHERE classname = '_home' AND keyname = ?
				AND data ->> 'url' = ?`, key, url)
		}
		if v < "4.6.0" {
			want("legacy pipelines", legacy, pipelines)
			want("old code_editor url", homeURL("code_editor", "/code_editor/"), 1)
		} else {
			want("flattened pipelines", flat, pipelines)
			want("new code_editor url", homeURL("code_editor", "/data/private/code_editor/"), 1)
		}
		if v < "4.8.0" {
			want("old ipam url", homeURL("ipam", "/ipam/"), 1)
		} else {
			want("new ipam url", homeURL("ipam", "/data/private/ipam/"), 1)
		}
		dottedIPs := queryInt(t, r, "SELECT count(*) FROM instances WHERE classname = 'ipam_ip' AND keyname LIKE '10.%'")
		hexIPs := queryInt(t, r, `SELECT count(*) FROM instances WHERE classname = 'ipam_ip' AND keyname LIKE '0a%'
			AND length(keyname) = 8 AND displayname LIKE '10.%'`)
		dottedRefs := queryInt(t, r, "SELECT count(*) FROM instances WHERE classname = 'rhost' AND data ->> 'ip' LIKE '10.%'")
		hexRefs := queryInt(t, r, "SELECT count(*) FROM instances WHERE classname = 'rhost' AND data ->> 'ip' LIKE '0a%'")
		collected := queryInt(t, r, "SELECT count(*) FROM schema_fields WHERE classname = 'ipam_ip' AND keyname = 'collected'")
		if v < "4.8.0" {
			want("dotted ipam_ip", dottedIPs, ips)
			want("references to dotted ipam_ip", dottedRefs, ips)
			want("field ipam_ip.collected", collected, 0)
		} else {
			want("hex ipam_ip", hexIPs, ips)
			want("references to hex ipam_ip", hexRefs, ips)
			want("field ipam_ip.collected", collected, 1)
		}
		subnetField := queryInt(t, r, "SELECT count(*) FROM schema_fields WHERE classname = 'ipam_subnet' AND keyname = 'subnet'")
		if v < "4.9.0" {
			want("field ipam_subnet.subnet", subnetField, 1)
		} else {
			want("field ipam_subnet.subnet", subnetField, 0)
		}
		want("revisions", queryInt(t, r, "SELECT count(*) FROM revisions"), revisions)
		checkIntegrity(t, r, when)
		return v
	}

	// Kills 1 and 2 land while the backup before migrating is written, the others a
	// random delay after a randomly chosen pending data block starts.
	blockRE := regexp.MustCompile(`msg="migration block start" block=(\S+)`)
	outcomes := map[string]int{}
	for round := 0; round < kills; round++ {
		v := check(fmt.Sprintf("before start %d", round+1))
		if v >= "4.8.0" {
			break
		}
		event, delay := "msg=start-up", time.Duration(rng.IntN(40))*time.Millisecond
		if round >= 2 {
			event, delay = "block=4.8.0", time.Duration(rng.IntN(300))*time.Millisecond
			if v < "4.6.0" && rng.IntN(2) == 0 {
				event = "block=4.6.0"
			}
		}
		c := startChild(t, env, "migrate")
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(c.out.String(), event) {
			if c.exited() || time.Now().After(deadline) {
				t.Fatalf("kill %d: %s never logged; output:\n%s", round+1, event, tail(c.out.String()))
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(delay)
		c.kill()
		after := check(fmt.Sprintf("after kill %d", round+1))
		out := c.out.String()
		started := blockRE.FindAllStringSubmatch(out, -1)
		switch {
		case len(started) == 0 && !strings.Contains(out, "backup before migrating"):
			outcomes["before the backup was complete"]++
		case len(started) == 0:
			outcomes["after the backup"]++
		case after < started[len(started)-1][1]:
			outcomes["inside block "+started[len(started)-1][1]]++
		default:
			outcomes["between blocks"]++
		}
		t.Logf("kill %d: %v after %s; DB_VERSION %s -> %s", round+1, delay, event, v, after)
	}
	c := startChild(t, env, "migrate")
	if code := c.wait(120 * time.Second); code != 0 {
		t.Fatalf("final migrate: exit %d:\n%s", code, tail(c.out.String()))
	}
	if v := check("after the final migrate"); v != "4.9.0" {
		t.Fatalf("DB_VERSION %s after the final migrate, want 4.9.0", v)
	}
	inside := outcomes["inside block 4.6.0"] + outcomes["inside block 4.8.0"]
	if inside == 0 {
		t.Fatalf("no kill landed inside a block (%v): the test proved nothing", outcomes)
	}
	t.Logf("kills: %v; %d pipelines and %d ipam_ip (+%d references) verified", outcomes, pipelines, ips, ips)
	checkMigrationBackups(t, env["SERVICE_DB"], ips)
}

// checkMigrationBackups checks the backups killed and completed migrations of the
// database at addr left: each complete one is whole and holds the DB_VERSION its
// name says and every ipam_ip. On SQLite they are copies beside the file; on
// PostgreSQL pg_dump archives named after the database in SERVICE_BACKUP_DIR (the
// test sets childDir), each restored into a new database to be read.
func checkMigrationBackups(t *testing.T, addr string, ips int64) {
	t.Helper()
	pattern := addr + ".*.bak"
	if !store.IsFileAddr(addr) {
		u, err := url.Parse(addr)
		if err != nil {
			t.Fatal(err)
		}
		pattern = filepath.Join(childDir(t), strings.Trim(u.Path, "/")+".*.bak")
	}
	backups, _ := filepath.Glob(pattern)
	for _, b := range backups {
		at := b
		if !store.IsFileAddr(addr) {
			at = testkit.NewAddress(t, "restored.db")
			if out, err := exec.Command("pg_restore", "--no-owner", "--exit-on-error", "--dbname="+at, b).CombinedOutput(); err != nil {
				t.Fatalf("backup %s: pg_restore: %v: %s", b, err, out)
			}
		}
		r := openReader(t, at)
		checkIntegrity(t, r, "backup "+b)
		named := backupNameRE.FindStringSubmatch(b)
		if v := queryText(t, r, "SELECT value FROM registry WHERE key = 'DB_VERSION'"); named == nil || v != named[1] {
			t.Fatalf("backup %s: DB_VERSION %q, not the version in its name", b, v)
		}
		if got := queryInt(t, r, "SELECT count(*) FROM instances WHERE classname = 'ipam_ip'"); got != ips {
			t.Fatalf("backup %s: %d ipam_ip, want %d", b, got, ips)
		}
		r.Close()
	}
	partial, _ := filepath.Glob(strings.TrimSuffix(pattern, ".bak") + ".partial")
	t.Logf("%d complete backups, %d .partial leftovers of killed copies", len(backups), len(partial))
}

// TestCrashDuringLoad kills the serving process twice during one POST /api/load/ of
// 30k entries: after each kill every entry is wholly loaded (its row, complete, and
// its one revision) or wholly absent; posting the body again completes the load.
func TestCrashDuringLoad(t *testing.T) {
	t.Parallel()
	testkit.Slow(t)
	const entries, kills = 30000, 2
	rng := reliabilitySeed(t, 3)
	env := reliabilityEnv(t)
	if code, _, stderr := runCLI(t, quiet(env), "migrate"); code != 0 {
		t.Fatalf("migrate: exit %d: %s", code, stderr)
	}
	loadDoc(t, env, "- {classname: _schema, keyname: lbox, size: {dataformat: int}, note: {dataformat: string}}\n")
	var body strings.Builder
	body.WriteString("[")
	for i := 0; i < entries; i++ {
		if i > 0 {
			body.WriteString(",\n")
		}
		fmt.Fprintf(&body, `{"classname": "lbox", "keyname": "l%d", "size": %d, "note": "n%d"}`, i, i, i)
	}
	body.WriteString("]")

	var present int64
	for round := 0; ; round++ {
		c := startChild(t, env, "serve")
		api := newAPIClient(c.baseURL())
		if round == kills {
			var res struct{ Created, Unchanged, Errors int64 }
			api.json(t, "POST", "/api/load/", body.String(), 200, &res)
			if res.Created != entries-present || res.Unchanged != present || res.Errors != 0 {
				t.Fatalf("load after %d kills: %+v; want %d created, %d unchanged", kills, res, entries-present, present)
			}
			c.stop()
			break
		}
		posted := make(chan struct{})
		go func() {
			defer close(posted)
			// The kill cuts this request off: its error is expected.
			api.do("POST", "/api/load/", "application/json", strings.NewReader(body.String()))
		}()
		r := openReader(t, env["SERVICE_DB"])
		// Kill 1 lands at a random point of the first half, kill 2 of the rest; both
		// well before the last commit.
		lo, hi := present+entries/10, int64(entries/2)
		if round > 0 {
			hi = entries * 9 / 10
		}
		target := lo + rng.Int64N(max(1, hi-lo))
		deadline := time.Now().Add(60 * time.Second)
		for queryInt(t, r, "SELECT count(*) FROM instances WHERE classname = 'lbox'") < target {
			if time.Now().After(deadline) || c.exited() {
				t.Fatalf("kill %d: the load never reached %d entries; output:\n%s", round+1, target, tail(c.out.String()))
			}
			time.Sleep(2 * time.Millisecond)
		}
		r.Close()
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
		c.kill()
		<-posted
		if present = checkLoaded(t, env["SERVICE_DB"], entries); present == entries {
			t.Fatalf("kill %d: the load had finished", round+1)
		}
		t.Logf("kill %d: %d of %d entries loaded", round+1, present, entries)
	}
	if got := checkLoaded(t, env["SERVICE_DB"], entries); got != entries {
		t.Fatalf("%d entries loaded after the last load, want %d", got, entries)
	}
}

// TestConcurrentMigrateProcesses starts three `migrate` processes together on one new
// file, three times: each time exactly one bootstraps, all three succeed and agree on
// the one INSTANCE_UUID, and the file holds what a single start makes.
func TestConcurrentMigrateProcesses(t *testing.T) {
	t.Parallel()
	single := reliabilityEnv(t)
	if code, _, stderr := runCLI(t, quiet(single), "migrate"); code != 0 {
		t.Fatalf("migrate: exit %d: %s", code, stderr)
	}
	want := tableCounts(t, single["SERVICE_DB"])
	uuidRE := regexp.MustCompile(`msg=start-up db_version=\S* service_version=\S+ instance_uuid=(?:"")?([0-9a-f-]*)`)
	for round := 0; round < 3; round++ {
		env := reliabilityEnv(t)
		var procs []*child
		for i := 0; i < 3; i++ {
			procs = append(procs, startChild(t, env, "migrate"))
		}
		bootstraps := 0
		for i, c := range procs {
			if code := c.wait(60 * time.Second); code != 0 {
				t.Fatalf("round %d: process %d: exit %d:\n%s", round+1, i+1, code, tail(c.out.String()))
			}
			out := c.out.String()
			bootstraps += strings.Count(out, "bootstrap: empty database")
			if !strings.Contains(out, "DB_VERSION 4.9.0 (SERVICE_VERSION 4.9.0)") {
				t.Fatalf("round %d: process %d did not report DB_VERSION 4.9.0:\n%s", round+1, i+1, tail(out))
			}
		}
		// Opened once the processes are done: on PostgreSQL the reader needs the
		// table layout they make.
		r := openReader(t, env["SERVICE_DB"])
		uuid := queryText(t, r, "SELECT value FROM registry WHERE key = 'INSTANCE_UUID'")
		for i, c := range procs {
			m := uuidRE.FindStringSubmatch(c.out.String())
			if m == nil || (m[1] != "" && m[1] != uuid) {
				t.Fatalf("round %d: process %d read INSTANCE_UUID %v, registry holds %s", round+1, i+1, m, uuid)
			}
		}
		if bootstraps != 1 || uuid == "" {
			t.Fatalf("round %d: %d bootstraps, INSTANCE_UUID %q; want one bootstrap and one UUID", round+1, bootstraps, uuid)
		}
		if got := tableCounts(t, env["SERVICE_DB"]); got != want {
			t.Fatalf("round %d: rows %s, want %s as after one start", round+1, got, want)
		}
		r.Close()
	}
}

// TestConcurrentClientsAndLoads runs 50 HTTP clients against one serving process —
// submitting, polling, listing and cancelling pipeline tasks, reading and loading —
// while a loader posts loads into the schema the tasks run over. No reply is a 5xx or
// mentions a locked database, every submitted task is found and ends in a final
// status, and the counts add up.
func TestConcurrentClientsAndLoads(t *testing.T) {
	t.Parallel()
	testkit.Slow(t)
	const clients, requests, existing = 50, 2000, 300
	rng := reliabilitySeed(t, 4)
	env := reliabilityEnv(t)
	if code, _, stderr := runCLI(t, quiet(env), "migrate"); code != 0 {
		t.Fatalf("migrate: exit %d: %s", code, stderr)
	}
	loadDoc(t, env, `
- {classname: _schema, keyname: conc, n: {dataformat: int}, tag: {dataformat: string}}
- classname: _pipeline
  keyname: tagger
  content: |
    - field_set: ['', tag, done]
`)
	db := openStore(t, env["SERVICE_DB"])
	insertInstances(t, db, "conc", "c", existing, func(i int) map[string]any { return map[string]any{"n": i} })
	// Every client submits as admin: the per-owner queue bound is raised to the queue's own
	// (this test stresses concurrency; the per-owner limit has its own tests).
	if err := db.SetConfig(context.Background(), map[string]string{"QUEUE_MAX_PER_OWNER": "1000"}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs testkit.Buffer
	exited := make(chan int, 1)
	go func() { exited <- Run(ctx, []string{"serve"}, envOf(env), nil, io.Discard, &logs) }()
	deadline := time.Now().Add(30 * time.Second)
	var base string
	for base == "" || !ready(base) {
		if time.Now().After(deadline) {
			t.Fatalf("server not ready: %s", tail(logs.String()))
		}
		if m := listenRE.FindStringSubmatch(logs.String()); m != nil {
			base = "http://" + m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	api := newAPIClient(base)
	// One request first: the password's verification is then cached, rather than 50
	// clients paying an argon2id derivation (19 MiB each) at once.
	api.json(t, "GET", "/api/version/", "", 200, nil)

	var (
		mu          sync.Mutex
		handles     []string
		problems    []string
		created     int64 // instances the loads report created
		cancels     int64
		sent, sent2 atomic.Int64
	)
	check := func(what string, code int, body []byte, err error, want int) bool {
		bad := ""
		switch {
		case err != nil:
			bad = err.Error()
		case code >= 500 || code != want:
			bad = fmt.Sprintf("status %d: %.200s", code, body)
		case bytes.Contains(body, []byte("database is locked")) || bytes.Contains(body, []byte("SQLITE_BUSY")):
			bad = fmt.Sprintf("locked: %.200s", body)
		}
		if bad != "" {
			mu.Lock()
			problems = append(problems, what+": "+bad)
			mu.Unlock()
		}
		return bad == ""
	}
	load := func(what string, doc []map[string]any) {
		b, _ := json.Marshal(doc)
		code, body, err := api.do("POST", "/api/load/", "application/json", bytes.NewReader(b))
		var res struct{ Created, Updated, Unchanged, Errors int64 }
		if check(what, code, body, err, 200) {
			if json.Unmarshal(body, &res) != nil || res.Errors != 0 || res.Created+res.Updated+res.Unchanged != int64(len(doc)) {
				check(what, 0, body, fmt.Errorf("load result does not add up"), 200)
			}
			mu.Lock()
			created += res.Created
			mu.Unlock()
		}
	}
	randomHandle := func(r *rand.Rand) string {
		mu.Lock()
		defer mu.Unlock()
		if len(handles) == 0 {
			return ""
		}
		return handles[r.IntN(len(handles))]
	}

	// Two CLI loads run as processes of their own beside the server and its clients.
	var cliLoads []*child
	for p := 0; p < 2; p++ {
		var doc strings.Builder
		for j := 0; j < 1000; j++ {
			fmt.Fprintf(&doc, "- {classname: conc, keyname: p%d_%d, n: %d}\n", p, j, j)
		}
		file := filepath.Join(t.TempDir(), "cli.yml")
		if err := os.WriteFile(file, []byte(doc.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		cliLoads = append(cliLoads, startChild(t, env, "load", file))
	}

	began := time.Now()
	stop := began.Add(60 * time.Second)
	var clientsWG, loaderWG sync.WaitGroup
	loaderDone := make(chan struct{})
	loaderSeed := rng.Uint64()
	loaderWG.Go(func() {
		r := rand.New(rand.NewPCG(loaderSeed, 0))
		for i := 0; i < 300 && time.Now().Before(stop); i++ {
			select {
			case <-loaderDone:
				return
			default:
			}
			var doc []map[string]any
			for j := 0; j < 100; j++ {
				if j%2 == 0 {
					doc = append(doc, map[string]any{"classname": "conc", "keyname": fmt.Sprintf("c%d", r.IntN(existing)), "n": i})
				} else {
					doc = append(doc, map[string]any{"classname": "conc", "keyname": fmt.Sprintf("w%d_%d", i, j), "n": j})
				}
			}
			sent2.Add(1)
			load("loader", doc)
		}
	})
	for w := 0; w < clients; w++ {
		seed := rng.Uint64()
		clientsWG.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for sent.Add(1) <= requests && time.Now().Before(stop) {
				h := randomHandle(r)
				switch op := r.IntN(100); {
				case op < 25 || h == "":
					q := "/api/pipelines/tagger/?schema=conc"
					if r.IntN(4) == 0 {
						q += "&dryrun=true"
					}
					code, body, err := api.do("POST", q, "", nil)
					var reply struct {
						Handle string `json:"handle"`
					}
					if check("submit", code, body, err, 202) && json.Unmarshal(body, &reply) == nil && reply.Handle != "" {
						mu.Lock()
						handles = append(handles, reply.Handle)
						mu.Unlock()
					}
				case op < 55:
					code, body, err := api.do("GET", "/api/tasks/"+h+"/", "", nil)
					check("task detail", code, body, err, 200)
				case op < 65:
					code, body, err := api.do("GET", "/api/tasks/?limit=20", "", nil)
					check("task list", code, body, err, 200)
				case op < 80:
					code, body, err := api.do("POST", "/api/tasks/"+h+"/cancel/", "", nil)
					if check("cancel", code, body, err, 200) {
						mu.Lock()
						cancels++
						mu.Unlock()
					}
				case op < 90:
					code, body, err := api.do("GET", fmt.Sprintf("/api/instances/conc/?size=20&page=%d", 1+r.IntN(10)), "", nil)
					check("instances", code, body, err, 200)
				default:
					i := sent.Load()
					load("client load", []map[string]any{
						{"classname": "conc", "keyname": fmt.Sprintf("c%d", r.IntN(existing)), "n": i},
						{"classname": "conc", "keyname": fmt.Sprintf("x%d_%d", w, i), "n": i},
					})
				}
			}
		})
	}
	clientsWG.Wait()
	close(loaderDone)
	loaderWG.Wait()
	for _, c := range cliLoads {
		if code := c.wait(60 * time.Second); code != 0 || !strings.Contains(c.out.String(), "created 1000,") {
			t.Fatalf("CLI load: exit %d:\n%s", code, tail(c.out.String()))
		}
		created += 1000
	}
	clientRequests, loaderRequests := min(sent.Load(), requests), sent2.Load()
	if len(problems) > 0 {
		t.Fatalf("%d of %d requests went wrong, first ones: %s", len(problems), clientRequests+loaderRequests,
			strings.Join(problems[:min(len(problems), 10)], "\n"))
	}

	t.Logf("requests sent in %v", time.Since(began).Round(time.Millisecond))
	// Every submitted task is found and ends in a final status.
	r := openReader(t, env["SERVICE_DB"])
	deadline = time.Now().Add(90 * time.Second)
	for queryInt(t, r, "SELECT count(*) FROM tasks WHERE status IN ('queued', 'running')") > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("tasks still unfinished after 90s: %d", queryInt(t, r, "SELECT count(*) FROM tasks WHERE status IN ('queued', 'running')"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	statuses := map[string]int{}
	for _, h := range handles {
		var tr taskReply
		api.json(t, "GET", "/api/tasks/"+h+"/", "", 200, &tr)
		statuses[tr.Status]++
		if tr.Status == "failed" || !finalStatus(tr.Status) || (tr.Result != nil && tr.Result.Errors != 0) {
			t.Fatalf("task %s: %s, error %v, result %+v", h, tr.Status, tr.Error, tr.Result)
		}
		// Instances are only added while tasks run: a finished run scanned at least
		// the instances counted when it started.
		if tr.Status == "succeeded" && (tr.Result == nil || tr.Result.Scanned < tr.Progress.Total) {
			t.Fatalf("task %s succeeded with progress %+v and result %+v", h, tr.Progress, tr.Result)
		}
	}
	if got := queryInt(t, r, "SELECT count(*) FROM tasks"); got != int64(len(handles)) {
		t.Fatalf("%d tasks stored, %d submitted", got, len(handles))
	}
	if int64(statuses["cancelled"]) > cancels {
		t.Fatalf("%d tasks cancelled by %d cancel requests", statuses["cancelled"], cancels)
	}
	if got, want := queryInt(t, r, "SELECT count(*) FROM instances WHERE classname = 'conc'"), existing+created; got != want {
		t.Fatalf("%d conc instances, want %d existing + %d the loads created", got, existing, created)
	}
	cancel()
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("serve exit %d: %s", code, tail(logs.String()))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("server did not stop")
	}
	if strings.Contains(logs.String(), "level=ERROR") || strings.Contains(logs.String(), "database is locked") {
		t.Fatalf("errors in the server log:\n%s", tail(logs.String()))
	}
	t.Logf("%d client requests (%d tasks submitted: %v; %d cancel requests), %d loads of 100 entries and 2 CLI loads of 1000; %d instances created",
		clientRequests, len(handles), statuses, cancels, loaderRequests, created)
}
