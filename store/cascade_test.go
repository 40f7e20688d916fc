package store_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
)

// cascadeDoc has ipam_subnet instances referenced from several schemas, by single- and
// multi-valued `schema` fields, next to values that only look like the keyname (a
// string field, a reference to another schema holding the same text).
const cascadeDoc = `
- classname: _schema
  keyname: rack
  uplink: {dataformat: schema, dataformat_ext: ipam_subnet}
  nets: {dataformat: schema, dataformat_ext: ipam_subnet, cardinal_max: 0}
  label: {dataformat: string}
- classname: _schema
  keyname: tag
- classname: _schema
  keyname: zone
  subnet: {dataformat: schema, dataformat_ext: ipam_subnet, cardinal_max: 0}
  tag: {dataformat: schema, dataformat_ext: tag}
- {classname: tag, keyname: 10.1.0.0/16}
- {classname: ipam_subnet, keyname: 10.1.0.0/16, displayname: Head office, site: hq}
- {classname: ipam_subnet, keyname: 10.2.0.0/16}
- {classname: ipam_subnet, keyname: 10.3.0.0/16}
- {classname: rack, keyname: r1, uplink: 10.1.0.0/16, nets: [10.1.0.0/16, 10.2.0.0/16], label: 10.1.0.0/16}
- {classname: rack, keyname: r2, uplink: 10.2.0.0/16, nets: [10.2.0.0/16, 10.1.0.0/16, 10.3.0.0/16]}
- {classname: rack, keyname: r3, uplink: 10.3.0.0/16}
- {classname: zone, keyname: z1, subnet: [10.1.0.0/16], tag: 10.1.0.0/16}
- {classname: zone, keyname: z2, tag: 10.1.0.0/16}
- {classname: ipam_vlan, keyname: vl10, vlan_id: 10, subnet: [10.3.0.0/16, 10.1.0.0/16]}
- {classname: ipam_ip, displayname: 10.1.0.5, subnet: 10.1.0.0/16}
- {classname: ipam_ip, displayname: 10.2.0.5, subnet: 10.2.0.0/16}
`

// cascadeLater is the clock of writes made after the fixture is loaded, so a row the
// rename rewrites shows a new updated_at.
var cascadeLater = fixedNow.Add(time.Hour)

// cascadeDB is a database holding cascadeDoc, its later writes stamped cascadeLater.
func cascadeDB(t *testing.T) *store.DB {
	t.Helper()
	db := newTestDB(t)
	mustLoad(t, db, cascadeDoc, store.LoadOptions{Author: "user:loader"})
	db.Now = func() time.Time { return cascadeLater }
	return db
}

// cascadeDump renders every instance and revision row, so two dumps are equal exactly
// when nothing was written in between.
func cascadeDump(t *testing.T, db *store.DB) string {
	t.Helper()
	return queryString(t, db, `SELECT string_agg(r, ' / ' ORDER BY r) FROM (
		SELECT id || '|' || classname || '|' || keyname || '|' || displayname || '|' || is_enabled || '|' || CAST(data AS TEXT) ||
			'|' || created_at || '|' || updated_at AS r FROM instances
		UNION ALL
		SELECT 'rev ' || id || '|' || classname || '|' || keyname || '|' || action || '|' || author FROM revisions) dump`)
}

// cascadeRenameIn renames cls/from to to inside tx through the migration door mg
// (the cascading rename outside Apply) and returns the report.
func cascadeRenameIn(ctx context.Context, mg *store.Migrator, tx *store.Tx, cls, from, to string) (*store.Instance, *store.RenameReport, error) {
	s, err := tx.Schema(ctx, cls)
	if err != nil {
		return nil, nil, err
	}
	in, err := tx.Instance(ctx, cls, from)
	if err != nil {
		return nil, nil, err
	}
	rep, err := mg.Rename(ctx, tx, s, in, to)
	return in, rep, err
}

// cascadeField reads a stored field value rendered with its type.
func cascadeField(t *testing.T, db *store.DB, cls, key, field string) string {
	t.Helper()
	return fmtValue(instance(t, db, cls, key).Data[field])
}

