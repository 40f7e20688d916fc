package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"dataservice/internal/testkit"
)

// ipamPeople: netops reads everything, novlan everything but ipam_vlan (given its own
// read permission below), noipam only the box schema, nodata has no p_data_access.
const ipamPeople = `
- {classname: _user, keyname: netops, password: netops-pass-1}
- {classname: _user, keyname: novlan, password: novlan-pass-1}
- {classname: _user, keyname: noipam, password: noipam-pass-1}
- {classname: _user, keyname: nodata, password: nodata-pass-1}
- {classname: _permission, keyname: p_box_read}
- {classname: _permission, keyname: p_hidden}
- {classname: _permission, keyname: p_vlan_read}
- {classname: _role, keyname: netops, permissions: [p_data_access, p_data_read, p_vlan_read, p_box_read], users: [netops]}
- {classname: _role, keyname: novlan, permissions: [p_data_access, p_data_read], users: [novlan]}
- {classname: _role, keyname: noipam, permissions: [p_data_access, p_box_read], users: [noipam]}
- {classname: _role, keyname: nodata, permissions: [p_data_read], users: [nodata]}
- {classname: _schema, keyname: box, p_read: p_box_read, mgmt: {dataformat: ipv4}, extra: {dataformat: ipv4, cardinal_max: 0}}
- {classname: _schema, keyname: secret_box, p_read: p_hidden, addr: {dataformat: ipv4}}
`

// ipamNet: nested and overlapping subnets under 10.0.0.0/8, a /31 and a /32, a /24
// elsewhere; addresses allocated, collected, recorded on the broadcast address, and one
// whose subnet field names another subnet; two VLANs; boxes holding 10.1.2.1.
const ipamNet = `
- {classname: ipam_subnet, keyname: 10.0.0.0/8, displayname: Ten}
- {classname: ipam_subnet, keyname: 10.1.0.0/16, displayname: Campus}
- {classname: ipam_subnet, keyname: 10.1.2.0/24, displayname: Servers, description: Rack row 2, site: paris, gateway: 10.1.2.1}
- {classname: ipam_subnet, keyname: 10.1.2.4/31, displayname: Link}
- {classname: ipam_subnet, keyname: 10.1.2.9/32, displayname: Loopback}
- {classname: ipam_subnet, keyname: 192.168.0.0/24, displayname: Office}
- {classname: ipam_ip, displayname: 10.1.2.1, hostname: gw1, collected: false}
- {classname: ipam_ip, displayname: 10.1.2.2, collected: true}
- {classname: ipam_ip, displayname: 10.1.2.10, hostname: misfiled, subnet: 10.1.0.0/16}
- {classname: ipam_ip, displayname: 10.1.2.255}
- {classname: ipam_vlan, keyname: v100, displayname: Servers, vlan_id: 100, subnet: [10.1.2.0/24, 10.1.0.0/16]}
- {classname: ipam_vlan, keyname: v20, displayname: Office, vlan_id: 20, subnet: [192.168.0.0/24]}
- {classname: box, keyname: s1, displayname: Server one, mgmt: 10.1.2.1}
- {classname: box, keyname: s2, extra: [10.1.2.1, 172.16.0.5]}
- {classname: box, keyname: s3, mgmt: 172.16.0.9}
- {classname: secret_box, keyname: s9, addr: 10.1.2.1}
`

func ipamEnv(t *testing.T) *env {
	e := newEnv(t, "")
	e.load(ipamPeople)
	e.load(ipamNet)
	// ipam_vlan is built-in: its read permission is set as an administrator would.
	e.exec("UPDATE schemas SET p_read = 'p_vlan_read' WHERE keyname = 'ipam_vlan'")
	e.exec("UPDATE schema_generation SET generation = generation + 1")
	return e
}

