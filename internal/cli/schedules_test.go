package cli

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"dataservice/internal/testkit"
)

// TestScheduleList: `schedule list` prints a table of the schedules: a disabled one
// says so; an enabled one shows its next three run times in its own zone.
func TestScheduleList(t *testing.T) {
	t.Parallel()
	env := migratedEnv(t)
	if code, _, stderr := runCLI(t, env, "schedule", "list"); code != 0 || !strings.Contains(stderr, "no schedules") {
		t.Fatalf("schedule list on no schedules: exit %d, %q", code, stderr)
	}
	file := writeFile(t, "schedules.yml", `
- {classname: _schema, keyname: box, name: {dataformat: string}}
- {classname: _pipeline, keyname: tidy, content: "- field_set: ['', name, x]"}
- {classname: _schedule, keyname: nightly, pipeline: tidy, schemas: [box], cron: "30 3 * * *", timezone: Asia/Kolkata}
- {classname: _schedule, keyname: paused, pipeline: tidy, schemas: [box], cron: "@hourly", missed: skip, is_enabled: false}
`)
	if code, _, stderr := runCLI(t, env, "load", file); code != 0 {
		t.Fatalf("load: exit %d: %s", code, stderr)
	}
	code, out, stderr := runCLI(t, env, "schedule", "list")
	if code != 0 {
		t.Fatalf("schedule list: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !regexp.MustCompile(`^NAME +ENABLED +CRON +TIMEZONE +MISSED +PIPELINE +SCHEMAS +DRYRUN +NEXT RUNS +LAST +LAST TASK$`).MatchString(lines[0]) {
		t.Fatalf("table:\n%s", out)
	}
	// Kolkata has no summer time: 03:30 is always +05:30.
	next := `\d{4}-\d\d-\d\dT03:30:00\+05:30`
	if !regexp.MustCompile(`^nightly +true +30 3 \* \* \* +Asia/Kolkata +run_once +tidy +box +false +` + next + ` ` + next + ` ` + next + ` +- +-$`).MatchString(lines[1]) {
		t.Fatalf("nightly: %q", lines[1])
	}
	if !regexp.MustCompile(`^paused +false +@hourly +UTC +skip +tidy +box +false +- \(disabled\) +- +-$`).MatchString(lines[2]) {
		t.Fatalf("paused: %q", lines[2])
	}
}

// TestServeRunsSchedules: a serving process runs the scheduler beside the task
// runner: a schedule every second created while it serves is submitted, its runs
// finish, and the metric counts them.
func TestServeRunsSchedules(t *testing.T) {
	t.Parallel()
	env := migratedEnv(t)
	api, metricsURL, stop := servingProcess(t, env)
	doc := `
- {classname: _schema, keyname: box, name: {dataformat: string}}
- {classname: box, keyname: b1, name: one}
- {classname: _pipeline, keyname: tidy, content: "- field_set: ['', name, x]"}
- {classname: _schedule, keyname: everysecond, pipeline: tidy, schemas: [box], cron: "@every 1s", dryrun: true}
`
	req, _ := http.NewRequest(http.MethodPost, api+"/api/load/", strings.NewReader(doc))
	req.SetBasicAuth("admin", "s3cret-admin")
	req.Header.Set("Content-Type", "application/yaml")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("load: %d", resp.StatusCode)
	}
	// Bounded generously: the machine may be slow; nothing here measures time.
	deadline := time.Now().Add(60 * time.Second)
	for scrape(t, metricsURL)[`dataservice_schedule_runs_total{result="submitted"}`] < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no two scheduled runs counted within a minute; log:\n%s", stop())
		}
		time.Sleep(50 * time.Millisecond)
	}
	log := stop()
	if !strings.Contains(log, `msg="schedule run submitted" schedule=everysecond`) {
		t.Fatalf("no run logged:\n%s", log)
	}
}

// TestScheduleTwoNodes: two nodes (child `serve` processes) share one PostgreSQL
// database and both run the scheduler: each due time of a schedule every second is
// dealt with by one node only, and every run either logged as submitted is one task.
func TestScheduleTwoNodes(t *testing.T) {
	t.Parallel()
	if !testkit.Postgres() {
		t.Skip("PostgreSQL only: several nodes share a database there (on SQLite, TestScheduleTwoSchedulersSubmitOnce in package tasks ticks two handles of one file)")
	}
	env := nodesEnv(t)
	if code, _, stderr := runCLI(t, quiet(env), "migrate"); code != 0 {
		t.Fatalf("migrate: exit %d: %s", code, stderr)
	}
	loadDoc(t, env, `
- {classname: _schema, keyname: box, name: {dataformat: string}}
- {classname: box, keyname: b1, name: one}
- {classname: _pipeline, keyname: tidy, content: "- field_set: ['', name, x]"}
- {classname: _schedule, keyname: everysecond, pipeline: tidy, schemas: [box], cron: "@every 1s", dryrun: true}
`)
	nodes := []*child{startChild(t, env, "serve"), startChild(t, env, "serve")}
	for _, n := range nodes {
		n.baseURL() // both are up
	}
	runRE := regexp.MustCompile(`msg="schedule run (submitted|not submitted)" schedule=everysecond due=(\S+) result=(\w+)`)
	runs := func() [][]string {
		var all [][]string
		for _, n := range nodes {
			all = append(all, runRE.FindAllStringSubmatch(n.out.String(), -1)...)
		}
		return all
	}
	testkit.WaitFor(t, 90*time.Second, "eight due runs dealt with", func() bool { return len(runs()) >= 8 })
	for _, n := range nodes {
		n.stop()
	}
	seen := map[string]bool{}
	submitted := 0
	for _, m := range runs() {
		if seen[m[2]] {
			t.Fatalf("due time %s dealt with twice", m[2])
		}
		seen[m[2]] = true
		if m[3] == "submitted" {
			submitted++
		}
	}
	db := openStore(t, env["SERVICE_DB"])
	if got := queryInt(t, db.Reader(), "SELECT count(*) FROM tasks WHERE owner_type = 'schedule' AND owner_id = 'everysecond'"); got != int64(submitted) || got == 0 {
		t.Fatalf("tasks: %d, runs logged as submitted: %d", got, submitted)
	}
}
