package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
)

func TestParseSubnetAndRanges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, prefix, hosts string
	}{
		{"0.0.0.0/0", "0.0.0.0-255.255.255.255", "0.0.0.1-255.255.255.254"},
		{"10.0.0.0/8", "10.0.0.0-10.255.255.255", "10.0.0.1-10.255.255.254"},
		{"192.168.1.0/24", "192.168.1.0-192.168.1.255", "192.168.1.1-192.168.1.254"},
		{"192.168.1.4/30", "192.168.1.4-192.168.1.7", "192.168.1.5-192.168.1.6"},
		{"192.168.1.4/31", "192.168.1.4-192.168.1.5", "192.168.1.4-192.168.1.5"},
		{"192.168.1.4/32", "192.168.1.4-192.168.1.4", "192.168.1.4-192.168.1.4"},
		{"255.255.255.255/32", "255.255.255.255-255.255.255.255", "255.255.255.255-255.255.255.255"},
	} {
		p, err := store.ParseSubnet(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if got := rangeText(store.PrefixRange(p)); got != tc.prefix {
			t.Errorf("%s range: got %s, want %s", tc.in, got, tc.prefix)
		}
		if got := rangeText(store.HostRange(p)); got != tc.hosts {
			t.Errorf("%s hosts: got %s, want %s", tc.in, got, tc.hosts)
		}
	}
	if got, want := mustSubnet(t, "0.0.0.0/0").Size(), uint64(1)<<32; got != want {
		t.Errorf("/0 size: got %d, want %d", got, want)
	}
	for in, msg := range map[string]string{
		"10.0.0.1/24":   `"10.0.0.1/24" has host bits set (expected 10.0.0.0/24)`,
		"10.0.0.0/33":   `"10.0.0.0/33" is not an IPv4 subnet (A.B.C.D/N)`,
		"10.00.0.0/16":  `"10.00.0.0/16" is not an IPv4 subnet (A.B.C.D/N)`,
		"10.0.0.0":      `"10.0.0.0" is not an IPv4 subnet (A.B.C.D/N)`,
		"net-a":         `"net-a" is not an IPv4 subnet (A.B.C.D/N)`,
		"::1/128":       `"::1/128" is not an IPv4 subnet (A.B.C.D/N)`,
		"10.0.0.0/24 x": `"10.0.0.0/24 x" is not an IPv4 subnet (A.B.C.D/N)`,
	} {
		_, err := store.ParseSubnet(in)
		if store.ErrorCode(err) != model.EInvalid || store.ErrorMessage(err) != msg {
			t.Errorf("ParseSubnet(%q): got %v (%s), want invalid %s", in, err, store.ErrorCode(err), msg)
		}
	}
	for in, want := range map[string]string{"10.0.0.1": "", "256.0.0.1": `"256.0.0.1" is not an IPv4 address`,
		"10.0.0.01": `"10.0.0.01" is not an IPv4 address`, "": `"" is not an IPv4 address`, "10.0.0.0/8": `"10.0.0.0/8" is not an IPv4 address`} {
		a, err := store.ParseIPv4(in)
		if want == "" {
			if err != nil || store.IPv4String(a) != in {
				t.Errorf("ParseIPv4(%q): %v %s", in, err, store.IPv4String(a))
			}
			continue
		}
		if store.ErrorCode(err) != model.EInvalid || store.ErrorMessage(err) != want {
			t.Errorf("ParseIPv4(%q): got %v, want %s", in, err, want)
		}
	}
}

func rangeText(r store.IPRange) string {
	return store.IPv4String(r.First) + "-" + store.IPv4String(r.Last)
}

func mustSubnet(t *testing.T, s string) store.IPRange {
	t.Helper()
	p, err := store.ParseSubnet(s)
	if err != nil {
		t.Fatal(err)
	}
	return store.PrefixRange(p)
}

