package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"dataservice/internal/clip"
	"dataservice/store/model"
)

func loadSchema(ctx context.Context, q querier, name string) (*model.Schema, error) {
	s := &model.Schema{}
	var opts string
	var pr, pc, pu, pd, pa sql.NullString
	err := sql.ErrNoRows
	// No stored name holds a NUL or bytes that are not UTF-8, and PostgreSQL refuses
	// both in a query: not found on both engines, rather than an engine error.
	if !strings.ContainsRune(name, 0) && utf8.ValidString(name) {
		err = q.queryRowContext(ctx, `SELECT id, keyname, displayname, description, keyname_mode, is_enabled,
		is_builtin, p_read, p_create, p_update, p_delete, p_admin, options FROM schemas WHERE keyname = ?`, name).
			Scan(&s.ID, &s.Keyname, &s.Displayname, &s.Description, &s.KeynameMode, &s.IsEnabled, &s.IsBuiltin,
				&pr, &pc, &pu, &pd, &pa, &opts)
	}
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
		f := &model.Field{Classname: name}
		var def sql.NullString
		var fopts string
		if err := rows.Scan(&f.ID, &f.Keyname, &f.Displayname, &f.Description, &f.Dataformat, &f.DataformatExt,
			&f.CardinalMin, &f.CardinalMax, &def, &f.Order, &f.IsEnabled, &fopts); err != nil {
			return nil, fmt.Errorf("read fields of %s: %w", name, err)
		}
		if def.Valid {
			_ = json.Unmarshal([]byte(def.String), &f.Default)
			f.Default = model.FromJSON(f.Default)
		}
		_ = json.Unmarshal([]byte(fopts), &f.Options)
		s.AddField(f)
	}
	return s, rows.Err()
}

// Schema returns the schema named name from the read cache.
// The cache is keyed by the schema_generation counter, which every transaction
// that changes schemas bumps, so a change made by another process is seen at once.
func (db *DB) Schema(ctx context.Context, name string) (*model.Schema, error) {
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
			db.schemas, db.schemaGen = map[string]*model.Schema{}, gen
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
func (tx *Tx) Schema(ctx context.Context, name string) (*model.Schema, error) {
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
	tx.schemas = map[string]*model.Schema{}
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
