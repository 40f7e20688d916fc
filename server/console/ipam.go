package console

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"dataservice/store"
	"dataservice/store/model"
)

// The IPAM tool: /data/private/ipam/ (subnets with their usage), .../<CIDR>/ (a
// subnet's addresses), .../vlan/ (VLANs with their subnets) and .../find/?ip= (which
// subnets contain an address and which instances hold it). It needs read permission on
// ipam_subnet and ipam_ip; the VLAN page also on ipam_vlan; the holders of an address
// are searched only in the schemas the user may read.

const (
	// ipv4SearchBudget bounds how many instances one "find an IP" reads in ipv4 fields.
	ipv4SearchBudget = 1_000_000
	// ipv4HoldersMax bounds how many holders it lists.
	ipv4HoldersMax = 500
	// subnetVLANsMax bounds the VLANs a subnet's page lists.
	subnetVLANsMax = 100
	// subnetChildrenMax bounds the subnets a subnet's page lists inside it (the others
	// are on the subnets page filtered to it).
	subnetChildrenMax = 100
)

// usage is a subnet's usage: addresses in use among those hosts may use.
type usage struct {
	Used      int
	Size      uint64
	Percent   string
	Low, High uint64 // the meter's thresholds (70% and 90%)
}

func newUsage(used int, size uint64) usage {
	pct := 100 * float64(used) / float64(size)
	return usage{Used: used, Size: size, Percent: strconv.FormatFloat(pct, 'f', 1, 64) + "%",
		Low: size * 7 / 10, High: size * 9 / 10}
}

type subnetRow struct {
	CIDR, Link, Detail                     string
	Name, Description, Site, Gateway, VLAN string
	Depth                                  int
	Usage                                  usage
}

type ipamLink struct{ Title, URL string }

type ipamData struct {
	View  string // subnets, subnet, vlans, find
	VLANs bool   // the user may read ipam_vlan (the VLAN tab is shown)
	Lists []ipamLink

	Subnets          []subnetRow
	Skipped          int
	Total            int
	Within           string
	PrevURL, NextURL string

	Subnet   subnetRow
	Parents  []subnetRow
	Children []subnetRow
	// MoreChildren is how many subnets directly inside are not listed; WithinURL lists
	// them all.
	MoreChildren int
	WithinURL    string
	InVLANs      []ipamLink
	Rows         []addressRow
	FirstURL     string

	VLANRows []vlanRow

	IP, Error, Hex string
	Record         *store.Instance
	RecordLink     string
	Containing     []subnetRow
	Holders        []holderRow
	Search         *store.IPv4Search
	Budget         int
}

type addressRow struct {
	Kind, First, Last, Count       string
	Link, Hostname, Description    string
	Collected, Gateway             bool
	SubnetField, SubnetFieldLink   string
	SubnetFieldElsewhere, Reserved bool
}

type vlanRow struct {
	Keyname, Link, Name, ID, Description string
	Subnets                              []subnetRow
	Missing                              []string
}

type holderRow struct {
	Schema, Keyname, Displayname, Field, Link string
}

// ipamPage makes a page of the IPAM tool (/data/private/ipam/...): every page reads the
// IPAM schemas first (404 when they are not installed, 403 without read on the subnets
// and addresses) and gets what they give (ipamData).
func ipamPage(serve func(c *Console, w http.ResponseWriter, r *http.Request, q *req, d *ipamData)) pageFunc {
	return func(c *Console, w http.ResponseWriter, r *http.Request, q *req) {
		if d, ok := c.ipamSchemas(w, r, q); ok {
			serve(c, w, r, q, d)
		}
	}
}

// ipamSchemas reads the IPAM schemas the user may read; it answers the request itself
// when they are missing or the user may not read them.
func (c *Console) ipamSchemas(w http.ResponseWriter, r *http.Request, q *req) (*ipamData, bool) {
	ctx := r.Context()
	d := &ipamData{}
	for _, name := range []string{"ipam_subnet", "ipam_ip", "ipam_vlan"} {
		sch, err := c.db.Schema(ctx, name)
		if store.IsNotFound(err) && name == "ipam_vlan" {
			continue
		}
		if store.IsNotFound(err) {
			c.errorPage(w, r, q, http.StatusNotFound, "The IPAM schemas are not installed (schema "+name+" does not exist).")
			return nil, false
		}
		if err != nil {
			c.fail(w, r, q, err)
			return nil, false
		}
		if !model.CanRead(q.auth, sch) {
			if name == "ipam_vlan" {
				continue
			}
			c.errorPage(w, r, q, http.StatusForbidden, "The IPAM pages need read permission on ipam_subnet and ipam_ip.")
			return nil, false
		}
		if name == "ipam_vlan" {
			d.VLANs = true
		}
		d.Lists = append(d.Lists, ipamLink{Title: sch.Displayname, URL: "/data/private/" + name + "/"})
	}
	return d, true
}

