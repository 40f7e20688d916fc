package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"dataservice/store"
	"dataservice/store/model"
)

// scheduleDB is a database with a schema and a pipeline for schedules to name.
func scheduleDB(t *testing.T) *store.DB {
	t.Helper()
	db := newTestDB(t)
	mustLoad(t, db, `
- classname: _schema
  keyname: host
  name: {dataformat: string}
- classname: _pipeline
  keyname: tidy
  content: "- field_set: ['', name, x]"
`, store.LoadOptions{})
	return db
}

// applySchedule creates a schedule with data through Apply, as the console does.
func applySchedule(t *testing.T, db *store.DB, key string, data map[string]any) error {
	t.Helper()
	ctx := context.Background()
	s, err := db.Schema(ctx, "_schedule")
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Apply(ctx, store.Write{Schema: s, Action: model.ActionCreate,
		New: &store.Instance{Classname: "_schedule", Keyname: key, IsEnabled: true, Data: data}},
		store.ApplyOptions{Auth: model.SystemAuth()})
	return err
}

// TestScheduleValidationListsEveryProblem: a schedule with a bad cron, an unknown
// zone, an unknown policy, pipeline and schema is refused with one problem for each,
// and nothing is written.
func TestScheduleValidationListsEveryProblem(t *testing.T) {
	t.Parallel()
	db := scheduleDB(t)
	err := applySchedule(t, db, "bad", map[string]any{"pipeline": "nope", "schemas": []any{"host", "ghost", "_user", "_apikey"},
		"cron": "61 * * * *", "timezone": "Mars/Olympus", "missed": "later"})
	if err == nil {
		t.Fatal("a bad schedule was accepted")
	}
	var got []string
	for _, p := range store.ErrorProblems(err) {
		got = append(got, p.Field+": "+p.Message)
	}
	want := []string{
		`pipeline: unknown pipeline "nope"`,
		`schemas: unknown schema "ghost"`,
		`schemas: schema "_apikey" cannot be run (built-in class)`,
		`timezone: unknown time zone "Mars/Olympus": name an IANA zone such as Europe/Paris or UTC`,
		`missed: invalid missed-run policy "later": run_once or skip`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = '_schedule'"); n != 0 {
		t.Fatalf("schedules written: %d", n)
	}

	// A huge expression is quoted in bounds, the parser's message too.
	huge := "* * " + strings.Repeat("7,", 50000) + "7 * * * *"
	err = applySchedule(t, db, "bad", map[string]any{"pipeline": "tidy", "schemas": []any{"host"}, "cron": huge})
	if msg := store.ErrorMessage(err); !strings.HasPrefix(msg, "invalid cron expression") || len(msg) > 600 {
		t.Fatalf("message of %d bytes: %.200s", len(msg), msg)
	}

	// A field's own refusal (a missing cron) comes with the others.
	err = applySchedule(t, db, "bad", map[string]any{"pipeline": "tidy", "schemas": []any{"host"}, "timezone": "Nowhere"})
	var fields []string
	for _, p := range store.ErrorProblems(err) {
		fields = append(fields, p.Field)
	}
	if got, want := strings.Join(fields, ","), "cron,timezone"; got != want {
		t.Fatalf("fields refused: %s, want %s (%v)", got, want, err)
	}

	for _, tc := range []struct{ cron, tz, want string }{
		{"61 * * * *", "", `cron: invalid cron expression "61 * * * *": end of range (61) above maximum (59): 61`},
		{"* * *", "UTC", `cron: invalid cron expression "* * *": expected 5 to 6 fields, found 3: [* * *]`},
		{"@every 500ms", "UTC", `cron: invalid cron expression "@every 500ms": @every needs at least 1s`},
		{"@every soon", "UTC", `cron: invalid cron expression "@every soon": @every needs a duration such as 90s, 15m or 2h`},
		{"@fortnightly", "UTC", `cron: invalid cron expression "@fortnightly": unrecognized descriptor: @fortnightly`},
		{"CRON_TZ=Asia/Tokyo 0 3 * * *", "UTC", `cron: invalid cron expression "CRON_TZ=Asia/Tokyo 0 3 * * *": set the zone in the timezone field, not in the expression`},
		{"0 0 31 2 *", "UTC", `cron: invalid cron expression "0 0 31 2 *": it never falls due`},
		{"0 3 * * *", "Local", `timezone: unknown time zone "Local": name an IANA zone such as Europe/Paris (Local differs between nodes)`},
	} {
		err := applySchedule(t, db, "bad", map[string]any{"pipeline": "tidy", "schemas": []any{"host"}, "cron": tc.cron, "timezone": tc.tz})
		var got []string
		for _, p := range store.ErrorProblems(err) {
			got = append(got, p.Field+": "+p.Message)
		}
		if strings.Join(got, "\n") != tc.want {
			t.Errorf("cron %q in %q: %q, want %q", tc.cron, tc.tz, got, tc.want)
		}
	}
}

