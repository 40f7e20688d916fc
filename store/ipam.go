package store

import (
	"context"
	"errors"
	"fmt"

	"dataservice/store/model"
)

// collectIPs creates, for every address in the ipv4 fields of in, the missing ipam_ip
// instance with collected: true (written addresses are collected). ipam_ip itself and
// schemas without ipv4 fields are left alone; so is everything when the ipam_ip schema
// does not exist.
//
// Each address goes through the apply path as the system identity, so it is validated
// against the ipam_ip schema as it stands (its keyname mode, required fields, defaults,
// the dataformat of collected) and gets its revision as any created instance. An
// address the schema refuses is not collected: the write that holds it succeeds, and
// the refusal comes back as a warning naming the address and the reason.
func (tx *Tx) collectIPs(ctx context.Context, s *model.Schema, in *Instance) (created int, warnings []string, err error) {
	if s.Keyname == "ipam_ip" {
		return 0, nil, nil
	}
	fields := s.IPv4AddressFields()
	if len(fields) == 0 {
		return 0, nil, nil
	}
	ipSchema, err := tx.Schema(ctx, "ipam_ip")
	if IsNotFound(err) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
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
			hex, err := model.HexIP(addr)
			if err != nil {
				continue
			}
			if _, ok := tx.known["ipam_ip\x00"+hex]; ok {
				continue
			}
			// Insert-if-absent instead of a lookup and an insert: most addresses repeat.
			ip := &Instance{Classname: "ipam_ip", Keyname: hex, Displayname: addr, IsEnabled: true,
				Data: map[string]any{"collected": true}}
			_, err = tx.Apply(ctx, Write{Schema: ipSchema, New: ip, Action: model.ActionCreate, ifAbsent: true},
				ApplyOptions{Auth: model.SystemAuth()})
			switch {
			case err == nil:
				created++
			case errors.Is(err, errExists):
				tx.remember("ipam_ip", hex)
			case ErrorCode(err) == model.EInternal:
				return created, warnings, fmt.Errorf("collect %s: %w", addr, err)
			default:
				// A refusal writes nothing: the transaction goes on. The address may be
				// stored already (validation comes before the insert-if-absent): then it
				// is collected, whatever the schema now says of new ones.
				exists, xerr := tx.instanceExists(ctx, "ipam_ip", hex)
				if xerr != nil {
					return created, warnings, fmt.Errorf("collect %s: %w", addr, xerr)
				}
				if exists {
					continue
				}
				msg := ErrorMessage(err)
				warnings = append(warnings, fmt.Sprintf("ipam_ip %s not collected (from %s %s, field %s): %s",
					addr, s.Keyname, in.Keyname, f.Keyname, msg))
				if _, logged := tx.known[collectRefusedKey]; !logged {
					// Once a transaction: a load of many refused addresses logs one line,
					// its report names them.
					tx.db.log.Warn("ipam collection refused by the ipam_ip schema", "address", addr,
						"classname", s.Keyname, "keyname", in.Keyname, "field", f.Keyname, "error", msg)
					tx.remember("", collectRefusedKey[1:])
				}
			}
		}
	}
	return created, warnings, nil
}

// collectRefusedKey marks, in a transaction's existence cache, that a refused
// collection was logged. No instance has an empty classname, so no lookup meets it.
const collectRefusedKey = "\x00ipam_refused"

// CollectResult is what CollectIPs did.
type CollectResult struct {
	// Created is the number of ipam_ip instances created.
	Created int
	// Skipped is the number of addresses the ipam_ip schema refused.
	Skipped int
	// Warnings name the first refused addresses (at most MaxErrorMessages) and why.
	Warnings []string
}

// CollectIPs scans every instance of every schema with ipv4 fields and creates the
// missing ipam_ip instances (`dataservice ipam collect`).
func (db *DB) CollectIPs(ctx context.Context, author string) (CollectResult, error) {
	var res CollectResult
	names, err := db.SchemaNames(ctx)
	if err != nil {
		return res, err
	}
	for _, name := range names {
		s, err := db.Schema(ctx, name)
		if err != nil {
			return res, err
		}
		if name == "ipam_ip" || len(s.IPv4AddressFields()) == 0 {
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
					c, warnings, err := tx.collectIPs(ctx, s, in)
					if err != nil {
						return fmt.Errorf("collect %s %s: %w", name, in.Keyname, err)
					}
					res.Created += c
					res.Skipped += len(warnings)
					res.Warnings = appendBounded(res.Warnings, warnings)
					after = in.ID
				}
				return nil
			})
			if err != nil {
				return res, err
			}
			if n < 1000 {
				break
			}
		}
	}
	return res, nil
}

// appendBounded appends more to list, keeping at most MaxErrorMessages items.
func appendBounded(list, more []string) []string {
	for _, m := range more {
		if len(list) >= MaxErrorMessages {
			break
		}
		list = append(list, m)
	}
	return list
}
