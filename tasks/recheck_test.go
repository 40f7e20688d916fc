package tasks_test

import (
	"context"
	"strings"
	"testing"

	"dataservice/tasks"
)

// TestCredentialRecheckedBetweenBatches: a key made read-only before its task starts,
// or disabled between two batches, stops the task with a clear error.
func TestCredentialRecheckedBetweenBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name, change, want string
		afterBatch         bool
	}{
		{"read-only before the start", `{classname: _apikey, keyname: rk, _action: update, is_readonly: true}`, "API key rk is now read-only", false},
		{"disabled between batches", `{classname: _apikey, keyname: rk, _action: disable}`, "API key rk is no longer valid", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := newDB(t)
			addPipeline(t, db, "marker", markerPipeline, "")
			insertRows(t, db, "host", markerRows(30))
			mustLoad(t, db, `{classname: _apikey, keyname: rk, is_readonly: false, permissions: ["role:role_admin"]}`)
			auth, _, err := db.KeyAuth(ctx, "rk")
			if err != nil {
				t.Fatal(err)
			}
			committed := 0
			o := tasks.Options{BatchSize: 10, OnProcessed: func(n int) { committed += n }}
			if tc.afterBatch {
				o.AfterBatch = func(string, int) error {
					mustLoad(t, db, tc.change)
					return nil
				}
			}
			r := newRunner(t, db, o)
			h := submit(t, r, tasks.Params{Pipeline: "marker", Schemas: []string{"host"}, Auth: auth})
			if !tc.afterBatch {
				mustLoad(t, db, tc.change)
			}
			task := runOne(t, r, h)
			if task.Status != tasks.StatusFailed || task.Error == nil || !strings.Contains(*task.Error, tc.want) {
				t.Fatalf("task: %s %v, want failed with %q", task.Status, task.Error, tc.want)
			}
			want := 0
			if tc.afterBatch {
				// The first batch ran before the key was disabled: 10 instances, or fewer
				// when it reached its time bound first (a loaded machine).
				if committed < 1 || committed > 10 {
					t.Fatalf("the first batch committed %d instances, want 1 to 10", committed)
				}
				want = committed
			}
			if got := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'host' AND CAST(data AS TEXT) LIKE '%X%'"); got != want {
				t.Fatalf("instances changed: %d, want %d", got, want)
			}
		})
	}
}
