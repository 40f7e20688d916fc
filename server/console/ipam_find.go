package console

import (
	"fmt"
	"net/http"
	"strings"

	"dataservice/store"
	"dataservice/store/model"
)

// vlanSubnetsMax bounds how many subnets the VLAN page shows per VLAN.
const vlanSubnetsMax = 100

// ipamVLANs: GET /data/private/ipam/vlan/ — VLANs by VLAN id, a page at a time, each
// with its subnets and their usage.
func (c *Console) ipamVLANs(w http.ResponseWriter, r *http.Request, q *req, d *ipamData) {
	if !d.VLANs {
		c.errorPage(w, r, q, http.StatusForbidden, "The VLAN page needs read permission on ipam_vlan.")
		return
	}
	ctx := r.Context()
	sch, err := c.db.Schema(ctx, "ipam_vlan")
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	page, size := c.pageSize(ctx, r.URL.Query())
	res, err := c.db.ListInstances(ctx, sch, store.ListQuery{Offset: (page - 1) * size, Limit: size, Sort: "vlan_id"})
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	d.View, d.Total = "vlans", res.Count
	for _, v := range res.Instances {
		id, _ := model.ScalarText(v.Data["vlan_id"])
		desc, _ := model.ScalarText(v.Data["description"])
		row := vlanRow{Keyname: v.Keyname, Link: link("ipam_vlan", v.Keyname), Name: v.Displayname, ID: id, Description: desc}
		var cidrs []string
		switch s := v.Data["subnet"].(type) {
		case string:
			cidrs = []string{s}
		case []any:
			for _, x := range s {
				if t, ok := x.(string); ok {
					cidrs = append(cidrs, t)
				}
			}
		}
		if len(cidrs) > vlanSubnetsMax {
			row.Missing = append(row.Missing, fmt.Sprintf("%d more subnets (see the VLAN's page)", len(cidrs)-vlanSubnetsMax))
			cidrs = cidrs[:vlanSubnetsMax]
		}
		for _, cidr := range cidrs {
			p, perr := store.ParseSubnet(cidr)
			in, err := c.db.Instance(ctx, "ipam_subnet", cidr)
			if perr != nil || store.IsNotFound(err) {
				row.Missing = append(row.Missing, cidr)
				continue
			}
			if err != nil {
				c.fail(w, r, q, err)
				return
			}
			s, err := c.subnetRowOf(ctx, store.Subnet{Prefix: p, Range: store.PrefixRange(p), Instance: in})
			if err != nil {
				c.fail(w, r, q, err)
				return
			}
			row.Subnets = append(row.Subnets, s)
		}
		d.VLANRows = append(d.VLANRows, row)
	}
	if page > 1 {
		d.PrevURL = fmt.Sprintf("?page=%d&size=%d", page-1, size)
	}
	if page*size < res.Count {
		d.NextURL = fmt.Sprintf("?page=%d&size=%d", page+1, size)
	}
	c.render(w, r, q, http.StatusOK, "ipam", "IPAM · VLANs", d)
}

// ipamFind: GET /data/private/ipam/find/?ip=A.B.C.D — the subnets containing the
// address (33 keyname lookups), its ipam_ip record, and the instances holding it in an
// ipv4 field in the schemas the user may read (a bounded scan: ipv4SearchBudget).
func (c *Console) ipamFind(w http.ResponseWriter, r *http.Request, q *req, d *ipamData) {
	ctx := r.Context()
	d.View, d.Budget = "find", ipv4SearchBudget
	d.IP = strings.TrimSpace(r.URL.Query().Get("ip"))
	if len(d.IP) > 64 {
		d.IP = d.IP[:64]
	}
	if d.IP == "" {
		c.render(w, r, q, http.StatusOK, "ipam", "IPAM · Find an IP", d)
		return
	}
	a, err := store.ParseIPv4(d.IP)
	if err != nil {
		d.Error = store.ErrorMessage(err) + ": enter a dotted address such as 10.0.0.1."
		c.render(w, r, q, http.StatusBadRequest, "ipam", "IPAM · Find an IP", d)
		return
	}
	d.Hex, _ = model.HexIP(d.IP)
	rec, err := c.db.Instance(ctx, "ipam_ip", d.Hex)
	switch {
	case err == nil:
		d.Record, d.RecordLink = rec, link("ipam_ip", rec.Keyname)
	case !store.IsNotFound(err):
		c.fail(w, r, q, err)
		return
	}
	subnets, err := c.db.SubnetsContaining(ctx, a)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	for _, s := range subnets {
		row, err := c.subnetRowOf(ctx, s)
		if err != nil {
			c.fail(w, r, q, err)
			return
		}
		d.Containing = append(d.Containing, row)
	}
	may := func(s *model.Schema) bool { return model.CanRead(q.auth, s) }
	d.Search, err = c.db.FindIPv4Holders(ctx, d.IP, may, ipv4SearchBudget, ipv4HoldersMax)
	if err != nil {
		c.fail(w, r, q, err)
		return
	}
	for _, h := range d.Search.Holders {
		d.Holders = append(d.Holders, holderRow{Schema: h.Classname, Keyname: h.Keyname, Displayname: h.Displayname,
			Field: h.Field, Link: link(h.Classname, h.Keyname)})
	}
	c.render(w, r, q, http.StatusOK, "ipam", "IPAM · "+d.IP, d)
}
