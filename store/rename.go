package store

import (
	"fmt"
	"strings"
)

// RenameReport is what a cascading rename did.
type RenameReport struct {
	From       string   `json:"from"`
	To         string   `json:"to"`
	References int      `json:"references"`
	Errors     []string `json:"errors,omitempty"`
}

// checkKeynameFor validates key against the schema's keyname mode.
func checkKeynameFor(s *Schema, key, displayname string) error {
	e := &Entry{Keyname: key}
	if strings.HasPrefix(s.KeynameMode, "hexip") {
		if !isHexIP(key) {
			return Errorf(EInvalid, "%s: keyname %q is not 8 lowercase hex digits (keyname mode hexip)", s.Keyname, key)
		}
		if displayname != "" {
			if hex, err := HexIP(displayname); err != nil || hex != key {
				return Errorf(EInvalid, "%s: keyname %q does not match displayname %q", s.Keyname, key, displayname)
			}
		}
		return nil
	}
	return resolveKeyname(s, e)
}

// CheckRename reports whether in could be renamed to newKey (what a dry run checks).
func (tx *Tx) CheckRename(s *Schema, in *Instance, newKey string) error {
	if err := checkKeynameFor(s, newKey, in.Displayname); err != nil {
		return err
	}
	exists, err := tx.instanceExists(s.Keyname, newKey)
	if err != nil {
		return err
	}
	if exists {
		return Errorf(EConflict, "%s %q already exists", s.Keyname, newKey)
	}
	return nil
}

// Rename changes the keyname of in to newKey and rewrites, in the same transaction,
// every value of a `schema` field targeting s that holds the old keyname, in every
// instance of every schema. A target that exists or that the keyname mode rejects
// fails with an error and changes nothing. in is updated in place.
func (tx *Tx) Rename(s *Schema, in *Instance, newKey string) (*RenameReport, error) {
	rep := &RenameReport{From: in.Keyname, To: newKey}
	if newKey == in.Keyname {
		return rep, nil
	}
	if err := tx.CheckRename(s, in, newKey); err != nil {
		return nil, err
	}
	if _, err := tx.exec("SAVEPOINT rename"); err != nil {
		return nil, fmt.Errorf("rename: %w", err)
	}
	if err := tx.rename(s, in, newKey, rep); err != nil {
		tx.exec("ROLLBACK TO rename")
		tx.exec("RELEASE rename")
		return nil, err
	}
	if _, err := tx.exec("RELEASE rename"); err != nil {
		return nil, fmt.Errorf("rename: %w", err)
	}
	return rep, nil
}

func (tx *Tx) rename(s *Schema, in *Instance, newKey string, rep *RenameReport) error {
	before := instanceDoc(s, in)
	old := in.Keyname
	if _, err := tx.exec("UPDATE instances SET keyname = ?, updated_at = ? WHERE id = ?", newKey, tx.db.now(), in.ID); err != nil {
		return fmt.Errorf("rename %s %s: %w", s.Keyname, old, err)
	}
	in.Keyname = newKey
	if err := tx.revision(s.Keyname, newKey, "rename", before, instanceDoc(s, in)); err != nil {
		return err
	}
	refs, err := tx.referencingFields(s.Keyname)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		n, err := tx.rewriteReferences(ref[0], ref[1], map[string]string{old: newKey})
		if err != nil {
			return err
		}
		rep.References += n
	}
	return nil
}

// ConvertKeyname changes an instance's keyname (and displayname) in place, without
// validation, cascade or revision: start-up migrations use it for bulk conversions
// followed by one RewriteReferences pass per referencing field.
func (tx *Tx) ConvertKeyname(in *Instance, newKey, displayname string) error {
	if _, err := tx.exec("UPDATE instances SET keyname = ?, displayname = ?, updated_at = ? WHERE id = ?",
		newKey, displayname, tx.db.now(), in.ID); err != nil {
		return fmt.Errorf("convert %s %s: %w", in.Classname, in.Keyname, err)
	}
	in.Keyname, in.Displayname = newKey, displayname
	return nil
}

// ReferencingFields lists (classname, field) pairs of `schema` fields targeting target.
func (tx *Tx) ReferencingFields(target string) ([][2]string, error) {
	return tx.referencingFields(target)
}

// referencingFields lists (classname, field) pairs of `schema` fields targeting target.
func (tx *Tx) referencingFields(target string) ([][2]string, error) {
	rows, err := tx.QueryContext(tx.ctx, "SELECT classname, keyname, dataformat_ext FROM schema_fields WHERE dataformat = 'schema'")
	if err != nil {
		return nil, fmt.Errorf("find references to %s: %w", target, err)
	}
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var cls, field, ext string
		if err := rows.Scan(&cls, &field, &ext); err != nil {
			return nil, fmt.Errorf("find references to %s: %w", target, err)
		}
		if w := strings.Fields(ext); len(w) > 0 && w[0] == target {
			out = append(out, [2]string{cls, field})
		}
	}
	return out, rows.Err()
}

// RewriteReferences replaces, in field `field` of every instance of cls, each value
// that is a key of renames by its new keyname. It returns the number of values changed.
// Migrations use it to apply many renames in one pass.
func (tx *Tx) RewriteReferences(cls, field string, renames map[string]string) (int, error) {
	return tx.rewriteReferences(cls, field, renames)
}

func (tx *Tx) rewriteReferences(cls, field string, renames map[string]string) (int, error) {
	sch, err := tx.Schema(cls)
	if err != nil {
		return 0, err
	}
	path := `$."` + field + `"`
	query := "SELECT " + instanceCols + ` FROM instances WHERE classname = ? AND json_extract(data, ?) IS NOT NULL`
	args := []any{cls, path}
	if len(renames) == 1 {
		for from := range renames {
			query += " AND EXISTS (SELECT 1 FROM json_each(instances.data, ?) WHERE json_each.value = ?)"
			args = append(args, path, from)
		}
	}
	rows, err := tx.QueryContext(tx.ctx, query, args...)
	if err != nil {
		return 0, fmt.Errorf("rewrite references %s.%s: %w", cls, field, err)
	}
	var hits []*Instance
	for rows.Next() {
		in, err := scanInstance(rows)
		if err != nil {
			rows.Close()
			return 0, fmt.Errorf("rewrite references %s.%s: %w", cls, field, err)
		}
		hits = append(hits, in)
	}
	rows.Close()
	changed := 0
	for _, in := range hits {
		next := *in
		next.Data = cloneMap(in.Data)
		n := 0
		switch v := in.Data[field].(type) {
		case string:
			if to, ok := renames[v]; ok {
				next.Data[field] = to
				n++
			}
		case []any:
			l := make([]any, len(v))
			for i, it := range v {
				l[i] = it
				if s, ok := it.(string); ok {
					if to, ok := renames[s]; ok {
						l[i] = to
						n++
					}
				}
			}
			next.Data[field] = l
		}
		if n == 0 {
			continue
		}
		if err := tx.writeInstance(sch, in, &next, "update"); err != nil {
			return changed, err
		}
		changed += n
	}
	return changed, nil
}
