package console

import (
	"context"
	"net/url"

	"dataservice/store"
	"dataservice/store/model"
)

// refGroupItems bounds the referrers a detail page lists by name; the counts and the
// filtered lists cover every one.
const refGroupItems = 100

// refGroup is one schema's instances that refer to the instance a detail page shows:
// how many in all, through which fields (each with its count and the list filtered to
// it), and the first of them by name.
type refGroup struct {
	Classname, Title string
	Count            int
	Fields           []refField
	Items            []store.Reference
	// More is how many the page does not list by name.
	More int
}

// refField is one reference field of a refGroup's schema.
type refField struct {
	Field, Label, ListURL string
	Count                 int
}

// referenceGroups groups what refers to cls/key by schema, keeping only the schemas
// auth may read (a referrer's keyname, and even their number, are data of its schema).
func (c *Console) referenceGroups(ctx context.Context, auth *model.Auth, cls, key string) ([]refGroup, error) {
	counts, err := c.db.ReferenceCounts(ctx, cls, key)
	if err != nil {
		return nil, err
	}
	items, err := c.referencedBy(ctx, auth, cls, key, refGroupItems)
	if err != nil {
		return nil, err
	}
	var out []refGroup
	at := map[string]int{}
	for _, rc := range counts {
		sch, err := c.db.Schema(ctx, rc.Classname)
		if err != nil || !model.CanRead(auth, sch) {
			continue
		}
		i, seen := at[rc.Classname]
		if !seen {
			title := sch.Displayname
			if title == "" {
				title = sch.Keyname
			}
			i = len(out)
			at[rc.Classname] = i
			out = append(out, refGroup{Classname: rc.Classname, Title: title})
		}
		g := &out[i]
		g.Count += rc.Count
		v := url.Values{"field": {rc.Field}, "value": {key}}
		g.Fields = append(g.Fields, refField{Field: rc.Field, Label: columnTitle(sch, rc.Field), Count: rc.Count,
			ListURL: "/data/private/" + url.PathEscape(rc.Classname) + "/?" + v.Encode()})
	}
	for _, r := range items {
		if i, ok := at[r.Classname]; ok {
			out[i].Items = append(out[i].Items, r)
		}
	}
	for i := range out {
		// An instance referring through two fields is listed (and counted) once per field.
		out[i].More = max(0, out[i].Count-len(out[i].Items))
	}
	return out, nil
}

// ipamLink is the link to the `ipam_ip` record of the dotted address, or "" when there
// is none or auth may not read `ipam_ip`.
func (c *Console) ipamLink(ctx context.Context, auth *model.Auth, dotted string) string {
	hex, err := model.HexIP(dotted)
	if err != nil {
		return ""
	}
	sch, err := c.db.Schema(ctx, "ipam_ip")
	if err != nil || !model.CanRead(auth, sch) {
		return ""
	}
	if _, err := c.db.Instance(ctx, "ipam_ip", hex); err != nil {
		return ""
	}
	return link("ipam_ip", hex)
}
