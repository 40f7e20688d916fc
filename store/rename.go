package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"dataservice/internal/clip"
	"dataservice/store/model"
)

// RenameReport is what a cascading rename did.
type RenameReport struct {
	From       string   `json:"from"`
	To         string   `json:"to"`
	References int      `json:"references"`
	Errors     []string `json:"errors,omitempty"`
}

// checkKeynameFor validates key against the schema's keyname mode.
func checkKeynameFor(s *model.Schema, key, displayname string) error {
	e := &model.Entry{Keyname: key}
	if strings.HasPrefix(s.KeynameMode, "hexip") {
		if !model.IsHexIP(key) {
			return model.Errorf(model.EInvalid, "%s: keyname %s is not 8 lowercase hex digits (keyname mode hexip)", s.Keyname, clip.Quote(key))
		}
		if displayname != "" {
			if hex, err := model.HexIP(displayname); err != nil || hex != key {
				return model.Errorf(model.EInvalid, "%s: keyname %s does not match displayname %s", s.Keyname, clip.Quote(key), clip.Quote(displayname))
			}
		}
		return nil
	}
	return e.ResolveKeyname(s)
}

// CheckRename reports whether in could be renamed to newKey (what a dry run checks).
func (tx *Tx) CheckRename(ctx context.Context, s *model.Schema, in *Instance, newKey string) error {
	if err := checkKeynameFor(s, newKey, in.Displayname); err != nil {
		return err
	}
	exists, err := tx.instanceExists(ctx, s.Keyname, newKey)
	if err != nil {
		return err
	}
	if exists {
		return model.Errorf(model.EConflict, "%s %s already exists", s.Keyname, clip.Quote(newKey))
	}
	return nil
}

// cascadeRename changes the keyname of in to newKey and rewrites, in the same
// transaction, every value of a `schema` field targeting s that holds the old keyname,
// in every instance of every schema. A target that exists or that the keyname mode
// rejects fails with an error and changes nothing. in is updated in place (and left as
// it was when the rename fails). It checks no permission: the apply path (applyRename)
// checks them first; Migrator.Rename is its only other caller.
func (tx *Tx) cascadeRename(ctx context.Context, s *model.Schema, in *Instance, newKey string) (*RenameReport, error) {
	rep := &RenameReport{From: in.Keyname, To: newKey}
	if newKey == in.Keyname {
		return rep, nil
	}
	if err := tx.CheckRename(ctx, s, in, newKey); err != nil {
		return nil, err
	}
	mark := tx.markEvents()
	if _, err := tx.exec(ctx, "SAVEPOINT rename"); err != nil {
		return nil, fmt.Errorf("rename: %w", err)
	}
	old, oldUpdated := in.Keyname, in.UpdatedAt
	if err := tx.rename(ctx, s, in, newKey, rep); err != nil {
		tx.exec(ctx, "ROLLBACK TO rename")
		tx.rollbackEvents(mark)
		tx.exec(ctx, "RELEASE rename")
		in.Keyname, in.UpdatedAt = old, oldUpdated
		return nil, err
	}
	if _, err := tx.exec(ctx, "RELEASE rename"); err != nil {
		return nil, fmt.Errorf("rename: %w", err)
	}
	return rep, nil
}

func (tx *Tx) rename(ctx context.Context, s *model.Schema, in *Instance, newKey string, rep *RenameReport) error {
	before := instanceDoc(s, in, "")
	was := *in
	old := in.Keyname
	now := tx.db.now()
	if _, err := tx.exec(ctx, "UPDATE instances SET keyname = ?, updated_at = ? WHERE id = ?", newKey, now, in.ID); err != nil {
		return fmt.Errorf("rename %s %s: %w", s.Keyname, old, err)
	}
	tx.listForSearch(in.ID)
	in.Keyname, in.UpdatedAt = newKey, now
	tx.forget() // the existence cache may hold the old keyname
	if err := tx.writeChange(ctx, s, model.ActionRename, &was, in, before, instanceDoc(s, in, "")); err != nil {
		return err
	}
	n, err := tx.rewriteAllReferences(ctx, s.Keyname, map[string]string{old: newKey})
	rep.References += n
	return err
}

