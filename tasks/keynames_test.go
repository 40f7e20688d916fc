package tasks_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"

	"dataservice/store/model"
	"dataservice/tasks"
)

// TestRunOverNamedInstances: a run given Keynames changes those instances only (a
// name with no instance is passed over), under the handle it was given.
func TestRunOverNamedInstances(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	mustLoad(t, db, `
- {classname: host, keyname: a, note: x}
- {classname: host, keyname: b, note: x}
- {classname: host, keyname: c, note: x}
`)
	addPipeline(t, db, "mark", "- field_set: [\"\", note, marked]\n", "")
	r := newRunner(t, db, tasks.Options{})
	handle := uuid.NewString()
	got := submit(t, r, tasks.Params{Pipeline: "mark", Schemas: []string{"host"}, Keynames: []string{"c", "gone", "a"},
		Handle: handle})
	if got != handle {
		t.Fatalf("handle %s, want the one given, %s", got, handle)
	}
	res := mustSucceed(t, runOne(t, r, handle))
	if res.Scanned != 2 || res.Updated != 2 {
		t.Fatalf("scanned %d, updated %d; want 2 and 2", res.Scanned, res.Updated)
	}
	rows := instanceRows(t, db, "host")
	for key, want := range map[string]string{"a": "marked", "b": "x", "c": "marked"} {
		if got := rows[key].Data; !strings.Contains(got, `"note":"`+want+`"`) {
			t.Errorf("host %s: data %s, want note %s", key, got, want)
		}
	}
	if got := getTask(t, r, handle).Progress.Total; got != 3 {
		t.Errorf("progress total %d, want 3 (the names given)", got)
	}

	t.Run("refuses names over several schemas and a handle that is not a uuid", func(t *testing.T) {
		for _, p := range []tasks.Params{
			{Pipeline: "mark", Schemas: []string{"host", "site"}, Keynames: []string{"a"}},
			{Pipeline: "mark", Schemas: []string{"host"}, Handle: "not-a-uuid"},
		} {
			p.OwnerType, p.OwnerID, p.Auth = "api", "system", model.SystemAuth()
			_, err := r.Submit(context.Background(), p)
			if err == nil || !(strings.Contains(err.Error(), "exactly one schema") || strings.Contains(err.Error(), "not a uuid")) {
				t.Fatalf("Submit(%+v) = %v, want a refusal", p, err)
			}
		}
	})
}