// rowOf is the table row of the page holding s, tags stripped, or "".
func rowOf(body, s string) string {
	for _, tr := range strings.Split(body, "<tr") {
		if strings.Contains(tr, s) {
			return strings.Join(strings.Fields(tagRE.ReplaceAllString("<tr"+tr, " ")), " ")
		}
	}
	return ""
}

var tagRE = regexp.MustCompile(`<[^>]*>`)

func wantRow(t *testing.T, p page, key string, parts ...string) {
	t.Helper()
	row := rowOf(p.body, key)
	for _, s := range parts {
		if !strings.Contains(row, s) {
			t.Fatalf("row of %q is %q, lacks %q", key, row, s)
		}
	}
}

func TestIPAMSubnetsPage(t *testing.T) {
	t.Parallel()
	e := ipamEnv(t)
	b := e.browser()
	b.signIn("netops", "netops-pass-1")
	p := b.get("/data/private/ipam/")
	want(t, p, 200, "6 subnets", `href="/data/private/ipam_subnet/"`, `href="/data/private/ipam/vlan/"`)
	// Usage counts addresses hosts may use: the /24's broadcast record is not counted.
	wantRow(t, p, `href="/data/private/ipam/10.1.2.0/24/"`, "Servers", "Rack row 2", "paris", "10.1.2.1", "3 / 254 · 1.2%")
	wantRow(t, p, `href="/data/private/ipam/10.1.0.0/16/"`, "4 / 65,534")
	wantRow(t, p, `href="/data/private/ipam/10.0.0.0/8/"`, "4 / 16,777,214")
	wantRow(t, p, `href="/data/private/ipam/10.1.2.4/31/"`, "0 / 2 · 0.0%")
	wantRow(t, p, `href="/data/private/ipam/10.1.2.9/32/"`, "0 / 1")
	want(t, p, 200, `<meter min="0" max="254" low="177" high="228" optimum="0" value="3"`)
	// By address, nested.
	order := []string{"10.0.0.0/8/", "10.1.0.0/16/", "10.1.2.0/24/", "10.1.2.4/31/", "10.1.2.9/32/", "192.168.0.0/24/"}
	depth := []string{"depth-0", "depth-1", "depth-2", "depth-3", "depth-3", "depth-0"}
	last := 0
	for i, s := range order {
		at := strings.Index(p.body, `href="/data/private/ipam/`+s+`"`)
		if at < last {
			t.Fatalf("%s is not after the subnet before it", s)
		}
		last = at
		if tr := strings.LastIndex(p.body[:at], "<tr"); !strings.Contains(p.body[tr:at], depth[i]) {
			t.Fatalf("%s: want %s in %s", s, depth[i], p.body[tr:at])
		}
	}
	// Paging.
	p = b.get("/data/private/ipam/?size=4")
	want(t, p, 200, `href="/data/private/ipam/10.1.2.4/31/"`, `href="?page=2&amp;size=4"`)
	lacks(t, p, `href="/data/private/ipam/10.1.2.9/32/"`)
	p = b.get("/data/private/ipam/?page=2&size=4")
	want(t, p, 200, `href="/data/private/ipam/10.1.2.9/32/"`, `href="/data/private/ipam/192.168.0.0/24/"`, `href="?page=1&amp;size=4"`)
	// Only the subnets inside a CIDR.
	p = b.get("/data/private/ipam/?within=10.1.0.0/16&size=2")
	want(t, p, 200, "4 subnets inside 10.1.0.0/16", `href="/data/private/ipam/10.1.0.0/16/"`, `href="/data/private/ipam/10.1.2.0/24/"`,
		`href="?page=2&amp;size=2&amp;within=10.1.0.0%2F16"`)
	lacks(t, p, `href="/data/private/ipam/10.0.0.0/8/"`, `href="/data/private/ipam/192.168.0.0/24/"`, `href="/data/private/ipam/10.1.2.4/31/"`)
	want(t, b.get("/data/private/ipam/?within=10.1.0.0/8"), 400, "has host bits set (expected 10.0.0.0/8)")
	// A keyname an old version left that is not a CIDR is counted, not shown.
	e.exec(`INSERT INTO instances(id, classname, keyname, created_at, updated_at) VALUES((SELECT max(id) + 1000 FROM instances), 'ipam_subnet', 'old lan', '', '')`)
	want(t, b.get("/data/private/ipam/"), 200, "1 ipam_subnet instances are not shown")
}

