package store_test

import (
	"context"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

func TestIPCollection(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, `
- classname: _schema
  keyname: box
  mgmt: {dataformat: ipv4}
  extra: {dataformat: ipv4, cardinal_max: 0}
  net: {dataformat: ipv4, dataformat_ext: subnet}
- {classname: ipam_ip, displayname: 10.0.0.2, hostname: known, collected: false}
`, store.LoadOptions{})
	mustLoad(t, db, `{classname: box, keyname: b1, mgmt: 10.0.0.1, extra: "10.0.0.2, 10.0.0.3", net: 10.9.0.0/16}`,
		store.LoadOptions{Author: "user:loader"})
	t.Run("new addresses get a collected ipam_ip", func(t *testing.T) {
		for _, hex := range []string{"0a000001", "0a000003"} {
			in := instance(t, db, "ipam_ip", hex)
			if got, want := fmtValue(in.Data["collected"]), "bool(true)"; got != want {
				t.Fatalf("%s collected: got %s, want %s", hex, got, want)
			}
			if got, want := actions(revisions(t, db, hex)), "create"; got != want {
				t.Fatalf("%s revisions: got %s, want %s", hex, got, want)
			}
		}
		if got, want := instance(t, db, "ipam_ip", "0a000001").Displayname, "10.0.0.1"; got != want {
			t.Fatalf("displayname: got %q, want %q", got, want)
		}
		if got, want := queryString(t, db, "SELECT author FROM revisions WHERE keyname = '0a000001'"), "user:loader"; got != want {
			t.Fatalf("author: got %q, want %q", got, want)
		}
	})
	t.Run("a known address is left as it is", func(t *testing.T) {
		in := instance(t, db, "ipam_ip", "0a000002")
		if got, want := fmtValue(in.Data["collected"])+" "+fmtValue(in.Data["hostname"]), "bool(false) string(known)"; got != want {
			t.Fatalf("0a000002: got %s, want %s", got, want)
		}
	})
	t.Run("subnets are not collected", func(t *testing.T) {
		if got, want := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'ipam_ip'"), 3; got != want {
			t.Fatalf("ipam_ip rows: got %d, want %d", got, want)
		}
	})
	t.Run("a dry run collects nothing", func(t *testing.T) {
		load(t, db, `{classname: box, keyname: b2, mgmt: 10.0.0.50}`, store.LoadOptions{DryRun: true})
		absent(t, db, "ipam_ip", "0a000032")
	})
	t.Run("a failed entry collects nothing", func(t *testing.T) {
		res := load(t, db, `{classname: box, keyname: b3, mgmt: 10.0.0.60, net: bad}`, store.LoadOptions{})
		if got, want := res.Errors, 1; got != want {
			t.Fatalf("errors: got %d, want %d", got, want)
		}
		absent(t, db, "ipam_ip", "0a00003c")
	})
	t.Run("CollectIPs fills in addresses stored before", func(t *testing.T) {
		testkit.InsertInstances(t, db, "box", []testkit.Row{{Keyname: "raw", Enabled: true,
			Data: map[string]any{"mgmt": "10.0.0.77", "extra": []string{"10.0.0.1", "10.0.0.78"}}}})
		col, err := db.CollectIPs(context.Background(), "system")
		if err != nil {
			t.Fatalf("CollectIPs: %v", err)
		}
		if got, want := col.Created, 2; got != want {
			t.Fatalf("collected: got %d, want %d", got, want)
		}
		instance(t, db, "ipam_ip", "0a00004d")
		instance(t, db, "ipam_ip", "0a00004e")
		if col, err := db.CollectIPs(context.Background(), "system"); err != nil || col.Created != 0 {
			t.Fatalf("second CollectIPs: got %d (%v), want 0", col.Created, err)
		}
	})
}
