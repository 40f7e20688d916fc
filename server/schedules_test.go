package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"dataservice/tasks"
)

// TestScheduleList: GET /api/schedules/ lists each schedule with its next three run
// times (UTC; the zone beside them), its policy and its last run's task and task_url;
// it needs p_data_access, then the read permission of _schedule.
func TestScheduleList(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRunner: true})
	e.load(`
- classname: _schema
  keyname: box
  name: {dataformat: string}
- classname: _pipeline
  keyname: tidy
  content: "- field_set: ['', name, x]"
- classname: _schedule
  keyname: nightly
  pipeline: tidy
  schemas: [box]
  cron: "0 3 * * *"
  timezone: Europe/Paris
  missed: skip
- classname: _schedule
  keyname: hourly
  pipeline: tidy
  schemas: [box]
  cron: "@every 1h"
  dryrun: true
`)
	s := tasks.NewScheduler(e.runner, tasks.SchedulerOptions{})
	for _, at := range []time.Duration{-2 * time.Hour, -time.Hour} {
		if _, err := s.Tick(context.Background(), fixedNow.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
	handle := e.queryString("SELECT handle FROM tasks WHERE owner_type = 'schedule' AND owner_id = 'hourly'")

	var got struct {
		Count     int `json:"count"`
		Schedules []struct {
			Keyname    string   `json:"keyname"`
			Timezone   string   `json:"timezone"`
			Missed     string   `json:"missed"`
			Enabled    bool     `json:"enabled"`
			DryRun     bool     `json:"dryrun"`
			NextRuns   []string `json:"next_runs"`
			LastDue    *string  `json:"last_due"`
			LastResult string   `json:"last_result"`
			LastTask   string   `json:"last_task"`
			TaskURL    string   `json:"task_url"`
		} `json:"schedules"`
	}
	wantJSON(t, e.get("/api/schedules/", adminCred), http.StatusOK, &got)
	if got.Count != 2 || len(got.Schedules) != 2 {
		t.Fatalf("count %d, schedules %d: want 2", got.Count, len(got.Schedules))
	}
	night, hour := got.Schedules[0], got.Schedules[1]
	if night.Keyname != "nightly" || night.Timezone != "Europe/Paris" || night.Missed != "skip" || !night.Enabled ||
		night.LastTask != "" || night.TaskURL != "" || night.LastDue != nil {
		t.Fatalf("nightly: %+v", night)
	}
	// 03:00 in Paris is 02:00 UTC in November.
	if got, want := strings.Join(night.NextRuns, " "), "2026-11-23T02:00:00Z 2026-11-24T02:00:00Z 2026-11-25T02:00:00Z"; got != want {
		t.Fatalf("nightly next runs: %s, want %s", got, want)
	}
	if hour.Keyname != "hourly" || hour.Timezone != "UTC" || hour.Missed != "run_once" || !hour.DryRun ||
		hour.LastResult != tasks.RunSubmitted || hour.LastTask != handle || handle == "" ||
		hour.LastDue == nil || *hour.LastDue != "2026-11-22T09:00:00Z" {
		t.Fatalf("hourly: %+v (task %s)", hour, handle)
	}
	if got, want := hour.TaskURL, e.srv.URL+"/api/tasks/"+handle+"/"; got != want {
		t.Fatalf("task_url: %s, want %s", got, want)
	}
	// The last run was due an hour ago: the next one is now.
	if got, want := strings.Join(hour.NextRuns, " "), "2026-11-22T10:00:00Z 2026-11-22T11:00:00Z 2026-11-22T12:00:00Z"; got != want {
		t.Fatalf("hourly next runs: %s, want %s", got, want)
	}
	if r := e.get(strings.TrimPrefix(hour.TaskURL, e.srv.URL), adminCred); r.status != http.StatusOK {
		t.Fatalf("task_url: status %d (%s)", r.status, r.body)
	}

	wantError(t, e.get("/api/schedules/", noCred), http.StatusUnauthorized, "authentication required")
	wantError(t, e.get("/api/schedules/", e.key("nodata", keySpec{perms: []string{"p_data_read"}})), http.StatusForbidden,
		"permission denied: this request needs p_data_access")
	wantError(t, e.get("/api/schedules/", e.key("noread", keySpec{perms: []string{"p_data_access"}})), http.StatusForbidden,
		"permission denied: this request needs p_data_read")
	reader := e.key("reader", keySpec{perms: []string{"p_data_access", "p_data_read"}})
	wantJSON(t, e.get("/api/schedules/", reader), http.StatusOK, &got)
	if got.Count != 2 {
		t.Fatalf("reader sees %d schedules, want 2", got.Count)
	}
}

// TestScheduleRunActsAsItsAuthor: a schedule a user wrote runs as that user, whose
// task is then visible to that user (and to callers holding every permission), not
// to another user who may run pipelines.
func TestScheduleRunActsAsItsAuthor(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRunner: true})
	e.load(`
- {classname: _schema, keyname: box, name: {dataformat: string}}
- {classname: _pipeline, keyname: tidy, content: "- field_set: ['', name, x]"}
- {classname: _role, keyname: schedulers, permissions: [p_data_access, p_data_read, p_pipeline_admin, p_pipeline_run], users: [alice, bob]}
`)
	alice, bob := e.user("alice", true), e.user("bob", true)
	r := e.post("/api/instances/_schedule/", alice, []byte(`{"keyname": "mine", "pipeline": "tidy", "schemas": ["box"],
		"cron": "@every 1h", "dryrun": true, "author": "system"}`))
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if got := e.queryString("SELECT data ->> 'author' FROM instances WHERE classname = '_schedule' AND keyname = 'mine'"); got != "user:alice" {
		t.Fatalf("author: %s, want user:alice (the writer, whatever the body says)", got)
	}
	s := tasks.NewScheduler(e.runner, tasks.SchedulerOptions{})
	for _, at := range []time.Duration{-2 * time.Hour, -time.Hour} {
		if _, err := s.Tick(context.Background(), fixedNow.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
	handle := e.queryString("SELECT handle FROM tasks WHERE owner_type = 'schedule' AND owner_id = 'mine'")
	task := object(t, e.get("/api/tasks/"+handle+"/", alice), http.StatusOK)
	if task["owner_type"] != "schedule" || task["owner_id"] != "mine" || task["dryrun"] != true {
		t.Fatalf("task: %v", task)
	}
	wantError(t, e.get("/api/tasks/"+handle+"/", bob), http.StatusNotFound, "task not found")
	if r := e.get("/api/tasks/"+handle+"/", adminCred); r.status != http.StatusOK {
		t.Fatalf("admin: %d", r.status)
	}
}
