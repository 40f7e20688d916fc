package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// TestFieldValueCountsCountsTheInstancesHoldingEachField: per field, the instances of
// the class holding a value (a list, a false and a zero included), over more fields than
// one statement covers, and none of another class's.
func TestFieldValueCountsCountsTheInstancesHoldingEachField(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	var sb strings.Builder
	sb.WriteString("- classname: _schema\n  keyname: wide\n")
	const nFields = 130
	for i := range nFields {
		fmt.Fprintf(&sb, "  f%03d: {dataformat: string}\n", i)
	}
	sb.WriteString("  tags: {dataformat: string, cardinal_max: 0}\n  ok: {dataformat: boolean}\n  n: {dataformat: int}\n")
	sb.WriteString("- {classname: _schema, keyname: other, f000: {dataformat: string}}\n")
	mustLoad(t, db, sb.String(), store.LoadOptions{})
	var rows []testkit.Row
	for i := range 7 {
		data := map[string]any{"f000": "x"}
		if i < 3 {
			data["f129"] = "y"
			data["tags"] = []any{"a", "b"}
		}
		if i < 2 {
			data["ok"], data["n"] = false, 0
		}
		rows = append(rows, testkit.Row{Keyname: fmt.Sprint("w", i), Enabled: true, Data: data})
	}
	testkit.InsertInstances(t, db, "wide", rows)
	testkit.InsertInstances(t, db, "other", []testkit.Row{{Keyname: "o", Enabled: true, Data: map[string]any{"f000": "z"}}})

	fields := []string{"tags", "ok", "n"}
	for i := range nFields {
		fields = append(fields, fmt.Sprintf("f%03d", i))
	}
	got, err := db.FieldValueCounts(context.Background(), "wide", fields)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"f000": 7, "f129": 3, "tags": 3, "ok": 2, "n": 2, "f064": 0}
	for f, n := range want {
		if got[f] != n {
			t.Errorf("%s: %d instances, want %d", f, got[f], n)
		}
	}
	if len(got) != len(fields) {
		t.Errorf("%d counts for %d fields", len(got), len(fields))
	}
	if _, err := db.FieldValueCount(context.Background(), "wide", `x"; DROP`); err == nil {
		t.Error("an invalid field name was counted")
	}
}
