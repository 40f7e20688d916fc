package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// TestTextOrderIsByteOrder: lists sorted by text (instances by keyname or
// displayname, page after page; schema names; permissions; configuration) come in
// the bytes' order, as SQLite compares text, on a PostgreSQL database whose own
// collation orders by language rules (ICU's root locale: a < ä < B < Z, "_" and "-"
// before digits), as a production database created with en_US.UTF-8 does.
func TestTextOrderIsByteOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testkit.Open(t, testkit.NewAddressCollated(t, "order.db"), testkit.Options{})
	if testkit.Postgres() {
		// The database's collation really is not byte order, or the test proves nothing.
		if got := testkit.QueryString(t, db, "SELECT CAST('a' < 'B' AND 'a_b' < 'a0' AS text)"); got != "true" {
			t.Fatalf("the test database compares text by bytes: 'a' < 'B' and 'a_b' < 'a0' is %s", got)
		}
	}
	keys := []string{"B", "_x", "a", "Z", "ä", "Ä", "b", "a0", "a_b", "a-c", "z", "A1"}
	var doc strings.Builder
	doc.WriteString("- {classname: _schema, keyname: rack}\n")
	for i, k := range keys {
		// Displaynames in another order than keynames.
		fmt.Fprintf(&doc, "- {classname: rack, keyname: %q, displayname: %q}\n", k, keys[len(keys)-1-i]+" "+k)
	}
	for _, s := range []string{"a0", "a_b", "b9", "b_"} {
		fmt.Fprintf(&doc, "- {classname: _schema, keyname: %s}\n", s)
	}
	perms := []string{"B", "_x", "a", "Z", "p0", "p.x", "p-x", "p_x"}
	for _, p := range perms {
		fmt.Fprintf(&doc, "- {classname: _permission, keyname: %q}\n", p)
	}
	mustLoad(t, db, doc.String(), store.LoadOptions{})

	s, err := db.Schema(ctx, "rack")
	if err != nil {
		t.Fatal(err)
	}
	for _, sort := range []string{"keyname", "-keyname", "displayname", "-displayname"} {
		col, desc := strings.CutPrefix(sort, "-")
		var want []string
		for i, k := range keys {
			if col == "keyname" {
				want = append(want, k)
			} else {
				want = append(want, keys[len(keys)-1-i]+" "+k)
			}
		}
		slices.Sort(want) // Go compares strings by their bytes, as SQLite does
		if desc {
			slices.Reverse(want)
		}
		// The whole list, then pages of 5.
		for _, size := range []int{len(keys), 5} {
			var got []string
			for off := 0; off < len(keys); off += size {
				res, err := db.ListInstances(ctx, s, store.ListQuery{Sort: sort, Offset: off, Limit: size})
				if err != nil {
					t.Fatalf("sort %s: %v", sort, err)
				}
				for _, in := range res.Instances {
					if col == "keyname" {
						got = append(got, in.Keyname)
					} else {
						got = append(got, in.Displayname)
					}
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("sort=%s in pages of %d:\n got %q\nwant %q", sort, size, got, want)
			}
		}
	}

	names, err := db.SchemaNames(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSorted(names) || !slices.Contains(names, "a_b") {
		t.Errorf("schema names not in byte order: %q", names)
	}
	ps, err := db.Permissions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var pnames []string
	for _, p := range ps {
		pnames = append(pnames, p.Keyname)
	}
	if !slices.IsSorted(pnames) || !slices.Contains(pnames, "_x") {
		t.Errorf("permissions not in byte order: %q", pnames)
	}
	cfg, err := db.Config(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSortedFunc(cfg, func(a, b store.ConfigEntry) int { return strings.Compare(a.Keyname, b.Keyname) }) {
		t.Errorf("configuration not in byte order: %+v", cfg)
	}
}