// subnetRowOf describes a subnet with its usage.
func (c *Console) subnetRowOf(ctx context.Context, s store.Subnet) (subnetRow, error) {
	n, usable, err := c.db.SubnetUsage(ctx, s.Prefix)
	if err != nil {
		return subnetRow{}, err
	}
	str := func(k string) string { t, _ := model.ScalarText(s.Instance.Data[k]); return t }
	cidr := s.Prefix.String()
	return subnetRow{CIDR: cidr, Link: subnetLink(cidr), Detail: link("ipam_subnet", cidr),
		Name: s.Instance.Displayname, Description: str("description"), Site: str("site"), Gateway: str("gateway"),
		Depth: min(s.Depth, 6), Usage: newUsage(n, usable)}, nil
}

func subnetLink(cidr string) string { return "/data/private/ipam/" + cidr + "/" }

// ipamSubnets: GET /data/private/ipam/[?within=CIDR] — every subnet (or those inside
// a CIDR) by address, nested, a page at a time, each with its usage.
func (c *Console) ipamSubnets(w http.ResponseWriter, r *http.Request, q *req, d *ipamData) {
	ctx := r.Context()
	qs := r.URL.Query()
	var within store.IPRange
	if d.Within = strings.TrimSpace(qs.Get("within")); d.Within != "" {
		p, err := store.ParseSubnet(d.Within)
		if err != nil {
			c.errorPage(w, r, q, http.StatusBadRequest, "Not a subnet: "+store.ErrorMessage(err)+".")
			return
		}
		within = store.PrefixRange(p)
	}
	list, skipped, err := c.db.Subnets(ctx)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	if d.Within != "" {
		kept := list[:0]
		for _, s := range list {
			if within.Contains(s.Range.First) && within.Contains(s.Range.Last) {
				kept = append(kept, s)
			}
		}
		list, skipped = kept, 0
	}
	page, size := c.pageSize(ctx, qs)
	d.View, d.Skipped, d.Total = "subnets", skipped, len(list)
	start := min((page-1)*size, len(list))
	end := min(start+size, len(list))
	for _, s := range list[start:end] {
		row, err := c.subnetRowOf(ctx, s)
		if err != nil {
			c.fail(w, r, q, err)
			return
		}
		d.Subnets = append(d.Subnets, row)
	}
	pageURL := func(n int) string {
		u := fmt.Sprintf("?page=%d&size=%d", n, size)
		if d.Within != "" {
			u += "&within=" + url.QueryEscape(d.Within)
		}
		return u
	}
	if page > 1 {
		d.PrevURL = pageURL(page - 1)
	}
	if end < len(list) {
		d.NextURL = pageURL(page + 1)
	}
	c.render(w, r, q, http.StatusOK, "ipam", "IPAM · Subnets", d)
}