func TestIPAMSubnetPage(t *testing.T) {
	t.Parallel()
	e := ipamEnv(t)
	b := e.browser()
	b.signIn("netops", "netops-pass-1")
	p := b.get("/data/private/ipam/10.1.2.0/24/")
	want(t, p, 200, `href="/data/private/ipam_subnet/10.1.2.0/24/"`, "Rack row 2", "3 / 254",
		`href="/data/private/ipam_vlan/v100/"`, "VLAN 100 (v100 · Servers)")
	lacks(t, p, "VLAN 20")
	// Contained in /8 and /16; directly inside it the /31 and the /32.
	for _, s := range []string{"10.0.0.0/8", "10.1.0.0/16", "10.1.2.4/31", "10.1.2.9/32"} {
		want(t, p, 200, `href="/data/private/ipam/`+s+`/"`)
	}
	if i, j := strings.Index(p.body, "Contained in"), strings.Index(p.body, "Subnets inside it"); i < 0 || j < i {
		t.Fatalf("parents and children sections: %d %d", i, j)
	}
	wantRow(t, p, "<td>10.1.2.0</td>", "network address")
	wantRow(t, p, `href="/data/private/ipam_ip/0a010201/"`, "10.1.2.1", "gateway", "allocated", "gw1")
	wantRow(t, p, `href="/data/private/ipam_ip/0a010202/"`, "collected")
	wantRow(t, p, "10.1.2.3 –", "10.1.2.3 – 10.1.2.9", "free · 7 addresses")
	wantRow(t, p, `href="/data/private/ipam_ip/0a01020a/"`, "misfiled", "10.1.0.0/16", "another subnet")
	wantRow(t, p, "10.1.2.11 –", "10.1.2.11 – 10.1.2.254", "free · 244 addresses")
	wantRow(t, p, `href="/data/private/ipam_ip/0a0102ff/"`, "not a host address")
	// Addresses in order.
	order := []string{"<td>10.1.2.0</td>", "0a010201", "0a010202", "10.1.2.3 –", "0a01020a", "10.1.2.11 –", "0a0102ff"}
	last := 0
	for _, s := range order {
		at := strings.Index(p.body[last:], s)
		if at < 0 {
			t.Fatalf("%q not after the rows before it", s)
		}
		last += at
	}

	// A page of two addresses, then the next from 10.1.2.10.
	p = b.get("/data/private/ipam/10.1.2.0/24/?size=2")
	want(t, p, 200, "0a010202", "10.1.2.3 – 10.1.2.9", `href="?from=10.1.2.10&amp;size=2"`)
	lacks(t, p, "0a01020a", "10.1.2.11 –")
	p = b.get("/data/private/ipam/10.1.2.0/24/?from=10.1.2.10&size=2")
	want(t, p, 200, "0a01020a", "0a0102ff", "free · 244 addresses", `href="/data/private/ipam/10.1.2.0/24/"`)
	lacks(t, p, "0a010201", "More addresses")

	// /31 and /32: every address is usable.
	p = b.get("/data/private/ipam/10.1.2.4/31/")
	want(t, p, 200, "0 / 2")
	wantRow(t, p, "10.1.2.4 –", "10.1.2.4 – 10.1.2.5", "free · 2 addresses")
	lacks(t, p, "network address", "broadcast address")
	p = b.get("/data/private/ipam/10.1.2.9/32/")
	want(t, p, 200, "0 / 1")
	wantRow(t, p, "<td>10.1.2.9</td>", "free · 1 address")
	// 192.168.0.0/24 has no address at all, nor a VLAN of netops's... it has v20.
	p = b.get("/data/private/ipam/192.168.0.0/24/")
	want(t, p, 200, "0 / 254", "network address", "broadcast address", "free · 254 addresses", "VLAN 20")

	// A subnet's page lists at most 100 subnets inside it, and links to them all.
	var many strings.Builder
	for i := 1; i <= 105; i++ {
		many.WriteString("- {classname: ipam_subnet, keyname: 192.168.0." + strconv.Itoa(i) + "/32}\n")
	}
	e.load(many.String())
	p = b.get("/data/private/ipam/192.168.0.0/24/")
	want(t, p, 200, `href="/data/private/ipam/192.168.0.100/32/"`, "5 more subnets directly inside it",
		`href="/data/private/ipam/?within=192.168.0.0%2F24"`)
	lacks(t, p, `href="/data/private/ipam/192.168.0.101/32/"`)
	want(t, b.get("/data/private/ipam/?within=192.168.0.0%2F24&size=200"), 200, "106 subnets inside 192.168.0.0/24",
		`href="/data/private/ipam/192.168.0.105/32/"`)

	// /0: the whole address space.
	e.load(`[{classname: ipam_subnet, keyname: 0.0.0.0/0, displayname: Everything}, {classname: ipam_ip, displayname: 255.255.255.255}]`)
	p = b.get("/data/private/ipam/0.0.0.0/0/")
	want(t, p, 200, "6 / 4,294,967,294", "network address", "10.1.3.0 – 172.16.0.4", "172.16.0.10 – 255.255.255.254")
	wantRow(t, p, `href="/data/private/ipam_ip/ffffffff/"`, "not a host address")
	wantRow(t, p, "0.0.0.1 –", "0.0.0.1 – 10.1.2.0", "free · 167,838,208 addresses")
	want(t, b.get("/data/private/ipam/10.0.0.0/8/"), 200, "Contained in", `href="/data/private/ipam/0.0.0.0/0/"`)
}

