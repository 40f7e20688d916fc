package store

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// The address queries of the IPAM pages must stay index range scans on the hex
// keynames, whatever the number of addresses: their query plans say so.
func TestIPRangeQueriesUseTheKeynameIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "plan.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		"SELECT count(*) FROM instances i WHERE " + db.ipKeyRange(),
		"SELECT " + instanceColsI + " FROM instances i WHERE " + db.ipKeyRange() + " ORDER BY i.keyname LIMIT 10",
	} {
		rows, err := db.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, "0a000000", "0a0000ff")
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		got := strings.Join(plan, "; ")
		if !strings.Contains(got, "INDEX sqlite_autoindex_instances_1 (classname=? AND keyname>? AND keyname<?)") ||
			strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("%s\nplan: %s", q, got)
		}
	}
}