// convertKeyname changes an instance's keyname (and displayname) in place, without
// validation, cascade or revision: only start-up migrations reach it
// (Migration.ConvertKeyname), for bulk conversions followed by one reference rewrite.
// When another instance of the class holds newKey, nothing changes and the error is
// model.EConflict; the transaction goes on.
func (tx *Tx) convertKeyname(ctx context.Context, in *Instance, newKey, displayname string) error {
	tx.forget()
	res, err := tx.exec(ctx, tx.db.dia.convertKeyname, newKey, displayname, tx.db.now(), in.ID)
	if err != nil {
		return fmt.Errorf("convert %s %s: %w", in.Classname, in.Keyname, err)
	}
	tx.listForSearch(in.ID)
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		// The unique (classname, keyname) index refused the row, or the row is gone.
		if exists, xerr := tx.instanceExists(ctx, in.Classname, newKey); xerr == nil && exists {
			return model.Errorf(model.EConflict, "%s %s already exists", in.Classname, clip.Quote(newKey))
		}
		return model.Errorf(model.ENotFound, "convert %s %s: instance not found", in.Classname, in.Keyname)
	}
	in.Keyname, in.Displayname = newKey, displayname
	return nil
}

// InstanceKeys lists up to limit instances of cls with id > afterID, in id order,
// reading only id, keyname, displayname and, when field is not empty, the value of
// field in Data[field]: a string when it is text, its JSON as a json.RawMessage when
// it is any other non-null value (a list, a number), absent when missing or null. It
// is the light scan of bulk keyname conversions.
func (tx *Tx) InstanceKeys(ctx context.Context, cls, field string, afterID int64, limit int) ([]*Instance, error) {
	value, args := "NULL, NULL", []any{cls, afterID, limit}
	if field != "" {
		path := `$."` + field + `"`
		value, args = tx.db.dia.jsonType("data", "?")+", "+tx.db.dia.jsonText("data", "?"), append([]any{path, path}, args...)
	}
	stmt, err := tx.stmt(ctx, "SELECT id, keyname, displayname, "+value+
		" FROM instances WHERE classname = ? AND id > ? ORDER BY id LIMIT ?")
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", cls, err)
	}
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", cls, err)
	}
	defer rows.Close()
	var out []*Instance
	for rows.Next() {
		in := &Instance{Classname: cls}
		var typ, v sql.NullString
		if err := rows.Scan(&in.ID, &in.Keyname, &in.Displayname, &typ, &v); err != nil {
			return nil, fmt.Errorf("list %s: %w", cls, err)
		}
		switch {
		case !typ.Valid || typ.String == "null":
		case typ.String == "text":
			in.Data = map[string]any{field: v.String}
		case typ.String == "true" || typ.String == "false":
			in.Data = map[string]any{field: json.RawMessage(typ.String)}
		default:
			in.Data = map[string]any{field: json.RawMessage(v.String)}
		}
		out = append(out, in)
	}
	return out, rows.Err()
}

// ReferencingFields lists (classname, field) pairs of `schema` fields targeting target.
func (tx *Tx) ReferencingFields(ctx context.Context, target string) ([][2]string, error) {
	return tx.referencingFields(ctx, target)
}

