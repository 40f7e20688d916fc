package store_test

import (
	"context"
	"testing"

	"dataservice/store"
	"dataservice/store/model"
)

// TestReferenceCountsAndHolds: what refers to an instance, counted per class and field
// (every one, past any listing bound), and the list filtered to one field's value.
func TestReferenceCountsAndHolds(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	ctx := context.Background()
	mustLoad(t, db, `
- {classname: _schema, keyname: site, name: {dataformat: string}}
- {classname: _schema, keyname: rack, site: {dataformat: schema, dataformat_ext: site}, spare: {dataformat: schema, dataformat_ext: site, cardinal_max: 0}, code: {dataformat: secret}}
- {classname: _schema, keyname: cable, site: {dataformat: schema, dataformat_ext: site}}
- {classname: site, keyname: paris}
- {classname: site, keyname: paris2}
- {classname: rack, keyname: r1, site: paris}
- {classname: rack, keyname: r2, site: paris2, spare: [paris2, paris]}
- {classname: rack, keyname: r3, site: paris}
- {classname: cable, keyname: c1, site: paris}
- {classname: cable, keyname: c2, site: paris2}
`, store.LoadOptions{})
	counts, err := db.ReferenceCounts(ctx, "site", "paris")
	if err != nil {
		t.Fatal(err)
	}
	wantCounts := []store.ReferenceCount{{Classname: "cable", Field: "site", Count: 1}, {Classname: "rack", Field: "site", Count: 2},
		{Classname: "rack", Field: "spare", Count: 1}}
	if len(counts) != len(wantCounts) {
		t.Fatalf("reference counts: %+v, want %+v", counts, wantCounts)
	}
	for i := range wantCounts {
		if counts[i] != wantCounts[i] {
			t.Fatalf("reference count %d: %+v, want %+v", i, counts[i], wantCounts[i])
		}
	}
	if counts, err := db.ReferenceCounts(ctx, "site", "nowhere"); err != nil || len(counts) != 0 {
		t.Fatalf("references to nothing: %+v, %v", counts, err)
	}

	rack, err := db.Schema(ctx, "rack")
	if err != nil {
		t.Fatal(err)
	}
	keys := func(q store.ListQuery) (string, int) {
		t.Helper()
		res, err := db.ListInstances(ctx, rack, q)
		if err != nil {
			t.Fatalf("list %+v: %v", q, err)
		}
		got := ""
		for _, in := range res.Instances {
			got += in.Keyname + " "
		}
		return got, res.Count
	}
	for _, c := range []struct {
		name  string
		q     store.ListQuery
		want  string
		count int
	}{
		{"a scalar field holds the exact value, not a longer one", store.ListQuery{Holds: &store.FieldValue{Field: "site", Value: "paris"}, Limit: 10}, "r1 r3 ", 2},
		{"a list field holds one of its items", store.ListQuery{Holds: &store.FieldValue{Field: "spare", Value: "paris"}, Limit: 10}, "r2 ", 1},
		{"paged, the count is every match", store.ListQuery{Holds: &store.FieldValue{Field: "site", Value: "paris"}, Limit: 1}, "r1 ", 2},
		{"past the end", store.ListQuery{Holds: &store.FieldValue{Field: "site", Value: "paris"}, Limit: 10, Offset: 10}, "", 2},
		{"with a search", store.ListQuery{Search: "r3", Holds: &store.FieldValue{Field: "site", Value: "paris"}, Limit: 10}, "r3 ", 1},
		{"nothing holds it", store.ListQuery{Holds: &store.FieldValue{Field: "site", Value: "lyon"}, Limit: 10}, "", 0},
	} {
		if got, n := keys(c.q); got != c.want || n != c.count {
			t.Fatalf("%s: %q (count %d), want %q (count %d)", c.name, got, n, c.want, c.count)
		}
	}
	for _, bad := range []string{"nope", "code", "site') OR 1=1 --"} {
		_, err := db.ListInstances(ctx, rack, store.ListQuery{Holds: &store.FieldValue{Field: bad, Value: "paris"}, Limit: 10})
		if store.ErrorCode(err) != model.EInvalid {
			t.Fatalf("filter by field %q: %v, want invalid", bad, err)
		}
	}
}
