package store

import (
	"context"
	"fmt"
	"strings"

	"dataservice/internal/clip"
	"dataservice/store/model"
)

// putSchema applies a `_schema` entry. It returns the outcome.
func (tx *Tx) putSchema(ctx context.Context, e *model.Entry, action model.Action, system bool) (string, error) {
	name := e.Keyname
	if !model.ValidSchemaName(name) {
		return "", model.Errorf(model.EInvalid, "schema keyname %s must match [a-z_][a-z0-9_]{0,127}", clip.Quote(name))
	}
	if strings.HasPrefix(name, "_") && !system {
		return "", model.Errorf(model.EForbidden, "schema %s: names starting with _ are built-in", clip.Quote(name))
	}
	old, err := tx.Schema(ctx, name)
	if err != nil && !IsNotFound(err) {
		return "", err
	}
	exists := old != nil
	switch action {
	case model.ActionNoop:
		return OutSkipped, nil
	case model.ActionInit:
		if exists {
			return OutUnchanged, nil
		}
	case model.ActionUpdate:
		if !exists {
			return "", model.Errorf(model.ENotFound, "schema %s not found", clip.Quote(name))
		}
	case model.ActionDelete:
		if !exists {
			return OutUnchanged, nil
		}
		return OutDeleted, tx.deleteSchema(ctx, old, system)
	case model.ActionEnable, model.ActionDisable:
		if !exists {
			return "", model.Errorf(model.ENotFound, "schema %s not found", clip.Quote(name))
		}
		want := action == model.ActionEnable
		if old.IsEnabled == want {
			return OutUnchanged, nil
		}
		if _, err := tx.exec(ctx, "UPDATE schemas SET is_enabled = ? WHERE keyname = ?", want, name); err != nil {
			return "", fmt.Errorf("write schema %s: %w", name, err)
		}
		tx.schemasChanged()
		return map[bool]string{true: OutEnabled, false: OutDisabled}[want], nil
	}

	next := &model.Schema{Keyname: name, KeynameMode: "edit", IsEnabled: true, IsBuiltin: system, Options: map[string]any{}}
	if exists {
		next = old.Clone()
	}
	attrs := map[string]any{}
	var fieldKeys []string
	for _, k := range e.Order {
		v := e.Fields[k]
		switch {
		case k == "_options":
			m, ok := v.(map[string]any)
			if !ok {
				return "", model.Errorf(model.EInvalid, "schema %s: _options must be a mapping", name)
			}
			for ok2, ov := range m {
				attrs[ok2] = ov
			}
		case strings.HasPrefix(k, "_") || model.IsHeaderKey(k):
		default:
			if _, ok := v.(map[string]any); ok {
				fieldKeys = append(fieldKeys, k)
			} else {
				attrs[k] = v
			}
		}
	}
	if e.HasDisplayname {
		attrs["displayname"] = e.Displayname
	}
	if e.IsEnabled != nil {
		attrs["is_enabled"] = *e.IsEnabled
	}
	for k, v := range attrs {
		if err := next.SetAttr(k, v); err != nil {
			return "", err
		}
	}
	var drop []string
	for i, k := range fieldKeys {
		fa, _ := e.Fields[k].(map[string]any)
		del, err := next.ApplyField(k, fa, i)
		if err != nil {
			return "", err
		}
		if del {
			drop = append(drop, k)
		}
	}
	before, after := "", model.MustJSON(next.Doc())
	if exists {
		before = model.MustJSON(old.Doc())
		if before == after && len(drop) == 0 {
			return OutUnchanged, nil
		}
	}
	if err := tx.writeSchema(ctx, next, drop); err != nil {
		return "", err
	}
	outcome, rev := OutCreated, model.ActionCreate
	if exists {
		outcome, rev = OutUpdated, model.ActionUpdate
	}
	if err := tx.revision(ctx, "_schema", name, rev, before, model.MustJSON(next.Doc())); err != nil {
		return "", err
	}
	return outcome, nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (tx *Tx) writeSchema(ctx context.Context, s *model.Schema, drop []string) error {
	_, err := tx.execContext(ctx, `INSERT INTO schemas(keyname, displayname, description, keyname_mode, is_enabled,
		is_builtin, p_read, p_create, p_update, p_delete, p_admin, options) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT(keyname) DO UPDATE SET displayname = excluded.displayname, description = excluded.description,
		keyname_mode = excluded.keyname_mode, is_enabled = excluded.is_enabled, p_read = excluded.p_read,
		p_create = excluded.p_create, p_update = excluded.p_update, p_delete = excluded.p_delete,
		p_admin = excluded.p_admin, options = excluded.options`,
		s.Keyname, s.Displayname, s.Description, s.KeynameMode, s.IsEnabled, s.IsBuiltin, nullable(s.PRead),
		nullable(s.PCreate), nullable(s.PUpdate), nullable(s.PDelete), nullable(s.PAdmin), model.MustJSON(s.Options))
	if err != nil {
		return fmt.Errorf("write schema %s: %w", s.Keyname, err)
	}
	for _, name := range drop {
		if err := tx.deleteField(ctx, s.Keyname, name); err != nil {
			return err
		}
	}
	for _, f := range s.Fields {
		var def any
		if f.Default != nil {
			def = model.MustJSON(f.Default)
		}
		_, err := tx.execContext(ctx, `INSERT INTO schema_fields(classname, keyname, displayname, description,
			dataformat, dataformat_ext, cardinal_min, cardinal_max, default_value, sort_order, is_enabled, options)
			VALUES(?,?,?,?,?,?,?,?,?,?,?,?)
			ON CONFLICT(classname, keyname) DO UPDATE SET displayname = excluded.displayname,
			description = excluded.description, dataformat = excluded.dataformat,
			dataformat_ext = excluded.dataformat_ext, cardinal_min = excluded.cardinal_min,
			cardinal_max = excluded.cardinal_max, default_value = excluded.default_value,
			sort_order = excluded.sort_order, is_enabled = excluded.is_enabled, options = excluded.options`,
			s.Keyname, f.Keyname, f.Displayname, f.Description, f.Dataformat, f.DataformatExt, f.CardinalMin,
			f.CardinalMax, def, f.Order, f.IsEnabled, model.MustJSON(f.Options))
		if err != nil {
			return fmt.Errorf("write field %s.%s: %w", s.Keyname, f.Keyname, err)
		}
	}
	tx.schemasChanged()
	return nil
}

// deleteField removes a field definition and, in the same transaction, its values
// from every instance of the class: a search no longer matches them and nothing (a
// re-run migration block, a later field of the same name) can read them back. A schema
// write that drops a field uses it; start-up migrations reach it directly
// (Migration.DeleteField) for built-ins a reload cannot express.
func (tx *Tx) deleteField(ctx context.Context, classname, keyname string) error {
	if err := tx.classFromSnapshot(ctx, classname); err != nil {
		return err
	}
	if _, err := tx.execContext(ctx, "DELETE FROM schema_fields WHERE classname = ? AND keyname = ?",
		classname, keyname); err != nil {
		return fmt.Errorf("delete field %s.%s: %w", classname, keyname, err)
	}
	path := `$."` + keyname + `"`
	if err := tx.listWhereForSearch(ctx, "classname = ?1 AND "+tx.db.dia.jsonType("data", "?2")+" IS NOT NULL", classname, path); err != nil {
		return err
	}
	// Numbered placeholders: a dialect's fragment may use its path more than once;
	// one placeholder per fragment, as each fragment may give it another SQL type.
	if _, err := tx.execContext(ctx, `UPDATE instances SET data = `+tx.db.dia.jsonRemove("data", "?1")+`
		WHERE classname = ?2 AND `+tx.db.dia.jsonType("data", "?3")+` IS NOT NULL`, path, classname, path); err != nil {
		return fmt.Errorf("delete values of field %s.%s: %w", classname, keyname, err)
	}
	tx.schemasChanged()
	return nil
}

func (tx *Tx) deleteSchema(ctx context.Context, s *model.Schema, system bool) error {
	if s.IsBuiltin && !system {
		return model.Errorf(model.EForbidden, "schema %s is built-in and cannot be deleted", clip.Quote(s.Keyname))
	}
	if err := tx.classFromSnapshot(ctx, s.Keyname); err != nil {
		return err
	}
	var n int
	if err := tx.queryRowContext(ctx, "SELECT count(*) FROM instances WHERE classname = ?", s.Keyname).Scan(&n); err != nil {
		return fmt.Errorf("delete schema %s: %w", s.Keyname, err)
	}
	if n > 0 {
		return model.Errorf(model.EConflict, "schema %s still has %d instances; delete them first", clip.Quote(s.Keyname), n)
	}
	before := model.MustJSON(s.Doc())
	if _, err := tx.execContext(ctx, "DELETE FROM schemas WHERE keyname = ?", s.Keyname); err != nil {
		return fmt.Errorf("delete schema %s: %w", s.Keyname, err)
	}
	tx.schemasChanged()
	return tx.revision(ctx, "_schema", s.Keyname, model.ActionDelete, before, "")
}
