package store

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	"dataservice/internal/clip"
	"dataservice/store/model"
)

// checkKeynameMode validates a schema's keyname_mode.
func checkKeynameMode(m string) error {
	w := strings.Fields(m)
	switch {
	case len(w) == 1 && (w[0] == "edit" || w[0] == "hexip"):
		return nil
	case len(w) >= 2 && w[0] == "dataformat":
		if !dataformats[w[1]] || w[1] == "external" || w[1] == "secret" {
			return model.Errorf(model.EInvalid, "keyname_mode %s: unknown dataformat %s", clip.Quote(m), clip.Quote(w[1]))
		}
		return nil
	}
	return model.Errorf(model.EInvalid, "keyname_mode %s: expected edit, hexip or dataformat <dataformat> [ext...]", clip.Quote(m))
}

// putSchema applies a `_schema` entry. It returns the outcome.
func (tx *Tx) putSchema(ctx context.Context, e *Entry, action model.Action, system bool) (string, error) {
	name := e.Keyname
	if !schemaNameRE.MatchString(name) {
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
	case "noop":
		return OutSkipped, nil
	case "init":
		if exists {
			return OutUnchanged, nil
		}
	case "update":
		if !exists {
			return "", model.Errorf(model.ENotFound, "schema %s not found", clip.Quote(name))
		}
	case "delete":
		if !exists {
			return OutUnchanged, nil
		}
		return OutDeleted, tx.deleteSchema(ctx, old, system)
	case "enable", "disable":
		if !exists {
			return "", model.Errorf(model.ENotFound, "schema %s not found", clip.Quote(name))
		}
		want := action == "enable"
		if old.IsEnabled == want {
			return OutUnchanged, nil
		}
		if _, err := tx.exec(ctx, "UPDATE schemas SET is_enabled = ? WHERE keyname = ?", want, name); err != nil {
			return "", fmt.Errorf("write schema %s: %w", name, err)
		}
		tx.schemasChanged()
		return map[bool]string{true: OutEnabled, false: OutDisabled}[want], nil
	}

	next := &Schema{Keyname: name, KeynameMode: "edit", IsEnabled: true, IsBuiltin: system, Options: map[string]any{},
		byName: map[string]*Field{}}
	if exists {
		cp := *old
		next = &cp
		next.Options = cloneMap(old.Options)
		next.Fields = nil
		next.byName = map[string]*Field{}
		for _, f := range old.Fields {
			fc := *f
			fc.Options = cloneMap(f.Options)
			next.Fields = append(next.Fields, &fc)
			next.byName[fc.Keyname] = &fc
		}
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
		case strings.HasPrefix(k, "_") || headerKeys[k]:
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
		if err := next.setAttr(k, v); err != nil {
			return "", err
		}
	}
	var drop []string
	for i, k := range fieldKeys {
		fa, _ := e.Fields[k].(map[string]any)
		del, err := next.applyField(k, fa, i)
		if err != nil {
			return "", err
		}
		if del {
			drop = append(drop, k)
		}
	}
	before, after := "", mustJSON(next.Doc())
	if exists {
		before = mustJSON(old.Doc())
		if before == after && len(drop) == 0 {
			return OutUnchanged, nil
		}
	}
	if err := tx.writeSchema(ctx, next, drop); err != nil {
		return "", err
	}
	outcome, rev := OutCreated, "create"
	if exists {
		outcome, rev = OutUpdated, "update"
	}
	if err := tx.revision(ctx, "_schema", name, rev, before, mustJSON(next.Doc())); err != nil {
		return "", err
	}
	return outcome, nil
}

func (s *Schema) setAttr(k string, v any) error {
	text, ok := scalarText(v)
	if !ok {
		// Display hints may be structured; keep them as given.
		s.Options[k] = v
		return nil
	}
	switch k {
	case "displayname":
		s.Displayname = text
	case "description":
		s.Description = text
	case "is_enabled":
		b, ok := v.(bool)
		if !ok {
			if b, ok = BoolWord(text); !ok {
				return model.Errorf(model.EInvalid, "schema %s: is_enabled %s is not a boolean", s.Keyname, clip.Quote(text))
			}
		}
		s.IsEnabled = b
	case "keyname_mode":
		if err := checkKeynameMode(text); err != nil {
			return err
		}
		s.KeynameMode = strings.Join(strings.Fields(text), " ")
	case "p_read":
		s.PRead = text
	case "p_create":
		s.PCreate = text
	case "p_update":
		s.PUpdate = text
	case "p_delete":
		s.PDelete = text
	case "p_admin":
		s.PAdmin = text
	default:
		s.Options[k] = v
	}
	return nil
}

