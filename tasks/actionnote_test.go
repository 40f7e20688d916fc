package tasks_test

import (
	"strings"
	"testing"

	"dataservice/tasks"
)

// When a rule sets _action to disable (or enable, or delete), the other changes its
// rules made are not applied; the change sample says so for each entry, in a dry run
// and in a real run alike.
func TestActionNotesUnappliedFieldChanges(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	mustLoad(t, db, `
- {classname: _schema, keyname: box, word: {dataformat: string}, size: {dataformat: int}, when: {dataformat: date}}
- {classname: box, keyname: b1, word: quiet, size: 1}
- {classname: box, keyname: b2, word: keep, size: 2}
`)
	addPipeline(t, db, "retire", `
- set_condition: [old, field_match, word, '^quiet$']
- field_set: [old, word, LOUD]
- field_set: [old, size, 99]
- field_set: [old, _action, disable]
- field_set: ['!old', _action, disable]
`, "")
	r := newRunner(t, db, tasks.Options{})
	for _, dry := range []bool{true, false} {
		res := mustSucceed(t, runPipeline(t, r, "retire", dry, "box"))
		notes := map[string]string{}
		for _, c := range res.Changes {
			notes[c.Keyname] = c.Action + "|" + c.Note
		}
		if got, want := notes["b1"], "disable|disabled; 2 field changes not applied"; got != want {
			t.Fatalf("dry run %v: b1 change %q, want %q (changes %+v)", dry, got, want, res.Changes)
		}
		if got, want := notes["b2"], "disable|"; got != want {
			t.Fatalf("dry run %v: b2 change %q, want %q: it had no other change", dry, got, want)
		}
	}
	rows := instanceRows(t, db, "box")
	if b1 := rows["b1"]; b1.Enabled != 0 || !strings.Contains(b1.Data, `"word":"quiet"`) || !strings.Contains(b1.Data, `"size":1`) {
		t.Fatalf("b1 after the run: %+v, want disabled with its word kept", b1)
	}
}

// A pipeline run's failed instance names every bad value its rules left, in the
// schema's field order.
func TestPipelineFailureNamesEveryBadValue(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	mustLoad(t, db, `
- {classname: _schema, keyname: box, word: {dataformat: string}, size: {dataformat: int}, when: {dataformat: date}}
- {classname: box, keyname: b1, word: quiet, size: 1}
`)
	addPipeline(t, db, "spoil", `
- field_set: ['', when, soon]
- field_set: ['', size, big]
`, "")
	r := newRunner(t, db, tasks.Options{})
	res := mustSucceed(t, runPipeline(t, r, "spoil", true, "box"))
	if got, want := strings.Join(res.ErrorMessages, " | "), `box b1: field size: "big" is not an integer; field when: "soon" is not a date (YYYY-MM-DD)`; got != want {
		t.Fatalf("messages %q, want %q", got, want)
	}
}