func TestIPAMBadInput(t *testing.T) {
	t.Parallel()
	e := ipamEnv(t)
	b := e.browser()
	b.signIn("netops", "netops-pass-1")
	for _, tc := range []struct {
		path   string
		status int
		msg    string
	}{
		{"/data/private/ipam/10.1.2.1/24/", 400, `&#34;10.1.2.1/24&#34; has host bits set (expected 10.1.2.0/24)`},
		{"/data/private/ipam/10.1.2.0/33/", 400, `&#34;10.1.2.0/33&#34; is not an IPv4 subnet (A.B.C.D/N)`},
		{"/data/private/ipam/vlans/", 400, `&#34;vlans&#34; is not an IPv4 subnet`},
		{"/data/private/ipam/10.1.2.0/24/extra/", 400, "is not an IPv4 subnet"},
		{"/data/private/ipam/10.9.0.0/16/", 404, "There is no subnet 10.9.0.0/16."},
		{"/data/private/ipam/10.1.2.0/24/?from=10.1.2", 400, `The page start is wrong: &#34;10.1.2&#34; is not an IPv4 address.`},
		{"/data/private/ipam/10.1.2.0/24/?from=10.1.3.0", 400, "The page start 10.1.3.0 is not in 10.1.2.0/24."},
		{"/data/private/ipam/find/?ip=300.1.1.1", 400, `&#34;300.1.1.1&#34; is not an IPv4 address: enter a dotted address such as 10.0.0.1.`},
		{"/data/private/ipam/find/?ip=10.1.2.0/24", 400, `&#34;10.1.2.0/24&#34; is not an IPv4 address`},
		{"/data/private/ipam/find/?ip=" + url.QueryEscape("<b>x</b>"), 400, `&#34;&lt;b&gt;x&lt;/b&gt;&#34; is not an IPv4 address`},
		{"/data/private/ipam/find/?ip=" + strings.Repeat("9", 5000), 400, "is not an IPv4 address"},
		{"/data/private/ipam/?page=-3&size=0", 200, "6 subnets"},
	} {
		p := b.get(tc.path)
		want(t, p, tc.status, tc.msg)
		lacks(t, p, "<b>x</b>", "internal error")
	}
	// The find form keeps what was typed.
	want(t, b.get("/data/private/ipam/find/?ip=10.1.2.300"), 400, `id="ip" value="10.1.2.300"`)
	// Pages are read-only: a form post with a valid token is refused, without one too.
	tok := b.csrf()
	want(t, b.post("/data/private/ipam/", url.Values{"csrf": {tok}}), http.StatusMethodNotAllowed)
	want(t, b.post("/data/private/ipam/find/", url.Values{}), http.StatusForbidden)
}