// referencingFields lists (classname, field) pairs of `schema` fields targeting target.
func (tx *Tx) referencingFields(ctx context.Context, target string) ([][2]string, error) {
	rows, err := tx.queryContext(ctx, "SELECT classname, keyname, dataformat_ext FROM schema_fields WHERE dataformat = 'schema'")
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

// rewriteAllReferences applies renames of target's instances to every `schema` field
// referencing target, one pass per referencing schema, so an instance holding the old
// keyname in several fields is written (and gets a revision) once. It returns the
// number of values changed.
func (tx *Tx) rewriteAllReferences(ctx context.Context, target string, renames map[string]string) (int, error) {
	if len(renames) == 0 {
		return 0, nil
	}
	return tx.rewriteAll(ctx, target, renamesFilter(renames), mapRename(renames))
}

func (tx *Tx) rewriteAll(ctx context.Context, target, only string, rename func(string) (string, bool)) (int, error) {
	refs, err := tx.referencingFields(ctx, target)
	if err != nil {
		return 0, err
	}
	var classes []string
	fields := map[string][]string{}
	for _, r := range refs {
		if _, ok := fields[r[0]]; !ok {
			classes = append(classes, r[0])
		}
		fields[r[0]] = append(fields[r[0]], r[1])
	}
	total := 0
	for _, cls := range classes {
		n, err := tx.rewriteReferences(ctx, cls, fields[cls], only, rename)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// renamesFilter is the one old keyname of a single rename (the scan then reads only the
// instances holding it), else "".
func renamesFilter(renames map[string]string) string {
	if len(renames) == 1 {
		for from := range renames {
			return from
		}
	}
	return ""
}

func mapRename(renames map[string]string) func(string) (string, bool) {
	return func(old string) (string, bool) {
		to, ok := renames[old]
		return to, ok
	}
}

// rewriteBatch is how many instances a reference rewrite reads at a time.
const rewriteBatch = 1000

// rewriteReferences rewrites fields of the instances of cls, a page of instances at a
// time (memory does not grow with the number of instances); only (when set) restricts
// the scan to instances holding that value. Only the data changes: the rewritten
// instance keeps its ipv4 values, so nothing is collected (IP collection runs for addresses
// when they are written; a reference rewrite writes none).
func (tx *Tx) rewriteReferences(ctx context.Context, cls string, fields []string, only string, rename func(string) (string, bool)) (int, error) {
	sch, err := tx.Schema(ctx, cls)
	if err != nil {
		return 0, err
	}
	var condArgs []any
	for _, field := range fields {
		path := `$."` + field + `"`
		if only != "" {
			condArgs = append(condArgs, path, only)
		} else {
			condArgs = append(condArgs, path)
		}
	}
	// cond is the condition in an engine's SQL (a dry run's snapshot may be another
	// engine's than its transaction).
	cond := func(dia *dialect) string {
		var c []string
		for range fields {
			if only != "" {
				c = append(c, dia.jsonHolds("instances.data", "?", "?"))
			} else {
				c = append(c, dia.jsonValue("data", "?")+" IS NOT NULL")
			}
		}
		return strings.Join(c, " OR ")
	}
	if err := tx.whereFromSnapshot(ctx, cls, cond, condArgs...); err != nil {
		return 0, err
	}
	query := "SELECT " + instanceCols + " FROM instances WHERE classname = ? AND id > ? AND (" +
		cond(tx.db.dia) + ") ORDER BY id LIMIT ?"
	stmt, err := tx.stmt(ctx, query)
	if err != nil {
		return 0, fmt.Errorf("rewrite references %s.%s: %w", cls, strings.Join(fields, ","), err)
	}
	changed := 0
	var after int64
	for {
		args := append(append([]any{cls, after}, condArgs...), rewriteBatch)
		rows, err := stmt.QueryContext(ctx, args...)
		if err != nil {
			return changed, fmt.Errorf("rewrite references %s.%s: %w", cls, strings.Join(fields, ","), err)
		}
		var hits []*Instance
		for rows.Next() {
			in, err := scanInstance(rows)
			if err != nil {
				rows.Close()
				return changed, fmt.Errorf("rewrite references %s.%s: %w", cls, strings.Join(fields, ","), err)
			}
			hits = append(hits, in)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return changed, fmt.Errorf("rewrite references %s.%s: %w", cls, strings.Join(fields, ","), err)
		}
		for _, in := range hits {
			after = in.ID
			n, err := tx.rewriteInstance(ctx, sch, in, fields, rename)
			if err != nil {
				return changed, err
			}
			changed += n
		}
		if len(hits) < rewriteBatch {
			return changed, nil
		}
	}
}

// rewriteInstance applies rename to fields of in and, when a value changed, writes
// the new data with an "update" revision. It returns the number of values changed.
func (tx *Tx) rewriteInstance(ctx context.Context, sch *model.Schema, in *Instance, fields []string, rename func(string) (string, bool)) (int, error) {
	var data map[string]any
	n := 0
	for _, field := range fields {
		switch v := in.Data[field].(type) {
		case string:
			if to, ok := rename(v); ok {
				if data == nil {
					data = model.CloneMap(in.Data)
				}
				data[field] = to
				n++
			}
		case []any:
			var l []any
			for i, it := range v {
				s, ok := it.(string)
				if !ok {
					continue
				}
				if to, ok := rename(s); ok {
					if l == nil {
						l = append([]any(nil), v...)
					}
					l[i] = to
					n++
				}
			}
			if l != nil {
				if data == nil {
					data = model.CloneMap(in.Data)
				}
				data[field] = l
			}
		}
	}
	if n == 0 {
		return 0, nil
	}
	next := *in
	next.Data = data
	next.UpdatedAt = tx.db.now()
	if _, err := tx.exec(ctx, "UPDATE instances SET data = ?, updated_at = ? WHERE id = ?", model.MustJSON(data), next.UpdatedAt, in.ID); err != nil {
		return 0, fmt.Errorf("rewrite references in %s %s: %w", in.Classname, in.Keyname, err)
	}
	tx.listForSearch(in.ID)
	if tx.rev.Off { // skip building the revision documents (migrations rewrite many)
		return n, nil
	}
	before, after := tx.deltas.Delta(sch, in, &next, "")
	if err := tx.writeChange(ctx, sch, model.ActionUpdate, in, &next, before, after); err != nil {
		return 0, err
	}
	return n, nil
}
