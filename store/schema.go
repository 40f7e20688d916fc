package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"dataservice/internal/clip"
	"dataservice/store/model"
)

// Schema is a class of instances: its attributes and ordered fields.
type Schema struct {
	ID          int64
	Keyname     string
	Displayname string
	Description string
	KeynameMode string
	IsEnabled   bool
	IsBuiltin   bool
	// Schema-level permissions; empty means the global p_data_* permission applies.
	PRead, PCreate, PUpdate, PDelete, PAdmin string
	// Options holds display hints (icon, page, order, handle_method, ...) as given.
	Options map[string]any
	Fields  []*Field
	byName  map[string]*Field
}

// Field is a field definition of a schema.
type Field struct {
	ID            int64
	Classname     string
	Keyname       string
	Displayname   string
	Description   string
	Dataformat    string
	DataformatExt string
	CardinalMin   int
	CardinalMax   int
	Default       any
	Order         int
	IsEnabled     bool
	Options       map[string]any
}

// Field returns the field named name, or nil.
func (s *Schema) Field(name string) *Field { return s.byName[name] }

func loadSchema(ctx context.Context, q querier, name string) (*Schema, error) {
	s := &Schema{byName: map[string]*Field{}}
	var opts string
	var pr, pc, pu, pd, pa sql.NullString
	err := q.queryRowContext(ctx, `SELECT id, keyname, displayname, description, keyname_mode, is_enabled,
		is_builtin, p_read, p_create, p_update, p_delete, p_admin, options FROM schemas WHERE keyname = ?`, name).
		Scan(&s.ID, &s.Keyname, &s.Displayname, &s.Description, &s.KeynameMode, &s.IsEnabled, &s.IsBuiltin,
			&pr, &pc, &pu, &pd, &pa, &opts)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, model.Errorf(model.ENotFound, "schema %s not found", clip.Quote(name))
	}
	if err != nil {
		return nil, fmt.Errorf("read schema %s: %w", name, err)
	}
	s.PRead, s.PCreate, s.PUpdate, s.PDelete, s.PAdmin = pr.String, pc.String, pu.String, pd.String, pa.String
	_ = json.Unmarshal([]byte(opts), &s.Options)
	rows, err := q.queryContext(ctx, `SELECT id, keyname, displayname, description, dataformat, dataformat_ext,
		cardinal_min, cardinal_max, default_value, sort_order, is_enabled, options
		FROM schema_fields WHERE classname = ? ORDER BY sort_order, id`, name)
	if err != nil {
		return nil, fmt.Errorf("read fields of %s: %w", name, err)
	}
	defer rows.Close()
	for rows.Next() {
		f := &Field{Classname: name}
		var def sql.NullString
		var fopts string
		if err := rows.Scan(&f.ID, &f.Keyname, &f.Displayname, &f.Description, &f.Dataformat, &f.DataformatExt,
			&f.CardinalMin, &f.CardinalMax, &def, &f.Order, &f.IsEnabled, &fopts); err != nil {
			return nil, fmt.Errorf("read fields of %s: %w", name, err)
		}
		if def.Valid {
			_ = json.Unmarshal([]byte(def.String), &f.Default)
			f.Default = fromJSON(f.Default)
		}
		_ = json.Unmarshal([]byte(fopts), &f.Options)
		s.Fields = append(s.Fields, f)
		s.byName[f.Keyname] = f
	}
	return s, rows.Err()
}

// Schema returns the schema named name from the read cache.
// The cache is keyed by the schema_generation counter, which every transaction
// that changes schemas bumps, so a change made by another process is seen at once.
func (db *DB) Schema(ctx context.Context, name string) (*Schema, error) {
	gen, err := db.generation(ctx)
	if err != nil {
		return nil, err
	}
	db.mu.RLock()
	s, ok := db.schemas[name]
	fresh := ok && db.schemaGen == gen
	local := db.local
	db.mu.RUnlock()
	if fresh {
		return s, nil
	}
	s, err = loadSchema(ctx, db.reader(), name)
	if err != nil {
		return nil, err
	}
	db.mu.Lock()
	// Store only when no local change dropped the cache while this read ran (it may
	// have read the old definition).
	if db.local == local {
		if db.schemas == nil || db.schemaGen != gen {
			db.schemas, db.schemaGen = map[string]*Schema{}, gen
		}
		db.schemas[name] = s
	}
	db.mu.Unlock()
	return s, nil
}

// DropSchemaCache forgets every cached schema.
func (db *DB) dropSchemaCache() {
	db.mu.Lock()
	db.schemas = nil
	db.local++
	db.mu.Unlock()
}

// Schema returns the schema named name as the transaction sees it.
func (tx *Tx) Schema(ctx context.Context, name string) (*Schema, error) {
	if s, ok := tx.schemas[name]; ok {
		return s, nil
	}
	s, err := loadSchema(ctx, tx, name)
	if err != nil {
		return nil, err
	}
	tx.schemas[name] = s
	return s, nil
}

// SchemaGeneration is the schema generation the transaction sees. Every committed
// change to a schema or its fields raises it, so two transactions that see the same
// generation, before either has written, see the same schemas.
func (tx *Tx) SchemaGeneration(ctx context.Context) (int64, error) {
	var gen int64
	if err := tx.queryRowContext(ctx, "SELECT generation FROM schema_generation").Scan(&gen); err != nil {
		return 0, fmt.Errorf("read schema generation: %w", err)
	}
	return gen, nil
}

// schemasChanged drops the transaction's cache and marks the DB cache for dropping.
func (tx *Tx) schemasChanged() {
	tx.touched = true
	tx.schemas = map[string]*Schema{}
}

// SchemaNames lists the keynames of all schemas.
func (db *DB) SchemaNames(ctx context.Context) ([]string, error) {
	rows, err := db.reader().queryContext(ctx, "SELECT keyname FROM schemas ORDER BY keyname")
	if err != nil {
		return nil, fmt.Errorf("list schemas: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("list schemas: %w", err)
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// Doc returns the schema in the load format (a `_schema` entry): header and
// attributes, `_options` (description and display hints, so a field named
// description never collides with the attribute), then the fields in order.
func (s *Schema) Doc() *Doc {
	d := &Doc{}
	d.Set("classname", "_schema")
	d.Set("keyname", s.Keyname)
	d.Set("displayname", s.Displayname)
	d.Set("keyname_mode", s.KeynameMode)
	d.Set("is_enabled", s.IsEnabled)
	for _, kv := range [][2]string{{"p_read", s.PRead}, {"p_create", s.PCreate}, {"p_update", s.PUpdate},
		{"p_delete", s.PDelete}, {"p_admin", s.PAdmin}} {
		if kv[1] != "" {
			d.Set(kv[0], kv[1])
		}
	}
	opts := cloneMap(s.Options)
	if s.Description != "" {
		opts["description"] = s.Description
	}
	if len(opts) > 0 {
		d.Set("_options", sortedDoc(opts))
	}
	for _, f := range s.Fields {
		d.Set(f.Keyname, sortedDoc(f.doc()))
	}
	return d
}

func (f *Field) doc() map[string]any {
	fd := map[string]any{
		"displayname":    f.Displayname,
		"description":    f.Description,
		"dataformat":     f.Dataformat,
		"dataformat_ext": f.DataformatExt,
		"cardinal_min":   int64(f.CardinalMin),
		"cardinal_max":   int64(f.CardinalMax),
		"order":          int64(f.Order),
		"is_enabled":     f.IsEnabled,
	}
	if f.Default != nil {
		fd["default"] = f.Default
	}
	for k, v := range f.Options {
		fd[k] = v
	}
	return fd
}
