package store_test

import (
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

const renameDoc = `
- {classname: _schema, keyname: vlan, subnets: {dataformat: schema, dataformat_ext: ipam_subnet, cardinal_max: 0}}
- {classname: ipam_subnet, keyname: 10.1.0.0/16}
- {classname: ipam_subnet, keyname: 10.2.0.0/16}
- {classname: vlan, keyname: v1, subnets: [10.1.0.0/16, 10.2.0.0/16]}
- {classname: vlan, keyname: v2, subnets: [10.2.0.0/16]}
- {classname: ipam_ip, displayname: 10.1.0.5, subnet: 10.1.0.0/16}
- {classname: ipam_vlan, keyname: l1, vlan_id: 10, subnet: [10.1.0.0/16]}
`

// rename renames cls/from to to in one transaction, committed when it succeeds.
func rename(tb testing.TB, db *store.DB, cls, from, to string) (*store.RenameReport, error) {
	tb.Helper()
	return testkit.Rename(tb, db, "user:renamer", cls, from, to)
}

func TestRename(t *testing.T) {
	t.Parallel()
	t.Run("references in every schema follow the new keyname", func(t *testing.T) {
		db := newTestDB(t)
		mustLoad(t, db, renameDoc, store.LoadOptions{})
		rep, err := rename(t, db, "ipam_subnet", "10.1.0.0/16", "10.9.0.0/16")
		if err != nil {
			t.Fatalf("rename: %v", err)
		}
		if got, want := rep.References, 3; got != want {
			t.Fatalf("references: got %d, want %d", got, want)
		}
		absent(t, db, "ipam_subnet", "10.1.0.0/16")
		instance(t, db, "ipam_subnet", "10.9.0.0/16")
		for _, c := range []struct{ cls, key, field, want string }{
			{"vlan", "v1", "subnets", "[]interface {}([10.9.0.0/16 10.2.0.0/16])"},
			{"vlan", "v2", "subnets", "[]interface {}([10.2.0.0/16])"},
			{"ipam_ip", "0a010005", "subnet", "string(10.9.0.0/16)"},
			{"ipam_vlan", "l1", "subnet", "[]interface {}([10.9.0.0/16])"},
		} {
			if got := fmtValue(instance(t, db, c.cls, c.key).Data[c.field]); got != c.want {
				t.Fatalf("%s %s %s: got %s, want %s", c.cls, c.key, c.field, got, c.want)
			}
		}
		if got, want := queryString(t, db, "SELECT action || ' ' || author FROM revisions WHERE keyname = '10.9.0.0/16'"), "rename user:renamer"; got != want {
			t.Fatalf("rename revision: got %s, want %s", got, want)
		}
		if got, want := actions(revisions(t, db, "v1")), "create,update"; got != want {
			t.Fatalf("v1 revisions: got %s, want %s", got, want)
		}
	})
	tests := []struct{ name, to, want string }{
		{"existing keyname", "10.2.0.0/16", "already exists"},
		{"keyname its mode refuses", "10.9.0.1/16", "not valid"},
		{"keyname with a space", "a b", "not valid"},
	}
	for _, tt := range tests {
		t.Run("rename to an "+tt.name+" fails and changes nothing", func(t *testing.T) {
			db := newTestDB(t)
			mustLoad(t, db, renameDoc, store.LoadOptions{})
			before := queryString(t, db, "SELECT string_agg(keyname || '=' || CAST(data AS TEXT), ';' ORDER BY id) FROM instances")
			revs := queryInt(t, db, "SELECT count(*) FROM revisions")
			_, err := rename(t, db, "ipam_subnet", "10.1.0.0/16", tt.to)
			if err == nil {
				t.Fatal("rename: got no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
			if got := queryString(t, db, "SELECT string_agg(keyname || '=' || CAST(data AS TEXT), ';' ORDER BY id) FROM instances"); got != before {
				t.Fatalf("instances changed:\n%s\nwas:\n%s", got, before)
			}
			if got, want := queryInt(t, db, "SELECT count(*) FROM revisions"), revs; got != want {
				t.Fatalf("revisions: got %d, want %d", got, want)
			}
		})
	}
	t.Run("rename to the same keyname does nothing", func(t *testing.T) {
		db := newTestDB(t)
		mustLoad(t, db, renameDoc, store.LoadOptions{})
		rep, err := rename(t, db, "vlan", "v2", "v2")
		if err != nil || rep.References != 0 {
			t.Fatalf("rename: %+v %v", rep, err)
		}
	})
}