// TestScheduleValidationAccepts: the accepted forms, in a load that creates the
// pipeline the schedule names.
func TestScheduleValidationAccepts(t *testing.T) {
	t.Parallel()
	db := scheduleDB(t)
	for _, tc := range []struct{ key, cron, tz string }{
		{"weekdays", "0 3 * * 1-5", "Europe/Paris"},
		{"seconds", "*/10 * * * * *", ""},
		{"hourly", "@hourly", "America/New_York"},
		{"every", "@every 1m30s", "UTC"},
	} {
		if err := applySchedule(t, db, tc.key, map[string]any{"pipeline": "tidy", "schemas": []any{"host", "_user"},
			"cron": tc.cron, "timezone": tc.tz}); err != nil {
			t.Errorf("%s (%s): %v", tc.key, tc.cron, err)
		}
	}
	res := load(t, db, `
- classname: _pipeline
  keyname: fresh
  content: "- field_set: ['', name, y]"
- classname: _schedule
  keyname: withfresh
  pipeline: fresh
  schemas: host
  cron: "0 0 * * *"
`, store.LoadOptions{})
	if res.Errors != 0 {
		t.Fatalf("load: %s", messages(res))
	}
	in := instance(t, db, "_schedule", "withfresh")
	if got, want := store.ScheduleOf(in).Missed, model.MissedRunOnce; got != want {
		t.Fatalf("missed: %v, want %v (the default)", got, want)
	}
	if got, want := in.Data["author"], "system"; got != want {
		t.Fatalf("author: %v, want %v", got, want)
	}
	sc := store.ScheduleOf(instance(t, db, "_schedule", "weekdays"))
	cs, err := sc.Parse()
	if err != nil {
		t.Fatal(err)
	}
	// Friday 2026-03-27 12:00 UTC: the next 03:00 Paris weekdays are Monday 30 March
	// (after the switch to summer time: 01:00 UTC) and the days after.
	var got []string
	for _, n := range cs.NextTimes(time.Date(2026, 3, 27, 12, 0, 0, 0, time.UTC), 3) {
		got = append(got, n.UTC().Format(time.RFC3339))
	}
	if want := "2026-03-30T01:00:00Z 2026-03-31T01:00:00Z 2026-04-01T01:00:00Z"; strings.Join(got, " ") != want {
		t.Fatalf("next times: %s, want %s", strings.Join(got, " "), want)
	}
}

// TestScheduleValidationOnLoad: a load refuses a bad schedule entry with its messages.
func TestScheduleValidationOnLoad(t *testing.T) {
	t.Parallel()
	db := scheduleDB(t)
	res := load(t, db, `
- classname: _schedule
  keyname: bad
  pipeline: tidy
  schemas: host
  cron: "every day"
`, store.LoadOptions{})
	if res.Errors != 1 || !strings.Contains(messages(res), `invalid cron expression "every day"`) {
		t.Fatalf("load: errors %d: %s", res.Errors, messages(res))
	}
}
