package store_test

import (
	"strings"
	"testing"

	"dataservice/store"
	"dataservice/store/model"
)

// IP collection writes through the apply path: a collected address is validated
// against the ipam_ip schema as a schema admin left it. An address the schema refuses
// is not written; the write holding it succeeds and the load report says why.
func TestCollectedIPsFollowTheIPAMIPSchema(t *testing.T) {
	t.Parallel()
	const hosts = `{classname: _schema, keyname: nic, ip: {dataformat: ipv4}}`

	t.Run("a required field without default: the address is skipped with a warning", func(t *testing.T) {
		db := newTestDB(t)
		mustLoad(t, db, hosts+"\n---\n"+`{classname: _schema, keyname: ipam_ip, owner: {dataformat: string, cardinal_min: 1}}`,
			store.LoadOptions{})
		ips := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'ipam_ip'")
		res := load(t, db, `{classname: nic, keyname: n1, ip: 10.7.0.1}`, store.LoadOptions{})
		if res.Created != 1 || res.Errors != 0 {
			t.Fatalf("load: %s %s", counts(res), messages(res))
		}
		instance(t, db, "nic", "n1")
		absent(t, db, "ipam_ip", "0a070001")
		if got := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'ipam_ip'"); got != ips {
			t.Fatalf("ipam_ip rows = %d, want %d", got, ips)
		}
		if got, want := strings.Join(res.Warnings, "\n"), "ipam_ip 10.7.0.1 not collected (from nic n1, field ip): field owner"; !strings.Contains(got, want) {
			t.Fatalf("warnings = %q, want one containing %q", got, want)
		}
		if got := queryInt(t, db, "SELECT count(*) FROM revisions WHERE classname = 'ipam_ip' AND keyname = '0a070001'"); got != 0 {
			t.Fatalf("revisions of the skipped address = %d, want 0", got)
		}
		col, err := db.CollectIPs(t.Context(), "system")
		if err != nil {
			t.Fatalf("CollectIPs: %v", err)
		}
		if col.Created != 0 || col.Skipped != 1 || len(col.Warnings) != 1 || !strings.Contains(col.Warnings[0], "10.7.0.1") {
			t.Fatalf("CollectIPs = %+v, want 0 created, 1 skipped naming 10.7.0.1", col)
		}
		absent(t, db, "ipam_ip", "0a070001")
	})

	t.Run("an address stored already is no warning, whatever the schema says of new ones", func(t *testing.T) {
		db := newTestDB(t)
		mustLoad(t, db, hosts, store.LoadOptions{})
		mustLoad(t, db, `{classname: nic, keyname: n1, ip: 10.7.0.9}`, store.LoadOptions{})
		mustLoad(t, db, `{classname: _schema, keyname: ipam_ip, owner: {dataformat: string, cardinal_min: 1}}`, store.LoadOptions{})
		res := load(t, db, `{classname: nic, keyname: n2, ip: 10.7.0.9}`, store.LoadOptions{})
		if res.Created != 1 || res.Errors != 0 || len(res.Warnings) != 0 {
			t.Fatalf("load: %s %s warnings %q", counts(res), messages(res), res.Warnings)
		}
		col, err := db.CollectIPs(t.Context(), "system")
		if err != nil || col.Created != 0 || col.Skipped != 0 {
			t.Fatalf("CollectIPs = %+v, %v; want nothing created or skipped", col, err)
		}
	})

	t.Run("collected changed to another dataformat: no invalid value is stored", func(t *testing.T) {
		db := newTestDB(t)
		mustLoad(t, db, hosts+"\n---\n"+`{classname: _schema, keyname: ipam_ip, collected: {dataformat: int}}`, store.LoadOptions{})
		res := load(t, db, `{classname: nic, keyname: n1, ip: 10.7.0.2}`, store.LoadOptions{})
		if res.Created != 1 || res.Errors != 0 || len(res.Warnings) != 1 {
			t.Fatalf("load: %s %s warnings %q", counts(res), messages(res), res.Warnings)
		}
		absent(t, db, "ipam_ip", "0a070002")
	})

	t.Run("a field with a default: the collected address gets it", func(t *testing.T) {
		db := newTestDB(t)
		mustLoad(t, db, hosts+"\n---\n"+`{classname: _schema, keyname: ipam_ip, owner: {dataformat: string, cardinal_min: 1, default: netops}}`,
			store.LoadOptions{})
		res := load(t, db, `{classname: nic, keyname: n1, ip: 10.7.0.3}`, store.LoadOptions{})
		if res.Created != 1 || res.Errors != 0 || len(res.Warnings) != 0 {
			t.Fatalf("load: %s %s warnings %q", counts(res), messages(res), res.Warnings)
		}
		in := instance(t, db, "ipam_ip", "0a070003")
		if got, want := fmtValue(in.Data["owner"])+" "+fmtValue(in.Data["collected"]), "string(netops) bool(true)"; got != want {
			t.Fatalf("collected ipam_ip owner, collected = %s, want %s", got, want)
		}
	})

	t.Run("a pipeline or console write reports the skipped address in its outcome", func(t *testing.T) {
		db := newTestDB(t)
		// The writer may create nic instances only: collection acts as the system.
		mustLoad(t, db, `
- {classname: _permission, keyname: p_nic_create}
- {classname: _schema, keyname: nic, p_create: p_nic_create, ip: {dataformat: ipv4}}
- {classname: _schema, keyname: ipam_ip, owner: {dataformat: string, cardinal_min: 1}}
`, store.LoadOptions{})
		s, err := db.Schema(t.Context(), "nic")
		if err != nil {
			t.Fatal(err)
		}
		out, err := db.Apply(t.Context(), store.Write{Schema: s, Action: model.ActionCreate,
			New: &store.Instance{Classname: "nic", Keyname: "n2", IsEnabled: true, Data: map[string]any{"ip": "10.7.0.4"}}},
			store.ApplyOptions{Auth: userAuth("p_nic_create")})
		if err != nil {
			t.Fatalf("apply: %v", err)
		}
		if out.Result != store.OutCreated || len(out.Warnings) != 1 || !strings.Contains(out.Warnings[0], "10.7.0.4") {
			t.Fatalf("outcome = %+v, want created with one warning naming 10.7.0.4", out)
		}
		absent(t, db, "ipam_ip", "0a070004")
		// Once the schema accepts it, the same writer's next write collects the address.
		mustLoad(t, db, `{classname: _schema, keyname: ipam_ip, owner: {dataformat: string, cardinal_min: 0}}`, store.LoadOptions{})
		out, err = db.Apply(t.Context(), store.Write{Schema: s, Action: model.ActionCreate,
			New: &store.Instance{Classname: "nic", Keyname: "n3", IsEnabled: true, Data: map[string]any{"ip": "10.7.0.4"}}},
			store.ApplyOptions{Auth: userAuth("p_nic_create")})
		if err != nil || len(out.Warnings) != 0 {
			t.Fatalf("apply: %+v, %v", out, err)
		}
		instance(t, db, "ipam_ip", "0a070004")
	})
}
