package store

import (
	"context"
	"fmt"
	"strings"
)

// ipv4AddressFields lists the fields of s holding single IPv4 addresses (dataformat
// ipv4 without the subnet extension): the values IP collection looks at.
func (s *Schema) ipv4AddressFields() []*Field {
	var out []*Field
	for _, f := range s.Fields {
		if f.Dataformat == "ipv4" && !strings.Contains(f.DataformatExt, "subnet") {
			out = append(out, f)
		}
	}
	return out
}

// collectIPs creates, for every address in the ipv4 fields of in, the missing ipam_ip
// instance with collected: true (written addresses are collected). ipam_ip itself and schemas without ipv4
// fields are left alone; so is everything when the ipam_ip schema does not exist.
func (tx *Tx) collectIPs(ctx context.Context, s *Schema, in *Instance) (int, error) {
	if s.Keyname == "ipam_ip" {
		return 0, nil
	}
	fields := s.ipv4AddressFields()
	if len(fields) == 0 {
		return 0, nil
	}
	ipSchema, err := tx.Schema(ctx, "ipam_ip")
	if IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	created := 0
	for _, f := range fields {
		var values []any
		switch v := in.Data[f.Keyname].(type) {
		case string:
			values = []any{v}
		case []any:
			values = v
		}
		for _, v := range values {
			addr, _ := v.(string)
			hex, err := HexIP(addr)
			if err != nil {
				continue
			}
			if _, ok := tx.known["ipam_ip\x00"+hex]; ok {
				continue
			}
			if err := tx.fromSnapshot(ctx, "ipam_ip", hex); err != nil {
				return created, err
			}
			// One statement instead of a lookup and an insert: most addresses repeat.
			now := tx.db.now()
			res, err := tx.exec(ctx, `INSERT INTO instances(id, classname, keyname, displayname, is_enabled, data, created_at, updated_at)
				VALUES(`+nextInstanceID+`, 'ipam_ip', ?, ?, 1, '{"collected":true}', ?, ?) ON CONFLICT(classname, keyname) DO NOTHING`,
				hex, addr, now, now)
			if err != nil {
				return created, fmt.Errorf("collect %s: %w", addr, err)
			}
			tx.remember("ipam_ip", hex)
			if n, _ := res.RowsAffected(); n == 0 {
				continue
			}
			ip := &Instance{Classname: "ipam_ip", Keyname: hex, Displayname: addr, IsEnabled: true,
				Data: map[string]any{"collected": true}}
			if err := tx.revision(ctx, "ipam_ip", hex, "create", "", instanceDoc(ipSchema, ip, `{"collected":true}`)); err != nil {
				return created, err
			}
			created++
		}
	}
	return created, nil
}

// CollectIPs scans every instance of every schema with ipv4 fields and creates the
// missing ipam_ip instances (`dataservice ipam collect`). It returns how many it created.
func (db *DB) CollectIPs(ctx context.Context, author string) (int, error) {
	names, err := db.SchemaNames(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, name := range names {
		s, err := db.Schema(ctx, name)
		if err != nil {
			return total, err
		}
		if name == "ipam_ip" || len(s.ipv4AddressFields()) == 0 {
			continue
		}
		var after int64
		for {
			var n int
			err := db.WithTxAs(ctx, Revisions{Author: author}, func(tx *Tx) error {
				batch, err := tx.Instances(ctx, name, after, 1000)
				if err != nil {
					return err
				}
				n = len(batch)
				for _, in := range batch {
					c, err := tx.collectIPs(ctx, s, in)
					if err != nil {
						return fmt.Errorf("collect %s %s: %w", name, in.Keyname, err)
					}
					total += c
					after = in.ID
				}
				return nil
			})
			if err != nil {
				return total, err
			}
			if n < 1000 {
				break
			}
		}
	}
	return total, nil
}