func TestCascadingRename(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("every reference in every schema follows the new keyname", func(t *testing.T) {
		db := cascadeDB(t)
		oldID := instance(t, db, "ipam_subnet", "10.1.0.0/16").ID
		lastRev := queryInt(t, db, "SELECT max(id) FROM revisions")
		var rep *store.RenameReport
		var renamed *store.Instance
		err := db.WithTxAs(ctx, store.Revisions{Author: "user:renamer"}, func(tx *store.Tx) error {
			var err error
			renamed, rep, err = cascadeRenameIn(ctx, testkit.Migrator(t, db), tx, "ipam_subnet", "10.1.0.0/16", "10.9.0.0/16")
			return err
		})
		if err != nil {
			t.Fatalf("rename: %v", err)
		}
		if got, want := fmt.Sprintf("%s -> %s, %d references, errors %v", rep.From, rep.To, rep.References, rep.Errors),
			"10.1.0.0/16 -> 10.9.0.0/16, 6 references, errors []"; got != want {
			t.Fatalf("report = %s, want %s", got, want)
		}
		if got, want := renamed.Keyname, "10.9.0.0/16"; got != want {
			t.Fatalf("instance keyname after Rename = %q, want %q", got, want)
		}
		absent(t, db, "ipam_subnet", "10.1.0.0/16")
		sub := instance(t, db, "ipam_subnet", "10.9.0.0/16")
		if got, want := fmt.Sprintf("%d %s %s", sub.ID, sub.Displayname, fmtValue(sub.Data["site"])),
			fmt.Sprintf("%d Head office string(hq)", oldID); got != want {
			t.Fatalf("renamed subnet = %s, want %s (same row, same data)", got, want)
		}
		for _, c := range []struct{ cls, key, field, want string }{
			{"rack", "r1", "uplink", "string(10.9.0.0/16)"},
			{"rack", "r1", "nets", "[]interface {}([10.9.0.0/16 10.2.0.0/16])"},
			{"rack", "r1", "label", "string(10.1.0.0/16)"},
			{"rack", "r2", "uplink", "string(10.2.0.0/16)"},
			{"rack", "r2", "nets", "[]interface {}([10.2.0.0/16 10.9.0.0/16 10.3.0.0/16])"},
			{"rack", "r3", "uplink", "string(10.3.0.0/16)"},
			{"zone", "z1", "subnet", "[]interface {}([10.9.0.0/16])"},
			{"zone", "z1", "tag", "string(10.1.0.0/16)"},
			{"zone", "z2", "tag", "string(10.1.0.0/16)"},
			{"ipam_vlan", "vl10", "subnet", "[]interface {}([10.3.0.0/16 10.9.0.0/16])"},
			{"ipam_ip", "0a010005", "subnet", "string(10.9.0.0/16)"},
			{"ipam_ip", "0a020005", "subnet", "string(10.2.0.0/16)"},
		} {
			if got := cascadeField(t, db, c.cls, c.key, c.field); got != c.want {
				t.Fatalf("%s %s %s = %s, want %s", c.cls, c.key, c.field, got, c.want)
			}
		}
		instance(t, db, "tag", "10.1.0.0/16")
		if got, want := queryString(t, db, `SELECT string_agg(classname || ':' || keyname, ' ' ORDER BY classname, keyname)
			FROM instances WHERE updated_at = ?`, cascadeLater.Format(time.RFC3339)),
			"ipam_ip:0a010005 ipam_subnet:10.9.0.0/16 ipam_vlan:vl10 rack:r1 rack:r2 zone:z1"; got != want {
			t.Fatalf("rows written = %s, want %s", got, want)
		}
		t.Run("revision rows record the rename and each rewritten instance", func(t *testing.T) {
			rows, err := db.Reader().QueryContext(context.Background(), `SELECT classname || ':' || keyname || ':' || action || ':' || author
				FROM revisions WHERE id > ?`, lastRev)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var got []string
			for rows.Next() {
				var s string
				if err := rows.Scan(&s); err != nil {
					t.Fatal(err)
				}
				got = append(got, s)
			}
			sort.Strings(got)
			want := []string{"ipam_ip:0a010005:update:user:renamer", "ipam_subnet:10.9.0.0/16:rename:user:renamer",
				"ipam_vlan:vl10:update:user:renamer", "rack:r1:update:user:renamer", "rack:r2:update:user:renamer",
				"zone:z1:update:user:renamer"}
			if g, w := strings.Join(got, " "), strings.Join(want, " "); g != w {
				t.Fatalf("new revisions = %s, want %s", g, w)
			}
			revs := revisions(t, db, "10.9.0.0/16")
			if got, want := actions(revs), "rename"; got != want {
				t.Fatalf("revisions of 10.9.0.0/16 = %s, want %s", got, want)
			}
			for _, c := range []struct{ doc, want string }{
				{revs[0].Before, `"keyname":"10.1.0.0/16"`}, {revs[0].After, `"keyname":"10.9.0.0/16"`},
				{revs[0].Before, `"site":"hq"`}, {revs[0].After, `"site":"hq"`},
			} {
				if !strings.Contains(c.doc, c.want) {
					t.Fatalf("rename revision %s lacks %s", c.doc, c.want)
				}
			}
			r1 := revisions(t, db, "r1")
			if got, want := actions(r1), "create,update"; got != want {
				t.Fatalf("revisions of r1 = %s, want %s", got, want)
			}
			if !strings.Contains(r1[1].Before, `"uplink":"10.1.0.0/16"`) || !strings.Contains(r1[1].After, `"uplink":"10.9.0.0/16"`) {
				t.Fatalf("r1 update revision before %s after %s: want uplink 10.1.0.0/16 -> 10.9.0.0/16", r1[1].Before, r1[1].After)
			}
		})
	})

	t.Run("references are rewritten in the caller's transaction and roll back with it", func(t *testing.T) {
		db := cascadeDB(t)
		before := cascadeDump(t, db)
		errAbort := errors.New("abort")
		err := db.WithTx(ctx, func(tx *store.Tx) error {
			if _, _, err := cascadeRenameIn(ctx, testkit.Migrator(t, db), tx, "ipam_subnet", "10.1.0.0/16", "10.9.0.0/16"); err != nil {
				return err
			}
			r1, err := tx.Instance(ctx, "rack", "r1")
			if err != nil {
				return err
			}
			if got, want := fmtValue(r1.Data["uplink"]), "string(10.9.0.0/16)"; got != want {
				t.Errorf("inside the transaction r1 uplink = %s, want %s", got, want)
			}
			return errAbort
		})
		if !errors.Is(err, errAbort) {
			t.Fatalf("WithTx = %v, want the abort", err)
		}
		if after := cascadeDump(t, db); after != before {
			t.Fatalf("rolled-back rename left changes:\n%s\nwas:\n%s", after, before)
		}
	})

	refusals := []struct {
		name, cls, from, to, code string
	}{
		{"a subnet renamed to an existing subnet is refused as a conflict", "ipam_subnet", "10.1.0.0/16", "10.2.0.0/16", model.EConflict},
		{"a subnet renamed to an unaligned CIDR is refused as invalid", "ipam_subnet", "10.1.0.0/16", "10.1.0.1/16", model.EInvalid},
		{"a subnet renamed to free text is refused as invalid", "ipam_subnet", "10.1.0.0/16", "core-network", model.EInvalid},
		{"a subnet renamed to a non-canonical CIDR is refused as invalid", "ipam_subnet", "10.1.0.0/16", "10.01.0.0/16", model.EInvalid},
		{"a subnet renamed to an address without prefix is refused as invalid", "ipam_subnet", "10.1.0.0/16", "10.9.0.0", model.EInvalid},
		{"a subnet renamed to nothing is refused as invalid", "ipam_subnet", "10.1.0.0/16", "", model.EInvalid},
		{"an edit-mode instance renamed to a keyname with a space is refused as invalid", "rack", "r1", "r 1", model.EInvalid},
		{"an edit-mode instance renamed to an existing keyname is refused as a conflict", "rack", "r1", "r2", model.EConflict},
		{"a hexip instance renamed away from its address is refused as invalid", "ipam_ip", "0a010005", "0a010006", model.EInvalid},
		{"a hexip instance renamed to a dotted address is refused as invalid", "ipam_ip", "0a010005", "10.1.0.5", model.EInvalid},
	}
	for _, tt := range refusals {
		t.Run(tt.name+" and nothing changes", func(t *testing.T) {
			db := cascadeDB(t)
			before := cascadeDump(t, db)
			var in *store.Instance
			err := db.WithTx(ctx, func(tx *store.Tx) error {
				var err error
				in, _, err = cascadeRenameIn(ctx, testkit.Migrator(t, db), tx, tt.cls, tt.from, tt.to)
				return err
			})
			if got, want := store.ErrorCode(err), tt.code; got != want {
				t.Fatalf("error code = %q (%v), want %q", got, err, want)
			}
			if got, want := in.Keyname, tt.from; got != want {
				t.Fatalf("instance keyname after a refused rename = %q, want %q", got, want)
			}
			if after := cascadeDump(t, db); after != before {
				t.Fatalf("refused rename changed the data:\n%s\nwas:\n%s", after, before)
			}
		})
	}

	t.Run("a failure in the cascade undoes the rename and leaves the transaction usable", func(t *testing.T) {
		db := cascadeDB(t)
		if testkit.Postgres() {
			exec(t, db, `CREATE FUNCTION cascade_fail() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN RAISE EXCEPTION 'injected failure'; END $$`)
			exec(t, db, `CREATE TRIGGER cascade_fail BEFORE UPDATE ON instances FOR EACH ROW
				WHEN (NEW.classname = 'ipam_vlan') EXECUTE FUNCTION cascade_fail()`)
		} else {
			exec(t, db, `CREATE TRIGGER cascade_fail BEFORE UPDATE ON instances WHEN NEW.classname = 'ipam_vlan'
				BEGIN SELECT RAISE(ABORT, 'injected failure'); END`)
		}
		before := cascadeDump(t, db)
		var failed *store.Instance
		var second *store.RenameReport
		err := db.WithTx(ctx, func(tx *store.Tx) error {
			var err error
			failed, _, err = cascadeRenameIn(ctx, testkit.Migrator(t, db), tx, "ipam_subnet", "10.1.0.0/16", "10.9.0.0/16")
			if err == nil || !strings.Contains(err.Error(), "injected failure") {
				return fmt.Errorf("first rename: got %v, want the injected failure", err)
			}
			// ipam_vlan does not reference 10.2.0.0/16: this rename goes through.
			_, second, err = cascadeRenameIn(ctx, testkit.Migrator(t, db), tx, "ipam_subnet", "10.2.0.0/16", "10.8.0.0/16")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := failed.Keyname, "10.1.0.0/16"; got != want {
			t.Fatalf("instance keyname after the failed rename = %q, want %q", got, want)
		}
		if got, want := second.References, 4; got != want {
			t.Fatalf("second rename references = %d, want %d", got, want)
		}
		instance(t, db, "ipam_subnet", "10.1.0.0/16")
		absent(t, db, "ipam_subnet", "10.9.0.0/16")
		for _, c := range []struct{ cls, key, field, want string }{
			{"rack", "r1", "uplink", "string(10.1.0.0/16)"},
			{"rack", "r1", "nets", "[]interface {}([10.1.0.0/16 10.8.0.0/16])"},
			{"rack", "r2", "uplink", "string(10.8.0.0/16)"},
			{"ipam_ip", "0a020005", "subnet", "string(10.8.0.0/16)"},
			{"ipam_vlan", "vl10", "subnet", "[]interface {}([10.3.0.0/16 10.1.0.0/16])"},
		} {
			if got := cascadeField(t, db, c.cls, c.key, c.field); got != c.want {
				t.Fatalf("%s %s %s = %s, want %s", c.cls, c.key, c.field, got, c.want)
			}
		}
		if got, want := queryInt(t, db, "SELECT count(*) FROM revisions WHERE keyname = '10.9.0.0/16'"), 0; got != want {
			t.Fatalf("revisions of the failed rename = %d, want %d", got, want)
		}
		if before == cascadeDump(t, db) {
			t.Fatalf("the second rename was not committed")
		}
	})

	t.Run("without revisions a rename writes no revision row", func(t *testing.T) {
		db := cascadeDB(t)
		revs := queryInt(t, db, "SELECT count(*) FROM revisions")
		var rep *store.RenameReport
		err := db.WithTxAs(ctx, store.Revisions{Off: true}, func(tx *store.Tx) error {
			var err error
			_, rep, err = cascadeRenameIn(ctx, testkit.Migrator(t, db), tx, "ipam_subnet", "10.3.0.0/16", "10.7.0.0/16")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := rep.References, 3; got != want {
			t.Fatalf("references = %d, want %d", got, want)
		}
		if got, want := queryInt(t, db, "SELECT count(*) FROM revisions"), revs; got != want {
			t.Fatalf("revisions = %d, want %d", got, want)
		}
		if got, want := cascadeField(t, db, "rack", "r3", "uplink"), "string(10.7.0.0/16)"; got != want {
			t.Fatalf("r3 uplink = %s, want %s", got, want)
		}
	})

	t.Run("after a rename the old keyname no longer resolves as a reference in the same transaction", func(t *testing.T) {
		db := cascadeDB(t)
		var late error
		err := db.WithTx(ctx, func(tx *store.Tx) error {
			rack, err := tx.Schema(ctx, "rack")
			if err != nil {
				return err
			}
			// A write that checks (and may cache) that 10.1.0.0/16 exists.
			if _, err := tx.Apply(ctx, store.Write{Schema: rack, Action: model.ActionCreate, New: &store.Instance{Classname: "rack",
				Keyname: "r8", IsEnabled: true, Data: map[string]any{"uplink": "10.1.0.0/16"}}}, store.ApplyOptions{}); err != nil {
				return err
			}
			if _, _, err := cascadeRenameIn(ctx, testkit.Migrator(t, db), tx, "ipam_subnet", "10.1.0.0/16", "10.9.0.0/16"); err != nil {
				return err
			}
			_, late = tx.Apply(ctx, store.Write{Schema: rack, Action: model.ActionCreate, New: &store.Instance{Classname: "rack",
				Keyname: "r9", IsEnabled: true, Data: map[string]any{"uplink": "10.1.0.0/16"}}}, store.ApplyOptions{})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := store.ErrorCode(late), model.EInvalid; got != want {
			t.Fatalf("saving a reference to the old keyname: error code %q (%v), want %q", got, late, want)
		}
		if got, want := cascadeField(t, db, "rack", "r8", "uplink"), "string(10.9.0.0/16)"; got != want {
			t.Fatalf("r8 uplink = %s, want %s", got, want)
		}
		absent(t, db, "rack", "r9")
	})

	t.Run("a rewritten instance keeps its ipv4 values and collects no address", func(t *testing.T) {
		db := cascadeDB(t)
		mustLoad(t, db, `{classname: _schema, keyname: nic, ip: {dataformat: ipv4}, net: {dataformat: schema, dataformat_ext: ipam_subnet}}`,
			store.LoadOptions{})
		testkit.InsertInstances(t, db, "nic", []testkit.Row{{Keyname: "n1", Enabled: true,
			Data: map[string]any{"ip": "10.66.0.1", "net": "10.1.0.0/16"}}})
		ips := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'ipam_ip'")
		err := db.WithTx(ctx, func(tx *store.Tx) error {
			_, _, err := cascadeRenameIn(ctx, testkit.Migrator(t, db), tx, "ipam_subnet", "10.1.0.0/16", "10.9.0.0/16")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := queryString(t, db, "SELECT data FROM instances WHERE classname = 'nic'"), `{"ip":"10.66.0.1","net":"10.9.0.0/16"}`; got != want {
			t.Fatalf("n1 data = %s, want %s", got, want)
		}
		if got, want := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'ipam_ip'"), ips; got != want {
			t.Fatalf("ipam_ip rows = %d, want %d", got, want)
		}
	})

	t.Run("RewriteAllReferences applies many renames at once, a chain included", func(t *testing.T) {
		db := cascadeDB(t)
		var n int
		err := testkit.Migrator(t, db).Migrate(ctx, func(tx *store.Migration) error {
			var err error
			n, err = tx.RewriteAllReferences(ctx, "ipam_subnet", map[string]string{"10.1.0.0/16": "10.2.0.0/16", "10.2.0.0/16": "10.4.0.0/16"})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := n, 10; got != want {
			t.Fatalf("values changed = %d, want %d", got, want)
		}
		for _, c := range []struct{ cls, key, field, want string }{
			{"rack", "r1", "uplink", "string(10.2.0.0/16)"},
			{"rack", "r1", "nets", "[]interface {}([10.2.0.0/16 10.4.0.0/16])"},
			{"rack", "r2", "uplink", "string(10.4.0.0/16)"},
			{"rack", "r2", "nets", "[]interface {}([10.4.0.0/16 10.2.0.0/16 10.3.0.0/16])"},
			{"rack", "r3", "uplink", "string(10.3.0.0/16)"},
			{"zone", "z1", "tag", "string(10.1.0.0/16)"},
			{"ipam_ip", "0a020005", "subnet", "string(10.4.0.0/16)"},
		} {
			if got := cascadeField(t, db, c.cls, c.key, c.field); got != c.want {
				t.Fatalf("%s %s %s = %s, want %s", c.cls, c.key, c.field, got, c.want)
			}
		}
	})

	t.Run("an unreferenced instance is renamed with zero references", func(t *testing.T) {
		db := cascadeDB(t)
		mustLoad(t, db, `{classname: ipam_subnet, keyname: 192.168.0.0/24}`, store.LoadOptions{})
		var rep *store.RenameReport
		err := db.WithTx(ctx, func(tx *store.Tx) error {
			var err error
			_, rep, err = cascadeRenameIn(ctx, testkit.Migrator(t, db), tx, "ipam_subnet", "192.168.0.0/24", "192.168.1.0/24")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := rep.References, 0; got != want {
			t.Fatalf("references = %d, want %d", got, want)
		}
		instance(t, db, "ipam_subnet", "192.168.1.0/24")
		absent(t, db, "ipam_subnet", "192.168.0.0/24")
	})
}

// collectDoc defines a schema with every kind of ipv4 field, and one address known
// before anything is collected.
const collectDoc = `
- classname: _schema
  keyname: host
  mgmt: {dataformat: ipv4}
  addrs: {dataformat: ipv4, cardinal_max: 0}
  net: {dataformat: ipv4, dataformat_ext: subnet}
  nets: {dataformat: ipv4, dataformat_ext: subnet strict, cardinal_max: 0}
  name: {dataformat: string}
- classname: _schema
  keyname: printer
  ip: {dataformat: ipv4}
- {classname: ipam_ip, displayname: 10.0.0.2, hostname: known, collected: false}
`

// collectedIPs lists keyname=displayname:data:is_enabled of every ipam_ip, in keyname order.
func collectedIPs(t *testing.T, db *store.DB) string {
	t.Helper()
	return queryString(t, db, `SELECT coalesce(string_agg(keyname || '=' || displayname || ':' || CAST(data AS TEXT) || ':' || is_enabled,
		' ' ORDER BY keyname), '') FROM instances WHERE classname = 'ipam_ip'`)
}

func TestCollectIPsOnWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newTestDB(t)
	mustLoad(t, db, collectDoc, store.LoadOptions{})
	known := instance(t, db, "ipam_ip", "0a000002")
	knownRevs := len(revisions(t, db, "0a000002"))
	db.Now = func() time.Time { return fixedNow.Add(time.Hour) }
	mustLoad(t, db, `{classname: host, keyname: h1, mgmt: 10.0.0.1, addrs: "10.0.0.3, 10.0.0.2, 192.168.1.10, 10.0.0.3",
		net: 10.9.0.0/16, nets: [10.8.0.0/16], name: 10.0.0.99}`, store.LoadOptions{Author: "user:loader"})

	t.Run("each missing address of single and multi-valued fields gets one collected ipam_ip", func(t *testing.T) {
		if got, want := collectedIPs(t, db), `0a000001=10.0.0.1:{"collected":true}:1 `+
			`0a000002=10.0.0.2:{"collected":false,"hostname":"known"}:1 `+
			`0a000003=10.0.0.3:{"collected":true}:1 c0a8010a=192.168.1.10:{"collected":true}:1`; got != want {
			t.Fatalf("ipam_ip =\n%s\nwant\n%s", got, want)
		}
		for _, key := range []string{"0a000001", "0a000003", "c0a8010a"} {
			revs := revisions(t, db, key)
			if got, want := actions(revs), "create"; got != want {
				t.Fatalf("%s revisions = %s, want %s", key, got, want)
			}
			if got, want := revs[0].Author, "user:loader"; got != want {
				t.Fatalf("%s revision author = %s, want %s", key, got, want)
			}
		}
	})
	t.Run("an address that has an ipam_ip is neither duplicated nor modified", func(t *testing.T) {
		in := instance(t, db, "ipam_ip", "0a000002")
		if got, want := fmt.Sprintf("%d %s %s", in.ID, in.UpdatedAt, fmtValue(in.Data["collected"])),
			fmt.Sprintf("%d %s bool(false)", known.ID, known.UpdatedAt); got != want {
			t.Fatalf("0a000002 = %s, want %s", got, want)
		}
		if got, want := len(revisions(t, db, "0a000002")), knownRevs; got != want {
			t.Fatalf("0a000002 revisions = %d, want %d", got, want)
		}
	})
	t.Run("subnet fields and string fields are not collected", func(t *testing.T) {
		for _, key := range []string{"0a090000", "0a080000", "0a000063"} {
			absent(t, db, "ipam_ip", key)
		}
	})
	t.Run("an update collects only the new address", func(t *testing.T) {
		mustLoad(t, db, `{classname: host, keyname: h1, addrs: "10.0.0.3, 10.0.0.4"}`, store.LoadOptions{})
		if got, want := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'ipam_ip'"), 5; got != want {
			t.Fatalf("ipam_ip rows = %d, want %d", got, want)
		}
		if got, want := instance(t, db, "ipam_ip", "0a000004").Displayname, "10.0.0.4"; got != want {
			t.Fatalf("0a000004 displayname = %q, want %q", got, want)
		}
	})
	t.Run("an instance saved by a pipeline or migration is collected too", func(t *testing.T) {
		err := testkit.Migrator(t, db).Migrate(context.Background(), func(tx *store.Migration) error {
			s, err := tx.Schema(ctx, "printer")
			if err != nil {
				return err
			}
			_, err = tx.Apply(ctx, store.Write{Schema: s, Action: model.ActionCreate, New: &store.Instance{Classname: "printer",
				Keyname: "p1", IsEnabled: true, Data: map[string]any{"ip": "172.16.0.9"}}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		in := instance(t, db, "ipam_ip", "ac100009")
		if got, want := in.Displayname+" "+fmtValue(in.Data["collected"]), "172.16.0.9 bool(true)"; got != want {
			t.Fatalf("ac100009 = %s, want %s", got, want)
		}
	})
	t.Run("writing an ipam_ip collects nothing else", func(t *testing.T) {
		n := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'ipam_ip'")
		mustLoad(t, db, `{classname: ipam_ip, displayname: 10.0.0.20, hostname: 10.0.0.21}`, store.LoadOptions{})
		if got, want := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'ipam_ip'"), n+1; got != want {
			t.Fatalf("ipam_ip rows = %d, want %d", got, want)
		}
	})
}

func TestCollectIPsOverStoredData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newTestDB(t)
	mustLoad(t, db, collectDoc, store.LoadOptions{})
	// 1,205 hosts (more than one batch of 1,000) stored without collection: a unique
	// mgmt address each, the known address 10.0.0.2 and garbage in addrs, a subnet.
	hosts := make([]testkit.Row, 1205)
	for i := range hosts {
		hosts[i] = testkit.Row{Keyname: fmt.Sprintf("h%d", i), Enabled: true, Data: map[string]any{
			"mgmt": fmt.Sprintf("10.1.%d.%d", i/256, i%256), "addrs": []string{"10.0.0.2", "garbage", "10.0.0.300"},
			"net": "10.3.0.0/16", "nets": []string{"10.4.0.0/16"}}}
	}
	testkit.InsertInstances(t, db, "host", hosts)
	testkit.InsertInstances(t, db, "printer", []testkit.Row{
		{Keyname: "p1", Enabled: true, Data: map[string]any{"ip": "10.1.0.5"}},
		{Keyname: "p2", Enabled: true, Data: map[string]any{"ip": "10.5.0.1"}},
	})
	if got, want := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'ipam_ip'"), 1; got != want {
		t.Fatalf("ipam_ip rows before CollectIPs = %d, want %d (the SQL inserts must not collect)", got, want)
	}
	known := collectedIPs(t, db)
	col, err := db.CollectIPs(ctx, "user:ops")
	if err != nil {
		t.Fatalf("CollectIPs: %v", err)
	}
	n := col.Created
	t.Run("every missing address is created once", func(t *testing.T) {
		if got, want := n, 1206; got != want {
			t.Fatalf("CollectIPs created %d, want %d", got, want)
		}
		if got, want := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'ipam_ip'"), 1207; got != want {
			t.Fatalf("ipam_ip rows = %d, want %d", got, want)
		}
		if got, want := queryInt(t, db, `SELECT count(*) FROM instances WHERE classname = 'ipam_ip'
			AND CAST(data AS TEXT) = '{"collected":true}' AND is_enabled = 1`), 1206; got != want {
			t.Fatalf("collected ipam_ip rows = %d, want %d", got, want)
		}
		for hex, addr := range map[string]string{"0a010000": "10.1.0.0", "0a0104b4": "10.1.4.180", "0a010005": "10.1.0.5", "0a050001": "10.5.0.1"} {
			if got, want := instance(t, db, "ipam_ip", hex).Displayname, addr; got != want {
				t.Fatalf("%s displayname = %q, want %q", hex, got, want)
			}
		}
		if got, want := queryInt(t, db, "SELECT count(*) FROM revisions WHERE classname = 'ipam_ip' AND action = 'create' AND author = 'user:ops'"), 1206; got != want {
			t.Fatalf("create revisions by user:ops = %d, want %d", got, want)
		}
	})
	t.Run("the known address, subnets and garbage are not collected", func(t *testing.T) {
		if !strings.Contains(collectedIPs(t, db), known) {
			t.Fatalf("the known ipam_ip changed: %s is gone", known)
		}
		for _, key := range []string{"0a030000", "0a040000"} {
			absent(t, db, "ipam_ip", key)
		}
		if got, want := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname IN ('host', 'printer') AND updated_at <> ?", testkit.OldTime), 0; got != want {
			t.Fatalf("scanned instances rewritten = %d, want %d", got, want)
		}
	})
	t.Run("a second run creates nothing", func(t *testing.T) {
		before := cascadeDump(t, db)
		col, err := db.CollectIPs(ctx, "user:ops")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := col.Created, 0; got != want {
			t.Fatalf("second CollectIPs created %d, want %d", got, want)
		}
		if after := cascadeDump(t, db); after != before {
			t.Fatalf("second CollectIPs changed the data")
		}
	})
}

func TestConvertKeyname(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := cascadeDB(t)
	revs := queryInt(t, db, "SELECT count(*) FROM revisions")
	var conflict error
	var in *store.Instance
	var keys []*store.Instance
	err := testkit.Migrator(t, db).Migrate(ctx, func(tx *store.Migration) error {
		var err error
		if in, err = tx.Instance(ctx, "ipam_subnet", "10.1.0.0/16"); err != nil {
			return err
		}
		conflict = tx.ConvertKeyname(ctx, in, "10.2.0.0/16", "taken")
		if err := tx.ConvertKeyname(ctx, in, "10.9.0.0/16", "converted"); err != nil {
			return err
		}
		keys, err = tx.InstanceKeys(ctx, "ipam_subnet", "site", 0, 2)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a keyname held by another instance is a conflict and the transaction goes on", func(t *testing.T) {
		if got, want := store.ErrorCode(conflict), model.EConflict; got != want {
			t.Fatalf("error code = %q (%v), want %q", got, conflict, want)
		}
		sub := instance(t, db, "ipam_subnet", "10.9.0.0/16")
		if got, want := fmt.Sprintf("%d %s %s", sub.ID, sub.Displayname, fmtValue(sub.Data["site"])),
			fmt.Sprintf("%d converted string(hq)", in.ID); got != want {
			t.Fatalf("converted subnet = %s, want %s", got, want)
		}
		if got, want := instance(t, db, "ipam_subnet", "10.2.0.0/16").Displayname, ""; got != want {
			t.Fatalf("10.2.0.0/16 displayname = %q, want %q", got, want)
		}
	})
	t.Run("no cascade and no revision", func(t *testing.T) {
		if got, want := cascadeField(t, db, "rack", "r1", "uplink"), "string(10.1.0.0/16)"; got != want {
			t.Fatalf("r1 uplink = %s, want %s", got, want)
		}
		if got, want := queryInt(t, db, "SELECT count(*) FROM revisions"), revs; got != want {
			t.Fatalf("revisions = %d, want %d", got, want)
		}
	})
	t.Run("InstanceKeys reads keynames and a text field a page at a time", func(t *testing.T) {
		var got []string
		for _, k := range keys {
			got = append(got, fmt.Sprintf("%s=%v", k.Keyname, k.Data["site"]))
		}
		if g, w := strings.Join(got, " "), "10.9.0.0/16=hq 10.2.0.0/16=<nil>"; g != w {
			t.Fatalf("InstanceKeys = %s, want %s", g, w)
		}
	})
}
