package bootstrap

import (
	"fmt"

	"dataservice/store"
)

// block480 converts ipam_ip to keyname mode hexip: every instance whose keyname is a
// dotted IPv4 address gets the address as displayname and the derived hex keyname; no
// row stays under the dotted keyname. Other keynames are left alone; a dotted instance
// whose hex twin already exists is skipped with a warning.
func (s *starter) block480(tx *store.Tx) error {
	err := s.reloads(tx,
		reloadStep{"60_ipam.yml", []string{"_schema:ipam_ip"}, ""},
		reloadStep{"30_dataview.yml", []string{"_dataview:ipam_ip_default"}, ""})
	if err != nil {
		return err
	}
	renames := map[string]string{}
	skipped := 0
	var after int64
	for {
		batch, err := tx.Instances("ipam_ip", after, 1000)
		if err != nil {
			return err
		}
		for _, in := range batch {
			after = in.ID
			if !store.IsDottedIPv4(in.Keyname) {
				continue
			}
			hex, _ := store.HexIP(in.Keyname)
			taken, err := tx.Instance("ipam_ip", hex)
			if err == nil && taken.ID != in.ID {
				s.log.Warn("4.8.0: hex keyname already exists; dotted ipam_ip left as is",
					"keyname", in.Keyname, "hex", hex)
				skipped++
				continue
			}
			if err != nil && !store.IsNotFound(err) {
				return err
			}
			if err := tx.ConvertKeyname(in, hex, in.Keyname); err != nil {
				return fmt.Errorf("convert ipam_ip %s: %w", in.Keyname, err)
			}
			renames[in.Keyname] = hex
		}
		if len(batch) < 1000 {
			break
		}
	}
	refs, err := s.rewriteRefs(tx, "ipam_ip", renames)
	if err != nil {
		return err
	}
	s.log.Info("4.8.0: ipam_ip keynames converted to hexip", "converted", len(renames), "skipped", skipped,
		"references_updated", refs)
	return s.reload(tx, "20_home.yml", []string{"_home:ipam"}, "")
}

// rewriteRefs applies renames of target's instances to every schema field referencing target.
func (s *starter) rewriteRefs(tx *store.Tx, target string, renames map[string]string) (int, error) {
	if len(renames) == 0 {
		return 0, nil
	}
	fields, err := tx.ReferencingFields(target)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, f := range fields {
		n, err := tx.RewriteReferences(f[0], f[1], renames)
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// block490 makes ipam_subnet keynames strict CIDRs: an instance whose `subnet` field is
// set, differs from its keyname and is a valid aligned IPv4 CIDR is renamed to it, with
// every reference (ipam_vlan.subnet, ipam_ip.subnet, ...) rewritten; others are logged
// and left. Then the field definition `subnet` is deleted and the dataview reloaded.
func (s *starter) block490(tx *store.Tx) error {
	if err := s.reload(tx, "60_ipam.yml", []string{"_schema:ipam_subnet"}, ""); err != nil {
		return err
	}
	renames := map[string]string{}
	invalid := map[int64]bool{}
	// Passes repeat while renames happen: a rename may free the CIDR another instance wants.
	var conflicts map[int64]string
	for progress := true; progress; {
		progress = false
		conflicts = map[int64]string{}
		var after int64
		for {
			batch, err := tx.Instances("ipam_subnet", after, 1000)
			if err != nil {
				return err
			}
			for _, in := range batch {
				after = in.ID
				cidr, _ := in.Data["subnet"].(string)
				if cidr == "" || cidr == in.Keyname || invalid[in.ID] {
					continue
				}
				if err := store.CheckIPv4(cidr, "subnet strict"); err != nil {
					s.log.Warn("4.9.0: subnet field is not a strict IPv4 CIDR; instance left as is",
						"keyname", in.Keyname, "subnet", cidr, "error", err.Error())
					invalid[in.ID] = true
					continue
				}
				taken, err := tx.Instance("ipam_subnet", cidr)
				if err == nil && taken.ID != in.ID {
					conflicts[in.ID] = in.Keyname + " -> " + cidr + ": ipam_subnet " + cidr + " already exists"
					continue
				}
				if err != nil && !store.IsNotFound(err) {
					return err
				}
				old := in.Keyname
				if err := tx.ConvertKeyname(in, cidr, in.Displayname); err != nil {
					return err
				}
				// An instance is renamed at most once (afterwards keyname == subnet), and the
				// references are rewritten in one simultaneous pass below, so a chain
				// (B: X -> Y, then A: a -> X) maps old values correctly.
				renames[old] = cidr
				progress = true
			}
			if len(batch) < 1000 {
				break
			}
		}
	}
	for _, msg := range conflicts {
		s.log.Warn("4.9.0: rename reported errors; instance skipped", "error", msg)
	}
	refs, err := s.rewriteRefs(tx, "ipam_subnet", renames)
	if err != nil {
		return err
	}
	s.log.Info("4.9.0: ipam_subnet instances renamed to their CIDR", "renamed", len(renames),
		"skipped", len(invalid)+len(conflicts), "references_updated", refs)
	if err := tx.DeleteField("ipam_subnet", "subnet"); err != nil {
		return err
	}
	return s.reload(tx, "30_dataview.yml", []string{"_dataview:ipam_subnet"}, "")
}