func TestIPAMFindAnIP(t *testing.T) {
	t.Parallel()
	e := ipamEnv(t)
	b := e.browser()
	b.signIn("netops", "netops-pass-1")
	want(t, b.get("/data/private/ipam/find/"), 200, `id="find-form"`, "Enter an IPv4 address")

	p := b.get("/data/private/ipam/find/?ip=+10.1.2.1+")
	want(t, p, 200, "keyname 0a010201", `IP record: <a href="/data/private/ipam_ip/0a010201/">10.1.2.1</a> · gw1 (allocated)`)
	for _, s := range []string{"10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24"} {
		want(t, p, 200, `href="/data/private/ipam/`+s+`/"`)
	}
	lacks(t, p, "10.1.2.4/31", "10.1.2.9/32", "192.168.0.0/24")
	wantRow(t, p, `href="/data/private/box/s1/"`, "box", "Server one", "mgmt")
	wantRow(t, p, `href="/data/private/box/s2/"`, "extra")
	wantRow(t, p, `href="/data/private/ipam_subnet/10.1.2.0/24/"`, "ipam_subnet", "gateway")
	lacks(t, p, "secret_box", "s9", `href="/data/private/box/s3/"`)
	want(t, p, 200, "Searched 9 instances")

	// Someone who may read secret_box sees it hold the address too.
	a := e.browser()
	a.signIn("admin", adminPassword)
	p = a.get("/data/private/ipam/find/?ip=10.1.2.1")
	wantRow(t, p, `href="/data/private/secret_box/s9/"`, "addr")
	want(t, p, 200, "Searched 10 instances")

	// An address in no subnet, held in a multi-valued field and collected on the way.
	p = b.get("/data/private/ipam/find/?ip=172.16.0.5")
	want(t, p, 200, "It is in no subnet.", "(collected)", `href="/data/private/box/s2/"`)
	// An address nobody holds, without a record.
	p = b.get("/data/private/ipam/find/?ip=10.200.0.1")
	want(t, p, 200, "No ipam_ip record for this address.", "No instance you may read holds it", `href="/data/private/ipam/10.0.0.0/8/"`)
	// /32 and /31 bounds.
	want(t, b.get("/data/private/ipam/find/?ip=10.1.2.9"), 200, `href="/data/private/ipam/10.1.2.9/32/"`)
	p = b.get("/data/private/ipam/find/?ip=10.1.2.5")
	want(t, p, 200, `href="/data/private/ipam/10.1.2.4/31/"`)
	lacks(t, p, "10.1.2.9/32")
	// 0.0.0.0/0 contains every address.
	e.load(`{classname: ipam_subnet, keyname: 0.0.0.0/0}`)
	want(t, b.get("/data/private/ipam/find/?ip=172.16.0.5"), 200, `href="/data/private/ipam/0.0.0.0/0/"`)
	want(t, b.get("/data/private/ipam/find/?ip=255.255.255.255"), 200, `href="/data/private/ipam/0.0.0.0/0/"`)
}