// applyField merges a field definition into s; it reports whether the field is to be deleted.
func (s *Schema) applyField(name string, attrs map[string]any, pos int) (bool, error) {
	if !fieldNameRE.MatchString(name) || headerKeys[name] {
		return false, model.Errorf(model.EInvalid, "schema %s: %s is not a valid field name", s.Keyname, clip.Quote(name))
	}
	f := s.byName[name]
	action, _ := scalarText(attrs["_action"])
	switch action {
	case "", "create", "update", "init", "noop", "delete", "create_or_update":
	default:
		return false, model.Errorf(model.EInvalid, "schema %s: field %s: unknown _action %s", s.Keyname, name, clip.Quote(action))
	}
	switch {
	case action == "noop":
		return false, nil
	case action == "delete":
		if f != nil {
			delete(s.byName, name)
			for i, x := range s.Fields {
				if x == f {
					s.Fields = append(s.Fields[:i], s.Fields[i+1:]...)
					break
				}
			}
			return true, nil
		}
		return false, nil
	case action == "init" && f != nil:
		return false, nil
	case action == "update" && f == nil:
		return false, model.Errorf(model.ENotFound, "schema %s: field %s not found", s.Keyname, name)
	}
	existed := f != nil
	if f == nil {
		f = &Field{Classname: s.Keyname, Keyname: name, Dataformat: "string", CardinalMax: 1, IsEnabled: true,
			Order: (pos + 1) * 10, Options: map[string]any{}}
		s.Fields = append(s.Fields, f)
		s.byName[name] = f
	}
	for k, v := range attrs {
		if k == "_action" {
			continue
		}
		text, scalar := scalarText(v)
		bad := func(what string) (bool, error) {
			return false, model.Errorf(model.EInvalid, "schema %s: field %s: %s %s is not %s", s.Keyname, name, k, clip.Quote(text), what)
		}
		switch k {
		case "displayname":
			f.Displayname = text
		case "description":
			f.Description = text
		case "dataformat":
			if !dataformats[text] {
				return false, model.Errorf(model.EInvalid, "schema %s: field %s: unknown dataformat %s", s.Keyname, name, clip.Quote(text))
			}
			// Stored hashes would become readable values of the new dataformat.
			if existed && f.Dataformat == "secret" && text != "secret" {
				return false, model.Errorf(model.EInvalid, "schema %s: field %s: a secret field cannot change its dataformat (to %s)", s.Keyname, name, text)
			}
			f.Dataformat = text
		case "dataformat_ext":
			f.DataformatExt = text
		case "cardinal_min", "cardinal_max", "order":
			n, ok := toInt(v)
			if !scalar || !ok || n < 0 {
				return bad("a non-negative integer")
			}
			switch k {
			case "cardinal_min":
				f.CardinalMin = n
			case "cardinal_max":
				f.CardinalMax = n
			default:
				f.Order = n
			}
		case "default":
			f.Default = v
		case "is_enabled":
			b, ok := v.(bool)
			if !ok {
				if b, ok = BoolWord(text); !ok {
					return bad("a boolean")
				}
			}
			f.IsEnabled = b
		default:
			f.Options[k] = v
		}
	}
	switch f.Dataformat {
	case "schema", "enumerate":
		if strings.TrimSpace(f.DataformatExt) == "" {
			return false, model.Errorf(model.EInvalid, "schema %s: field %s: dataformat %s needs dataformat_ext", s.Keyname, name, f.Dataformat)
		}
	case "external":
		if len(strings.Fields(f.DataformatExt)) < 2 {
			return false, model.Errorf(model.EInvalid, "schema %s: field %s: external needs dataformat_ext \"PARENT_FIELD REMOTE_FIELD\"", s.Keyname, name)
		}
	}
	if f.CardinalMax != 0 && f.CardinalMin > f.CardinalMax {
		return false, model.Errorf(model.EInvalid, "schema %s: field %s: cardinal_min %d exceeds cardinal_max %d", s.Keyname, name, f.CardinalMin, f.CardinalMax)
	}
	sort.SliceStable(s.Fields, func(i, j int) bool { return s.Fields[i].Order < s.Fields[j].Order })
	return false, nil
}

func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case int64:
		return int(x), true
	case int:
		return x, true
	case float64:
		if x == float64(int(x)) {
			return int(x), true
		}
	case string:
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(x), "%d", &n); err == nil && fmt.Sprint(n) == strings.TrimSpace(x) {
			return n, true
		}
		// A number the loader kept as text (1e3, 10.0).
		if f, err := parseFloatText(strings.TrimSpace(x)); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<31 {
			return int(f), true
		}
	}
	return 0, false
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (tx *Tx) writeSchema(ctx context.Context, s *Schema, drop []string) error {
	_, err := tx.execContext(ctx, `INSERT INTO schemas(keyname, displayname, description, keyname_mode, is_enabled,
		is_builtin, p_read, p_create, p_update, p_delete, p_admin, options) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT(keyname) DO UPDATE SET displayname = excluded.displayname, description = excluded.description,
		keyname_mode = excluded.keyname_mode, is_enabled = excluded.is_enabled, p_read = excluded.p_read,
		p_create = excluded.p_create, p_update = excluded.p_update, p_delete = excluded.p_delete,
		p_admin = excluded.p_admin, options = excluded.options`,
		s.Keyname, s.Displayname, s.Description, s.KeynameMode, s.IsEnabled, s.IsBuiltin, nullable(s.PRead),
		nullable(s.PCreate), nullable(s.PUpdate), nullable(s.PDelete), nullable(s.PAdmin), mustJSON(s.Options))
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
			def = mustJSON(f.Default)
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
			f.CardinalMax, def, f.Order, f.IsEnabled, mustJSON(f.Options))
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
	if _, err := tx.execContext(ctx, `UPDATE instances SET data = `+tx.db.dia.jsonRemove("data", "?")+`
		WHERE classname = ? AND `+tx.db.dia.jsonType("data", "?")+` IS NOT NULL`, path, classname, path); err != nil {
		return fmt.Errorf("delete values of field %s.%s: %w", classname, keyname, err)
	}
	tx.schemasChanged()
	return nil
}

func (tx *Tx) deleteSchema(ctx context.Context, s *Schema, system bool) error {
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
	before := mustJSON(s.Doc())
	if _, err := tx.execContext(ctx, "DELETE FROM schemas WHERE keyname = ?", s.Keyname); err != nil {
		return fmt.Errorf("delete schema %s: %w", s.Keyname, err)
	}
	tx.schemasChanged()
	return tx.revision(ctx, "_schema", s.Keyname, "delete", before, "")
}
