package store_test

import (
	"context"
	"path/filepath"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// dependentLoad is a load whose later entries depend on earlier ones: schemas it
// defines, instances it creates, updates, renames, deletes and references, a forward
// reference, collected addresses and an instance in use.
const dependentLoad = serverSchema + `
- {classname: _schema, keyname: rack, room: {dataformat: string}, peer: {dataformat: schema, dataformat_ext: rack}}
- {classname: site, keyname: s1, city: Paris}
- {classname: server, keyname: a, hostname: a.example, port: 22, mgmt_ip: 10.0.0.1, site: s1}
- {classname: server, keyname: a, hostname: a.example, port: 22, mgmt_ip: 10.0.0.1, site: s1}
- {classname: server, keyname: a, _action: update, port: 80}
- {classname: server, keyname: b, site: s2, mgmt_ip: 10.0.0.1}
- {classname: site, keyname: s2, city: Lyon}
- {classname: site, keyname: s1, _action: delete}
- {classname: server, keyname: a, _action: disable}
- {classname: server, keyname: c, hostname: c}
- {classname: server, keyname: c, _action: delete}
- {classname: server, keyname: c, _action: delete}
- {classname: server, keyname: c, _action: update, port: 1}
- {classname: server, keyname: d, site: s3}
- {classname: rack, keyname: r1, room: R}
- {classname: rack, keyname: r2, peer: r1}
- {classname: rack, keyname: r1, _action: update, room: R2}
- {classname: rack, keyname: r3, peer: r9}
- {classname: _schema, keyname: rack, _action: update, room: {dataformat: int}}
- {classname: rack, keyname: r4, room: 5}
- {classname: rack, keyname: r5, room: five}
- {classname: server, keyname: e, mgmt_ip: 10.0.0.9}
- {classname: ipam_ip, keyname: 10.0.0.9, _action: update, is_enabled: false}
`

// TestDryRunLoadInBatches: a dry run split into rolled-back batches reports what a
// real load of the same entries reports (on a copy of the file), whatever the batch
// size, and writes nothing.
func TestDryRunLoadInBatches(t *testing.T) {
	ctx := context.Background()
	db := newTestDB(t)
	before := queryInt(t, db, "SELECT count(*) FROM instances")
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	if err := db.Backup(ctx, copyPath); err != nil {
		t.Fatal(err)
	}
	real := testkit.Open(t, copyPath, testkit.Options{})
	want := load(t, real, dependentLoad, store.LoadOptions{})
	if want.Created == 0 || want.Updated == 0 || want.Unchanged == 0 || want.Deleted == 0 || want.Disabled == 0 || want.Errors == 0 {
		t.Fatalf("the load does not exercise every outcome: %s\n%s", counts(want), messages(want))
	}
	for _, size := range []int{1, 2, 5, 1000} {
		got := load(t, db, dependentLoad, store.LoadOptions{DryRun: true, BatchSize: size})
		if counts(got) != counts(want) || messages(got) != messages(want) {
			t.Errorf("dry run in batches of %d:\n%s\n%s\nwant (real load):\n%s\n%s", size, counts(got), messages(got), counts(want), messages(want))
		}
		if n := queryInt(t, db, "SELECT count(*) FROM instances"); n != before {
			t.Fatalf("dry run in batches of %d left %d instances, want %d", size, n, before)
		}
		absent(t, db, "_schema", "rack")
	}
}