func TestIPAMVLANs(t *testing.T) {
	t.Parallel()
	e := ipamEnv(t)
	b := e.browser()
	b.signIn("netops", "netops-pass-1")
	e.load(`{classname: ipam_vlan, keyname: v7, vlan_id: 7}`)
	testkit.SetDataField(t, e.db, "ipam_vlan", "v7", "subnet", []string{"10.77.0.0/16"})
	p := b.get("/data/private/ipam/vlan/")
	want(t, p, 200, "3 VLANs", `href="/data/private/ipam_vlan/v100/"`)
	wantRow(t, p, `href="/data/private/ipam_vlan/v100/"`, "100", "Servers", "10.1.2.0/24", "3 / 254", "10.1.0.0/16", "4 / 65,534")
	wantRow(t, p, `href="/data/private/ipam_vlan/v20/"`, "192.168.0.0/24", "0 / 254")
	wantRow(t, p, `href="/data/private/ipam_vlan/v7/"`, "10.77.0.0/16 (no such subnet)")
	// By VLAN id, as numbers: 7, 20, 100.
	i7, i20, i100 := strings.Index(p.body, "v7/"), strings.Index(p.body, "v20/"), strings.Index(p.body, "v100/")
	if i7 >= i20 || i20 >= i100 {
		t.Fatalf("VLAN order: v7 at %d, v20 at %d, v100 at %d", i7, i20, i100)
	}
	p = b.get("/data/private/ipam/vlan/?size=2&page=2")
	want(t, p, 200, "v100/", `href="?page=1&amp;size=2"`)
	lacks(t, p, "v20/")
}

func TestIPAMGates(t *testing.T) {
	t.Parallel()
	e := ipamEnv(t)
	// No p_data_access: no IPAM at all.
	nd := e.browser()
	nd.signIn("nodata", "nodata-pass-1")
	lacks(t, nd.get("/"), `href="/data/private/ipam/"`)
	for _, u := range []string{"/data/private/ipam/", "/data/private/ipam/10.1.2.0/24/", "/data/private/ipam/find/?ip=10.1.2.1", "/data/private/ipam/vlan/"} {
		want(t, nd.get(u), http.StatusForbidden)
	}
	// p_data_access without read on the IPAM schemas: 403 naming what is missing.
	ni := e.browser()
	ni.signIn("noipam", "noipam-pass-1")
	for _, u := range []string{"/data/private/ipam/", "/data/private/ipam/10.1.2.0/24/", "/data/private/ipam/find/?ip=10.1.2.1", "/data/private/ipam/vlan/"} {
		p := ni.get(u)
		want(t, p, http.StatusForbidden, "The IPAM pages need read permission on ipam_subnet and ipam_ip.")
		lacks(t, p, "10.1.2.1/", "Server one")
	}
	// Without read on ipam_vlan: no VLAN tab, no VLAN page, no VLANs on a subnet's page.
	nv := e.browser()
	nv.signIn("novlan", "novlan-pass-1")
	p := nv.get("/data/private/ipam/")
	want(t, p, 200, "6 subnets")
	lacks(t, p, `href="/data/private/ipam/vlan/"`, `href="/data/private/ipam_vlan/"`)
	want(t, nv.get("/data/private/ipam/vlan/"), http.StatusForbidden, "The VLAN page needs read permission on ipam_vlan.")
	p = nv.get("/data/private/ipam/10.1.2.0/24/")
	want(t, p, 200, "3 / 254")
	lacks(t, p, "v100", "VLAN 100")
	// The dashboard tile of the built-in entry leads to the tool.
	want(t, nv.get("/"), 200, `href="/data/private/ipam/"`)
	// Without the IPAM schemas the tool says so.
	e.exec("DELETE FROM schemas WHERE keyname = 'ipam_ip'")
	e.exec("UPDATE schema_generation SET generation = generation + 1")
	want(t, nv.get("/data/private/ipam/"), http.StatusNotFound, "The IPAM schemas are not installed (schema ipam_ip does not exist).")
}
