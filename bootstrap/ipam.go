package bootstrap

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"

	"dataservice/store"
	"dataservice/store/model"
)

// block480 converts ipam_ip to keyname mode hexip: every instance whose keyname is a
// dotted IPv4 address gets the address as displayname and the derived hex keyname; no
// row stays under the dotted keyname. Other keynames are left alone; a dotted instance
// whose hex twin already exists is skipped with a warning.
func (s *starter) block480(ctx context.Context, tx *store.Migration) error {
	err := s.reloads(ctx, tx,
		reloadStep{"60_ipam.yml", []string{"_schema:ipam_ip"}, ""},
		reloadStep{"30_dataview.yml", []string{"_dataview:ipam_ip_default"}, ""})
	if err != nil {
		return err
	}
	// The converted addresses, as numbers: 4 bytes each rather than a map of keynames.
	converted := map[uint32]struct{}{}
	skipped := 0
	var after int64
	for {
		batch, err := tx.InstanceKeys(ctx, "ipam_ip", "", after, 1000)
		if err != nil {
			return err
		}
		for _, in := range batch {
			after = in.ID
			num, ok := ipv4Number(in.Keyname)
			if !ok {
				continue
			}
			dotted := in.Keyname // ConvertKeyname updates in.Keyname to hex
			hex, _ := model.HexIP(dotted)
			err := tx.ConvertKeyname(ctx, in, hex, dotted)
			if store.ErrorCode(err) == model.EConflict {
				s.log.Warn("4.8.0: hex keyname already exists; dotted ipam_ip left as is",
					"keyname", dotted, "hex", hex)
				skipped++
				continue
			}
			if err != nil {
				return fmt.Errorf("convert ipam_ip %s: %w", dotted, err)
			}
			converted[num] = struct{}{}
		}
		if len(batch) < 1000 {
			break
		}
	}
	refs := 0
	if len(converted) > 0 {
		refs, err = tx.RewriteAllReferencesFunc(ctx, "ipam_ip", func(old string) (string, bool) {
			num, ok := ipv4Number(old)
			if _, done := converted[num]; !ok || !done {
				return "", false
			}
			hex, _ := model.HexIP(old)
			return hex, true
		})
		if err != nil {
			return err
		}
	}
	s.log.Info("4.8.0: ipam_ip keynames converted to hexip", "converted", len(converted), "skipped", skipped,
		"references_updated", refs)
	return s.reload(ctx, tx, "20_home.yml", []string{"_home:ipam"}, "")
}

// ipv4Number is the number of a canonical dotted IPv4 address (ok is false for
// anything else, as model.IsDottedIPv4).
func ipv4Number(s string) (uint32, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() || a.String() != s {
		return 0, false
	}
	b := a.As4()
	return binary.BigEndian.Uint32(b[:]), true
}

// rewriteRefs applies renames of target's instances to every schema field referencing
// target, in one pass per referencing schema.
func (s *starter) rewriteRefs(ctx context.Context, tx *store.Migration, target string, renames map[string]string) (int, error) {
	return tx.RewriteAllReferences(ctx, target, renames)
}

// block490 makes ipam_subnet keynames strict CIDRs: an instance whose `subnet` field is
// set, differs from its keyname and is a valid aligned IPv4 CIDR is renamed to it, with
// every reference (ipam_vlan.subnet, ipam_ip.subnet, ...) rewritten; others are logged
// and left. Then the field definition `subnet` is deleted and the dataview reloaded.
func (s *starter) block490(ctx context.Context, tx *store.Migration) error {
	if err := s.reload(ctx, tx, "60_ipam.yml", []string{"_schema:ipam_subnet"}, ""); err != nil {
		return err
	}
	sch, err := tx.Schema(ctx, "ipam_subnet")
	if err != nil {
		return err
	}
	// Without the field definition (deleted by an earlier run of this block) any
	// `subnet` value left in the data is not a field and is never read back: a re-run
	// must not undo renames users made since.
	hasField := sch.Field("subnet") != nil
	renames := map[string]string{}
	invalid := map[int64]bool{}
	// Passes repeat while renames happen: a rename may free the CIDR another instance wants.
	var conflicts map[int64]string
	for progress := hasField; progress; {
		progress = false
		conflicts = map[int64]string{}
		var after int64
		for {
			batch, err := tx.InstanceKeys(ctx, "ipam_subnet", "subnet", after, 1000)
			if err != nil {
				return err
			}
			for _, in := range batch {
				after = in.ID
				if invalid[in.ID] {
					continue
				}
				cidr, text := in.Data["subnet"].(string)
				if !text {
					if raw, set := in.Data["subnet"].(json.RawMessage); set && string(raw) != "[]" {
						s.log.Warn("4.9.0: subnet field is not text; instance left as is",
							"keyname", in.Keyname, "subnet", string(raw))
						invalid[in.ID] = true
					}
					continue
				}
				if cidr == "" || cidr == in.Keyname {
					continue
				}
				if err := model.CheckIPv4(cidr, "subnet strict"); err != nil {
					s.log.Warn("4.9.0: subnet field is not a strict IPv4 CIDR; instance left as is",
						"keyname", in.Keyname, "subnet", cidr, "error", err.Error())
					invalid[in.ID] = true
					continue
				}
				old := in.Keyname
				err := tx.ConvertKeyname(ctx, in, cidr, in.Displayname)
				if store.ErrorCode(err) == model.EConflict {
					// Taken, perhaps by an instance a later pass renames away.
					conflicts[in.ID] = old + " -> " + cidr + ": ipam_subnet " + cidr + " already exists"
					continue
				}
				if err != nil {
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
	ids := make([]int64, 0, len(conflicts))
	for id := range conflicts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		s.log.Warn("4.9.0: rename reported errors; instance skipped", "error", conflicts[id])
	}
	refs, err := s.rewriteRefs(ctx, tx, "ipam_subnet", renames)
	if err != nil {
		return err
	}
	s.log.Info("4.9.0: ipam_subnet instances renamed to their CIDR", "renamed", len(renames),
		"skipped", len(invalid)+len(conflicts), "references_updated", refs)
	if err := tx.DeleteField(ctx, "ipam_subnet", "subnet"); err != nil {
		return err
	}
	return s.reload(ctx, tx, "30_dataview.yml", []string{"_dataview:ipam_subnet"}, "")
}