// ipamSubnet: GET /data/private/ipam/<CIDR>/ — a subnet: its usage, the subnets around
// and inside it, its VLANs, and its addresses with the free ranges between them, a
// page at a time (?from=<address>).
func (c *Console) ipamSubnet(w http.ResponseWriter, r *http.Request, q *req, d *ipamData) {
	cidr := q.ps.ByName("cidr")
	ctx := r.Context()
	p, err := store.ParseSubnet(cidr)
	if err != nil {
		c.errorPage(w, r, q, http.StatusBadRequest, "Not a subnet: "+store.ErrorMessage(err)+".")
		return
	}
	in, err := c.db.Instance(ctx, "ipam_subnet", cidr)
	if store.IsNotFound(err) {
		c.errorPage(w, r, q, http.StatusNotFound, "There is no subnet "+cidr+".")
		return
	}
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	all := store.PrefixRange(p)
	from := all.First
	if f := r.URL.Query().Get("from"); f != "" {
		a, err := store.ParseIPv4(f)
		if err != nil {
			c.errorPage(w, r, q, http.StatusBadRequest, "The page start is wrong: "+store.ErrorMessage(err)+".")
			return
		}
		if !all.Contains(a) {
			c.errorPage(w, r, q, http.StatusBadRequest, fmt.Sprintf("The page start %s is not in %s.", f, cidr))
			return
		}
		from = a
		d.FirstURL = subnetLink(cidr)
	}
	_, size := c.pageSize(ctx, r.URL.Query())
	d.View = "subnet"
	if d.Subnet, err = c.subnetRowOf(ctx, store.Subnet{Prefix: p, Range: all, Instance: in}); err != nil {
		c.fail(w, r, q, err)
		return
	}
	if err := c.subnetFamily(ctx, d, p); err != nil {
		c.fail(w, r, q, err)
		return
	}
	if d.VLANs {
		vlans, err := c.db.InstancesReferencing(ctx, "ipam_vlan", "subnet", cidr, subnetVLANsMax)
		if err != nil {
			c.fail(w, r, q, err)
			return
		}
		for _, v := range vlans {
			d.InVLANs = append(d.InVLANs, ipamLink{Title: vlanTitle(v), URL: link("ipam_vlan", v.Keyname)})
		}
	}
	pg, err := c.db.SubnetAddresses(ctx, p, from, size)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	for _, row := range pg.Rows {
		d.Rows = append(d.Rows, addressRowOf(row, p, cidr, d.Subnet.Gateway))
	}
	if pg.More {
		d.NextURL = "?from=" + url.QueryEscape(store.IPv4String(pg.Next)) + "&size=" + strconv.Itoa(size)
	}
	c.render(w, r, q, http.StatusOK, "ipam", "IPAM · "+cidr, d)
}

// subnetFamily sets the subnets containing p and those directly inside it.
func (c *Console) subnetFamily(ctx context.Context, d *ipamData, p netip.Prefix) error {
	parents, err := c.db.SubnetsContaining(ctx, store.PrefixRange(p).First)
	if err != nil {
		return err
	}
	for _, s := range parents {
		if s.Prefix.Bits() >= p.Bits() {
			continue
		}
		row, err := c.subnetRowOf(ctx, s)
		if err != nil {
			return err
		}
		d.Parents = append(d.Parents, row)
	}
	list, _, err := c.db.Subnets(ctx)
	if err != nil {
		return err
	}
	all := store.PrefixRange(p)
	var last store.IPRange
	for _, s := range list {
		if s.Prefix.Bits() <= p.Bits() || !all.Contains(s.Range.First) {
			continue
		}
		if len(d.Children)+d.MoreChildren > 0 && last.Contains(s.Range.First) {
			continue // inside a child: a grandchild
		}
		last = s.Range
		if len(d.Children) == subnetChildrenMax {
			d.MoreChildren++
			d.WithinURL = "/data/private/ipam/?within=" + url.QueryEscape(p.String())
			continue
		}
		row, err := c.subnetRowOf(ctx, s)
		if err != nil {
			return err
		}
		row.Depth = 0
		d.Children = append(d.Children, row)
	}
	return nil
}

// addressRowOf is a row of a subnet's address list (p, whose keyname is cidr).
func addressRowOf(row store.AddressRow, p netip.Prefix, cidr, gateway string) addressRow {
	first := store.IPv4String(row.Range.First)
	out := addressRow{Kind: row.Kind, First: first, Gateway: first == gateway && row.Range.Size() == 1}
	if n := row.Range.Size(); n > 1 {
		out.Last, out.Count = store.IPv4String(row.Range.Last), num(n)+" addresses"
	} else if row.Kind == store.AddrFree {
		out.Count = "1 address"
	}
	// An address recorded on the network or broadcast address of a subnet up to /30.
	out.Reserved = row.Kind == store.AddrUsed && !store.HostRange(p).Contains(row.Range.First)
	if row.IP == nil {
		return out
	}
	str := func(k string) string { t, _ := model.ScalarText(row.IP.Data[k]); return t }
	out.Link, out.Hostname, out.Description = link("ipam_ip", row.IP.Keyname), str("hostname"), str("description")
	out.Collected = str("collected") == "true"
	if s := str("subnet"); s != "" {
		out.SubnetField, out.SubnetFieldLink, out.SubnetFieldElsewhere = s, link("ipam_subnet", s), s != cidr
	}
	return out
}

func vlanTitle(v *store.Instance) string {
	id, _ := model.ScalarText(v.Data["vlan_id"])
	t := v.Keyname
	if v.Displayname != "" && v.Displayname != v.Keyname {
		t += " · " + v.Displayname
	}
	if id != "" {
		t = "VLAN " + id + " (" + t + ")"
	}
	return t
}
