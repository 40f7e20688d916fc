package model_test

import (
	"strings"
	"testing"
	"time"

	"dataservice/store/model"
)

// TestCronDaylightSaving pins what docs/events.md says of summer time, as the cron
// parser computes it: a local time the spring change skips does not run that day; one
// the autumn change repeats runs twice.
func TestCronDaylightSaving(t *testing.T) {
	t.Parallel()
	paris, err := model.LoadZone("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := model.ParseCron("30 2 * * *", paris)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from time.Time
		want string
	}{
		// 29 March 2026: 02:00 becomes 03:00, so 02:30 does not exist that day.
		{time.Date(2026, 3, 28, 12, 0, 0, 0, paris), "2026-03-30T00:30:00Z 2026-03-31T00:30:00Z"},
		// 25 October 2026: 03:00 becomes 02:00 again, so 02:30 comes twice.
		{time.Date(2026, 10, 24, 12, 0, 0, 0, paris), "2026-10-25T00:30:00Z 2026-10-25T01:30:00Z"},
	} {
		var got []string
		for _, n := range cs.NextTimes(tc.from, 2) {
			got = append(got, n.UTC().Format(time.RFC3339))
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("after %s: %s, want %s", tc.from, strings.Join(got, " "), tc.want)
		}
	}
}
