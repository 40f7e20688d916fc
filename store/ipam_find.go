package store

import (
	"context"
	"fmt"

	"dataservice/internal/clip"
	"dataservice/store/model"
)

// IPv4Holder is an instance holding an address in one of its ipv4 fields.
type IPv4Holder struct {
	Classname, Keyname, Displayname, Field string
}

// IPv4Search is the outcome of FindIPv4Holders.
type IPv4Search struct {
	Holders []IPv4Holder
	// Scanned is how many instances were read.
	Scanned int
	// Truncated is true when the search stopped at its limit of holders.
	Truncated bool
	// Unsearched lists the schemas not searched, or not to the end, because the
	// budget of instances ran out (the first one may have been searched in part).
	Unsearched []string
}

// ipv4ScanBatch is how many rows FindIPv4Holders reads per query.
const ipv4ScanBatch = 5000

// FindIPv4Holders finds the instances that hold the dotted address addr in an ipv4
// field (single addresses, not subnets), in the schemas may accepts. Field values are
// not indexed: it reads the schemas' rows in id order, at most budget of them in all,
// testing each row's JSON text for the quoted address in SQL (only matching rows are
// decoded), and stops at limit holders.
func (db *DB) FindIPv4Holders(ctx context.Context, addr string, may func(*model.Schema) bool, budget, limit int) (*IPv4Search, error) {
	if _, err := ParseIPv4(addr); err != nil {
		return nil, err
	}
	names, err := db.SchemaNames(ctx)
	if err != nil {
		return nil, err
	}
	res := &IPv4Search{}
	needle := jsonString(addr)
	for _, name := range names {
		s, err := db.Schema(ctx, name)
		if err != nil {
			return nil, err
		}
		fields := s.IPv4AddressFields()
		if len(fields) == 0 || !may(s) {
			continue
		}
		if res.Truncated || res.Scanned >= budget {
			if n, err := db.CountInstances(ctx, name); err != nil || n > 0 {
				res.Unsearched = append(res.Unsearched, name)
			}
			continue
		}
		done, err := db.scanIPv4Holders(ctx, s, fields, needle, addr, budget, limit, res)
		if err != nil {
			return nil, err
		}
		if !done && !res.Truncated {
			res.Unsearched = append(res.Unsearched, name)
		}
	}
	return res, nil
}

// scanIPv4Holders reads s's rows into res until the end of s (done), the budget or
// the limit.
func (db *DB) scanIPv4Holders(ctx context.Context, s *model.Schema, fields []*model.Field, needle, addr string, budget, limit int, res *IPv4Search) (done bool, err error) {
	var after int64
	for {
		n := min(ipv4ScanBatch, budget-res.Scanned)
		if n <= 0 {
			var more bool
			err := db.reader().queryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM instances WHERE classname = ? AND id > ?)",
				s.Keyname, after).Scan(&more)
			if err != nil {
				return false, fmt.Errorf("search %s for %s: %w", s.Keyname, addr, err)
			}
			return !more, nil
		}
		rows, err := db.reader().queryContext(ctx, `SELECT id, keyname, displayname, CASE WHEN `+db.dia.contains("data", "?")+` THEN data END
			FROM instances WHERE classname = ? AND id > ? ORDER BY id LIMIT ?`, needle, s.Keyname, after, n)
		if err != nil {
			return false, fmt.Errorf("search %s for %s: %w", s.Keyname, addr, err)
		}
		read := 0
		for rows.Next() {
			var key, disp string
			var data *string
			if err := rows.Scan(&after, &key, &disp, &data); err != nil {
				rows.Close()
				return false, fmt.Errorf("search %s for %s: %w", s.Keyname, addr, err)
			}
			read++
			if data == nil {
				continue
			}
			m, err := model.DecodeData(*data)
			if err != nil {
				rows.Close()
				return false, fmt.Errorf("search %s %s for %s: %w", s.Keyname, key, addr, err)
			}
			for _, f := range fields {
				if !holds(m[f.Keyname], addr) {
					continue
				}
				if len(res.Holders) == limit {
					res.Truncated = true
					res.Scanned += read
					rows.Close()
					return false, nil
				}
				res.Holders = append(res.Holders, IPv4Holder{Classname: s.Keyname, Keyname: key, Displayname: disp, Field: f.Keyname})
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return false, fmt.Errorf("search %s for %s: %w", s.Keyname, addr, err)
		}
		res.Scanned += read
		if read < n {
			return true, nil
		}
	}
}

// holds reports whether a field value (a scalar or a list) is addr.
func holds(v any, addr string) bool {
	switch v := v.(type) {
	case string:
		return v == addr
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok && s == addr {
				return true
			}
		}
	}
	return false
}

// InstancesReferencing returns up to limit instances of cls whose field (a schema
// reference, single or multi-valued) holds key, in id order. It reads cls's rows, with
// a text test in SQL before the exact one.
func (db *DB) InstancesReferencing(ctx context.Context, cls, field, key string, limit int) ([]*Instance, error) {
	if !model.ValidFieldName(field) {
		return nil, model.Errorf(model.EInvalid, "invalid field name %s", clip.Quote(field))
	}
	rows, err := db.reader().queryContext(ctx, `SELECT `+instanceCols+` FROM instances
		WHERE classname = ? AND `+db.dia.contains("data", "?")+`
		AND `+db.dia.jsonHolds("instances.data", "?", "?")+`
		ORDER BY id LIMIT ?`, cls, jsonString(key), "$."+field, key, limit)
	if err != nil {
		return nil, fmt.Errorf("find %s referencing %s: %w", cls, key, err)
	}
	defer rows.Close()
	var out []*Instance
	for rows.Next() {
		in, err := scanInstance(rows)
		if err != nil {
			return nil, fmt.Errorf("find %s referencing %s: %w", cls, key, err)
		}
		out = append(out, in)
	}
	return out, rows.Err()
}