func mustAddr(t *testing.T, s string) uint32 {
	t.Helper()
	a, err := store.ParseIPv4(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// ipamData has addresses at both ends of the address space and around 10.0.0.0/24,
// nested and overlapping subnets, and a subnet and an address keyed as an old version
// left them.
const ipamData = `
- {classname: ipam_ip, displayname: 0.0.0.0}
- {classname: ipam_ip, displayname: 9.255.255.255}
- {classname: ipam_ip, displayname: 10.0.0.0}
- {classname: ipam_ip, displayname: 10.0.0.1, hostname: gw}
- {classname: ipam_ip, displayname: 10.0.0.2}
- {classname: ipam_ip, displayname: 10.0.0.10, collected: true}
- {classname: ipam_ip, displayname: 10.0.0.255}
- {classname: ipam_ip, displayname: 10.0.1.0}
- {classname: ipam_ip, displayname: 255.255.255.255}
- {classname: ipam_subnet, keyname: 0.0.0.0/0}
- {classname: ipam_subnet, keyname: 10.0.0.0/8}
- {classname: ipam_subnet, keyname: 10.0.0.0/24, displayname: LAN}
- {classname: ipam_subnet, keyname: 10.0.0.10/32}
- {classname: ipam_subnet, keyname: 10.0.0.2/31}
- {classname: ipam_subnet, keyname: 10.0.1.0/24}
- {classname: ipam_subnet, keyname: 192.168.0.0/16}
`

func ipamDB(t *testing.T) *store.DB {
	db := newTestDB(t)
	mustLoad(t, db, ipamData, store.LoadOptions{})
	testkit.InsertInstances(t, db, "ipam_ip", []testkit.Row{{Keyname: "10.0.0.7", Displayname: "10.0.0.7", Enabled: true},
		{Keyname: "0a00000", Enabled: true}})
	testkit.InsertInstances(t, db, "ipam_subnet", []testkit.Row{{Keyname: "office lan", Enabled: true}})
	return db
}

func TestCountAndListIPs(t *testing.T) {
	t.Parallel()
	db := ipamDB(t)
	ctx := context.Background()
	for _, tc := range []struct {
		subnet string
		all    int
		hosts  int
	}{
		{"0.0.0.0/0", 9, 7},
		{"10.0.0.0/8", 6, 5},
		{"10.0.0.0/24", 5, 3},
		{"10.0.0.2/31", 1, 1},
		{"10.0.0.10/32", 1, 1},
		{"10.0.0.11/32", 0, 0},
		{"192.168.0.0/16", 0, 0},
	} {
		p, _ := store.ParseSubnet(tc.subnet)
		n, err := db.CountIPs(ctx, store.PrefixRange(p))
		if err != nil || n != tc.all {
			t.Errorf("CountIPs(%s): got %d %v, want %d", tc.subnet, n, err, tc.all)
		}
		n, err = db.CountIPs(ctx, store.HostRange(p))
		if err != nil || n != tc.hosts {
			t.Errorf("CountIPs(hosts of %s): got %d %v, want %d", tc.subnet, n, err, tc.hosts)
		}
	}
	ips, err := db.IPsInRange(ctx, mustSubnet(t, "0.0.0.0/0"), 4)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range ips {
		got = append(got, in.Displayname)
	}
	if g, w := strings.Join(got, " "), "0.0.0.0 9.255.255.255 10.0.0.0 10.0.0.1"; g != w {
		t.Fatalf("IPsInRange: got %s, want %s", g, w)
	}
}

func TestSubnetsOrderAndContainment(t *testing.T) {
	t.Parallel()
	db := ipamDB(t)
	ctx := context.Background()
	list, skipped, err := db.Subnets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := subnetText(list), "0.0.0.0/0:0 10.0.0.0/8:1 10.0.0.0/24:2 10.0.0.2/31:3 10.0.0.10/32:3 10.0.1.0/24:2 192.168.0.0/16:1"; got != want {
		t.Errorf("Subnets: got %s, want %s", got, want)
	}
	if skipped != 1 {
		t.Errorf("skipped: got %d, want 1 (the free-text keyname)", skipped)
	}
	for ip, want := range map[string]string{
		"10.0.0.10":       "0.0.0.0/0:0 10.0.0.0/8:1 10.0.0.0/24:2 10.0.0.10/32:3",
		"10.0.0.3":        "0.0.0.0/0:0 10.0.0.0/8:1 10.0.0.0/24:2 10.0.0.2/31:3",
		"10.0.1.77":       "0.0.0.0/0:0 10.0.0.0/8:1 10.0.1.0/24:2",
		"172.16.0.1":      "0.0.0.0/0:0",
		"255.255.255.255": "0.0.0.0/0:0",
	} {
		got, err := db.SubnetsContaining(ctx, mustAddr(t, ip))
		if err != nil || subnetText(got) != want {
			t.Errorf("SubnetsContaining(%s): got %s %v, want %s", ip, subnetText(got), err, want)
		}
	}
	exec(t, db, "DELETE FROM instances WHERE classname = 'ipam_subnet' AND keyname = '0.0.0.0/0'")
	if got, err := db.SubnetsContaining(ctx, mustAddr(t, "172.16.0.1")); err != nil || len(got) != 0 {
		t.Errorf("an address in no subnet: got %s %v", subnetText(got), err)
	}
}

func subnetText(list []store.Subnet) string {
	var out []string
	for _, s := range list {
		out = append(out, fmt.Sprintf("%s:%d", s.Prefix, s.Depth))
	}
	return strings.Join(out, " ")
}

func TestSubnetAddresses(t *testing.T) {
	t.Parallel()
	db := ipamDB(t)
	ctx := context.Background()
	page := func(subnet, from string, limit int) string {
		t.Helper()
		p, _ := store.ParseSubnet(subnet)
		var start uint32
		if from != "" {
			start = mustAddr(t, from)
		}
		pg, err := db.SubnetAddresses(ctx, p, start, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range pg.Rows {
			s := r.Kind + " " + store.IPv4String(r.Range.First)
			if r.Range.Last != r.Range.First {
				s += "-" + store.IPv4String(r.Range.Last)
			}
			if r.IP != nil && r.IP.Displayname != store.IPv4String(r.Range.First) {
				s += " (wrong instance " + r.IP.Displayname + ")"
			}
			out = append(out, s)
		}
		if pg.More {
			out = append(out, "next "+store.IPv4String(pg.Next))
		}
		return strings.Join(out, ", ")
	}
	for _, tc := range []struct {
		subnet, from string
		limit        int
		want         string
	}{
		{"10.0.0.0/24", "", 10, "used 10.0.0.0, used 10.0.0.1, used 10.0.0.2, free 10.0.0.3-10.0.0.9, used 10.0.0.10, free 10.0.0.11-10.0.0.254, used 10.0.0.255"},
		{"10.0.0.0/24", "", 2, "used 10.0.0.0, used 10.0.0.1, next 10.0.0.2"},
		{"10.0.0.0/24", "10.0.0.2", 2, "used 10.0.0.2, free 10.0.0.3-10.0.0.9, used 10.0.0.10, free 10.0.0.11-10.0.0.254, next 10.0.0.255"},
		{"10.0.0.0/24", "10.0.0.255", 2, "used 10.0.0.255"},
		{"10.0.1.0/24", "", 10, "used 10.0.1.0, free 10.0.1.1-10.0.1.254, broadcast 10.0.1.255"},
		{"192.168.0.0/16", "", 10, "network 192.168.0.0, free 192.168.0.1-192.168.255.254, broadcast 192.168.255.255"},
		{"10.0.0.2/31", "", 10, "used 10.0.0.2, free 10.0.0.3"},
		{"10.0.0.10/32", "", 10, "used 10.0.0.10"},
		{"10.0.0.11/32", "", 10, "free 10.0.0.11"},
		{"10.0.0.4/30", "", 10, "network 10.0.0.4, free 10.0.0.5-10.0.0.6, broadcast 10.0.0.7"},
		{"0.0.0.0/0", "", 3, "used 0.0.0.0, free 0.0.0.1-9.255.255.254, used 9.255.255.255, used 10.0.0.0, next 10.0.0.1"},
		{"0.0.0.0/0", "10.0.1.0", 5, "used 10.0.1.0, free 10.0.1.1-255.255.255.254, used 255.255.255.255"},
	} {
		if got := page(tc.subnet, tc.from, tc.limit); got != tc.want {
			t.Errorf("%s from %q limit %d:\n got %s\nwant %s", tc.subnet, tc.from, tc.limit, got, tc.want)
		}
	}
	p, _ := store.ParseSubnet("10.0.0.0/24")
	if _, err := db.SubnetAddresses(ctx, p, mustAddr(t, "10.0.1.0"), 5); store.ErrorCode(err) != model.EInvalid {
		t.Errorf("a start outside the subnet: got %v, want invalid", err)
	}
}

func TestFindIPv4Holders(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	ctx := context.Background()
	mustLoad(t, db, `
- {classname: _schema, keyname: box, mgmt: {dataformat: ipv4}, extra: {dataformat: ipv4, cardinal_max: 0}, net: {dataformat: ipv4, dataformat_ext: subnet}, note: {dataformat: string}}
- {classname: _schema, keyname: secret_box, p_read: p_hidden, addr: {dataformat: ipv4}}
- {classname: box, keyname: b1, displayname: one, mgmt: 10.0.0.1}
- {classname: box, keyname: b2, extra: [10.0.0.9, 10.0.0.1]}
- {classname: box, keyname: b3, note: "10.0.0.1", mgmt: 10.0.0.10}
- {classname: box, keyname: b4, net: 10.0.0.0/24, mgmt: 10.0.0.11}
- {classname: box, keyname: b5, mgmt: 10.0.0.1, extra: [10.0.0.1]}
- {classname: secret_box, keyname: s1, addr: 10.0.0.1}
- {classname: ipam_subnet, keyname: 10.0.0.0/24, gateway: 10.0.0.1}
`, store.LoadOptions{})
	all := func(*model.Schema) bool { return true }
	text := func(r *store.IPv4Search) string {
		var out []string
		for _, h := range r.Holders {
			out = append(out, h.Classname+"/"+h.Keyname+"."+h.Field)
		}
		return fmt.Sprintf("%s scanned=%d truncated=%v unsearched=%v", strings.Join(out, " "), r.Scanned, r.Truncated, r.Unsearched)
	}
	for _, tc := range []struct {
		name          string
		may           func(*model.Schema) bool
		budget, limit int
		want          string
	}{
		{"every readable schema", all, 1000, 100,
			"box/b1.mgmt box/b2.extra box/b5.mgmt box/b5.extra ipam_subnet/10.0.0.0/24.gateway secret_box/s1.addr scanned=7 truncated=false unsearched=[]"},
		{"only what may read", func(s *model.Schema) bool { return model.CanRead(userAuth("p_data_read"), s) }, 1000, 100,
			"box/b1.mgmt box/b2.extra box/b5.mgmt box/b5.extra ipam_subnet/10.0.0.0/24.gateway scanned=6 truncated=false unsearched=[]"},
		{"the budget ends inside a schema", all, 3, 100,
			"box/b1.mgmt box/b2.extra scanned=3 truncated=false unsearched=[box ipam_subnet secret_box]"},
		{"the budget ends with a schema", all, 5, 100,
			"box/b1.mgmt box/b2.extra box/b5.mgmt box/b5.extra scanned=5 truncated=false unsearched=[ipam_subnet secret_box]"},
		{"the limit of holders", all, 1000, 2,
			"box/b1.mgmt box/b2.extra scanned=5 truncated=true unsearched=[ipam_subnet secret_box]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := db.FindIPv4Holders(ctx, "10.0.0.1", tc.may, tc.budget, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if got := text(r); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	if _, err := db.FindIPv4Holders(ctx, "10.0.0.1/24", all, 10, 10); store.ErrorCode(err) != model.EInvalid {
		t.Errorf("a subnet as the address: got %v, want invalid", err)
	}
	r, err := db.FindIPv4Holders(ctx, "10.0.0.99", all, 1000, 100)
	if err != nil || len(r.Holders) != 0 || r.Scanned != 7 {
		t.Errorf("an address nobody holds: %+v %v", r, err)
	}
}

func TestInstancesReferencing(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, `
- {classname: ipam_subnet, keyname: 10.0.0.0/24}
- {classname: ipam_subnet, keyname: 10.0.1.0/24}
- {classname: ipam_vlan, keyname: v10, vlan_id: 10, subnet: [10.0.0.0/24, 10.0.1.0/24]}
- {classname: ipam_vlan, keyname: v11, vlan_id: 11, subnet: [10.0.1.0/24]}
- {classname: ipam_vlan, keyname: v12, vlan_id: 12, description: "was 10.0.0.0/24"}
`, store.LoadOptions{})
	got, err := db.InstancesReferencing(context.Background(), "ipam_vlan", "subnet", "10.0.0.0/24", 10)
	if err != nil || len(got) != 1 || got[0].Keyname != "v10" {
		t.Fatalf("vlans of 10.0.0.0/24: %v %v", got, err)
	}
	got, err = db.InstancesReferencing(context.Background(), "ipam_vlan", "subnet", "10.0.1.0/24", 1)
	if err != nil || len(got) != 1 {
		t.Fatalf("limit: %v %v", got, err)
	}
	if _, err := db.InstancesReferencing(context.Background(), "ipam_vlan", "x') OR 1=1 --", "a", 1); store.ErrorCode(err) != model.EInvalid {
		t.Fatalf("bad field name: %v", err)
	}
}
