package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"dataservice/internal/clip"
	"dataservice/store/codec"
	"dataservice/store/model"
)

// Instance is a record of a schema.
type Instance struct {
	ID          int64
	Classname   string
	Keyname     string
	Displayname string
	IsEnabled   bool
	Data        map[string]any
	CreatedAt   string
	UpdatedAt   string
	// raw is Data as read from the file (reused for the revision's "before").
	raw string
}

const instanceCols = "id, classname, keyname, displayname, is_enabled, data, created_at, updated_at"

type scanner interface{ Scan(dest ...any) error }

func scanInstance(r scanner) (*Instance, error) {
	in := &Instance{}
	var raw string
	if err := r.Scan(&in.ID, &in.Classname, &in.Keyname, &in.Displayname, &in.IsEnabled, &raw,
		&in.CreatedAt, &in.UpdatedAt); err != nil {
		return nil, err
	}
	data, err := model.DecodeData(raw)
	if err != nil {
		return nil, err
	}
	in.Data, in.raw = data, raw
	return in, nil
}

func notFoundInstance(cls, key string, err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return model.Errorf(model.ENotFound, "%s %s not found", cls, clip.Quote(key))
	}
	return fmt.Errorf("read %s %s: %w", cls, key, err)
}

// Instance reads one instance through the read pool.
// The first read of a request scope also reads the generation counter.
func (db *DB) Instance(ctx context.Context, cls, key string) (*Instance, error) {
	if strings.ContainsRune(cls, 0) || strings.ContainsRune(key, 0) || !utf8.ValidString(cls) || !utf8.ValidString(key) {
		// No stored name holds a NUL or bytes that are not UTF-8, and PostgreSQL
		// refuses both in a query: not found, on both engines, rather than an engine
		// error.
		return nil, notFoundInstance(cls, key, sql.ErrNoRows)
	}
	if in, ok, err := db.prefetchedInstance(ctx, cls, key); ok {
		return in, err
	}
	if m, _, fresh := db.memoOf(ctx); m != nil && !fresh {
		return db.instanceAndGeneration(ctx, m, cls, key)
	}
	in, err := scanInstance(db.rqueryRow(ctx, "SELECT "+instanceCols+
		" FROM instances WHERE classname = ? AND keyname = ?", cls, key))
	if err != nil {
		return nil, notFoundInstance(cls, key, err)
	}
	return in, nil
}

// InstanceByID reads one instance of cls by id.
func (db *DB) InstanceByID(ctx context.Context, cls string, id int64) (*Instance, error) {
	in, err := scanInstance(db.rqueryRow(ctx, "SELECT "+instanceCols+
		" FROM instances WHERE classname = ? AND id = ?", cls, id))
	if err != nil {
		return nil, notFoundInstance(cls, fmt.Sprint(id), err)
	}
	return in, nil
}

// Instance reads one instance inside the transaction.
func (tx *Tx) Instance(ctx context.Context, cls, key string) (*Instance, error) {
	if err := tx.fromSnapshot(ctx, cls, key); err != nil {
		return nil, err
	}
	in, err := scanInstance(tx.queryRow(ctx, "SELECT "+instanceCols+
		" FROM instances WHERE classname = ? AND keyname = ?", cls, key))
	if err != nil {
		return nil, notFoundInstance(cls, key, err)
	}
	return in, nil
}

// Instances returns up to limit instances of cls with id > afterID, in id order.
func (db *DB) Instances(ctx context.Context, cls string, afterID int64, limit int) ([]*Instance, error) {
	return instancesAfter(ctx, prepared{db}, cls, afterID, limit)
}

// Instances is Instances inside the transaction.
func (tx *Tx) Instances(ctx context.Context, cls string, afterID int64, limit int) ([]*Instance, error) {
	if err := tx.classFromSnapshot(ctx, cls); err != nil {
		return nil, err
	}
	return instancesAfter(ctx, tx, cls, afterID, limit)
}

func instancesAfter(ctx context.Context, q querier, cls string, afterID int64, limit int) ([]*Instance, error) {
	rows, err := q.queryContext(ctx, "SELECT "+instanceCols+
		" FROM instances WHERE classname = ? AND id > ? ORDER BY id LIMIT ?", cls, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", cls, err)
	}
	defer rows.Close()
	var out []*Instance
	for rows.Next() {
		in, err := scanInstance(rows)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", cls, err)
		}
		out = append(out, in)
	}
	return out, rows.Err()
}

// EachInstance calls fn for every instance of cls in id order, reading batches of
// 1000 (a batch is read whole before fn sees it, so fn may write).
func (db *DB) EachInstance(ctx context.Context, cls string, fn func(*Instance) error) error {
	return eachInstance(func(after int64) ([]*Instance, error) { return db.Instances(ctx, cls, after, 1000) }, fn)
}

// EachInstance is EachInstance inside the transaction.
func (tx *Tx) EachInstance(ctx context.Context, cls string, fn func(*Instance) error) error {
	return eachInstance(func(after int64) ([]*Instance, error) { return tx.Instances(ctx, cls, after, 1000) }, fn)
}

func eachInstance(next func(after int64) ([]*Instance, error), fn func(*Instance) error) error {
	var after int64
	for {
		batch, err := next(after)
		if err != nil {
			return err
		}
		for _, in := range batch {
			if err := fn(in); err != nil {
				return err
			}
			after = in.ID
		}
		if len(batch) < 1000 {
			return nil
		}
	}
}

// CountInstances is the number of instances of cls, kept by the write transactions
// (table instance_counts), so it costs one lookup whatever the number.
func (db *DB) CountInstances(ctx context.Context, cls string) (int, error) {
	var n int
	err := db.rqueryRow(ctx, db.dia.countInstances, cls).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("count %s: %w", cls, err)
	}
	return n, nil
}

// txRefs answers value validation's lookups in a transaction, under the ctx of the
// call that validates.
type txRefs struct {
	tx  *Tx
	ctx context.Context
}

func (tx *Tx) refs(ctx context.Context) txRefs { return txRefs{tx, ctx} }

func (r txRefs) InstanceExists(cls, key string) (bool, error) {
	return r.tx.instanceExists(r.ctx, cls, key)
}

func (r txRefs) EnumValues(name string) (map[string]bool, error) { return r.tx.enumValues(r.ctx, name) }

func (tx *Tx) instanceExists(ctx context.Context, cls, key string) (bool, error) {
	if _, ok := tx.known[cls+"\x00"+key]; ok {
		return true, nil
	}
	if err := tx.fromSnapshot(ctx, cls, key); err != nil {
		return false, err
	}
	var one int
	err := tx.queryRow(ctx, "SELECT 1 FROM instances WHERE classname = ? AND keyname = ?", cls, key).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check %s %s: %w", cls, key, err)
	}
	tx.remember(cls, key)
	return true, nil
}

// remember notes that an instance exists; forget drops the whole cache (deletes and
// renames are rare next to reference checks).
func (tx *Tx) remember(cls, key string) {
	if tx.known == nil {
		tx.known = map[string]struct{}{}
	}
	if len(tx.known) < 100_000 {
		tx.known[cls+"\x00"+key] = struct{}{}
	}
}

func (tx *Tx) forget() { tx.known = nil }

// enumValues returns the values of an _enumerate instance, or nil when it is missing.
func (tx *Tx) enumValues(ctx context.Context, name string) (map[string]bool, error) {
	in, err := tx.Instance(ctx, "_enumerate", name)
	if IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return EnumValues(in), nil
}

// EnumValues reads the `value` of each item of an _enumerate's content.
func EnumValues(in *Instance) map[string]bool {
	content, _ := in.Data["content"].(string)
	vals := map[string]bool{}
	entries, err := codec.ParseDocument("content", []byte(content))
	if err != nil {
		return vals
	}
	for _, e := range entries {
		if v, ok := model.ScalarText(e.Fields["value"]); ok && v != "" {
			vals[v] = true
		}
	}
	return vals
}

// instanceDoc is the revision form of an instance, secrets masked. dataJSON, when
// not empty, is in.Data already encoded (and free of secrets).
func instanceDoc(s *model.Schema, in *Instance, dataJSON string) string {
	if in == nil {
		return ""
	}
	return string(appendInstanceDoc(make([]byte, 0, len(dataJSON)+len(in.Keyname)+len(in.Displayname)+64), s, in, dataJSON))
}

// appendInstanceDoc appends instanceDoc's bytes to buf.
func appendInstanceDoc(buf []byte, s *model.Schema, in *Instance, dataJSON string) []byte {
	if dataJSON != "" && !s.HasSecrets() {
		// The same bytes json.Marshal would write for the map below (keys sorted).
		buf = append(buf, `{"data":`...)
		buf = append(buf, dataJSON...)
		buf = append(buf, `,"displayname":`...)
		buf = model.AppendJSONString(buf, in.Displayname)
		buf = append(buf, `,"is_enabled":`...)
		buf = strconv.AppendBool(buf, in.IsEnabled)
		buf = append(buf, `,"keyname":`...)
		buf = model.AppendJSONString(buf, in.Keyname)
		return append(buf, '}')
	}
	data := model.CloneMap(in.Data)
	for k := range data {
		if f := s.Field(k); f != nil && f.Dataformat == "secret" {
			data[k] = "********"
		}
	}
	return append(buf, model.MustJSON(map[string]any{"keyname": in.Keyname, "displayname": in.Displayname,
		"is_enabled": in.IsEnabled, "data": data})...)
}

// revision writes one revisions row unless the transaction suppresses them.
func (tx *Tx) revision(ctx context.Context, cls, key string, action model.Action, before, after string) error {
	_, err := tx.revisionRow(ctx, cls, key, action, before, after, false, false)
	return err
}

// revisionRow is revision returning, when wantID, the row's id (nil when the
// transaction writes no revision rows). delta: before and after hold only the changed
// parts (revision_delta.go); such rows name the column, the others leave it to its
// default, so a row of the whole form is written by the statement it always was.
func (tx *Tx) revisionRow(ctx context.Context, cls, key string, action model.Action, before, after string, delta, wantID bool) (*int64, error) {
	author := tx.rev.Author
	if author == "" {
		author = "system"
	}
	if tx.rev.Observe != nil {
		tx.rev.Observe(Revision{Classname: cls, Keyname: key, Action: string(action), Before: before, After: after, Author: author, Delta: delta})
	}
	if tx.rev.Off {
		return nil, nil
	}
	q := RevisionInsertSQL
	if delta {
		q = RevisionDeltaInsertSQL
	}
	args := []any{cls, key, string(action), nullable(before), nullable(after), author, tx.db.now()}
	if wantID {
		id, _, err := tx.db.dia.insertID(ctx, counted{tx}, q, args...)
		if err != nil {
			return nil, fmt.Errorf("write revision: %w", err)
		}
		return &id, nil
	}
	if _, err := tx.exec(ctx, q, args...); err != nil {
		return nil, fmt.Errorf("write revision: %w", err)
	}
	return nil, nil
}

// prepare validates and normalizes every field value of in, in place, as a write
// would; values under keys that are not fields are kept as stored, scratch keys
// (starting with _) dropped. in.Data is changed in place: the caller owns it, and it
// must not be the map of a stored instance the caller still compares against. The
// values equal to old's stored ones are trusted (they were validated when written): a
// pipeline run validates only what its rules changed.
//
// It also reports differs: a value it checked encodes differently from old's under a
// key that is valid UTF-8 (or one of them has no value there), so the data's encoding
// differs from old's. false says nothing either way.
func (tx *Tx) prepare(ctx context.Context, s *model.Schema, in, old *Instance) (differs bool, err error) {
	if in.Data == nil {
		in.Data = map[string]any{}
	}
	data := in.Data
	var refs model.RefResolver // made once, when a value needs checking
	var probs model.Problems   // every refused value, reported at once
	// Only existing keys are rewritten or deleted while ranging, which Go allows.
	for k, v := range data {
		if old != nil {
			if ov, ok := old.Data[k]; ok && deepEqual(ov, v) {
				continue
			}
		}
		f := s.Field(k)
		if f == nil {
			if strings.HasPrefix(k, "_") {
				delete(data, k)
			}
			continue // values of removed fields are kept as stored
		}
		stored := v // the value data holds
		// A migration's pipeline content is the seed's 4.6.0 rewrite, whose rule is
		// only the flattening (unparsable content becomes an empty list): content the
		// checks of a save refuse (a YAML tag, a gate nobody sets) is kept, and refused
		// when it would run, rather than failing the upgrade.
		if s.Keyname == "_pipeline" && k == "content" && !tx.migration {
			norm, err := PipelineContent(v)
			if err != nil {
				if err := probs.Add(k, err); err != nil {
					return false, err
				}
				continue
			}
			v = norm
		}
		if s.Keyname == EventRuleClass && k == "condition" {
			norm, err := EventCondition(v)
			if err != nil {
				if err := probs.Add(k, err); err != nil {
					return false, err
				}
				continue
			}
			v = norm
		}
		if refs == nil {
			refs = tx.refs(ctx)
		}
		nv, present, err := f.Normalize(v, refs)
		if err != nil {
			if err := probs.Add(k, err); err != nil {
				return false, err
			}
			continue
		}
		if old != nil && !differs && utf8.ValidString(k) {
			ov, had := old.Data[k]
			differs = had != present || present && !model.SameJSONValue(ov, nv)
		}
		if present {
			if sv, isText := stored.(string); isText {
				if nsv, same := nv.(string); same && nsv == sv {
					continue // already normal: rewriting the entry would cost a map assignment
				}
			}
			data[k] = nv
		} else {
			delete(data, k)
		}
	}
	// The map gave the values in no order: the problems are put in the schema's.
	probs.SortBy(s.FieldIndex)
	s.AddCardinality(data, &probs)
	return differs, probs.Err()
}

// deepEqual is reflect.DeepEqual with the common scalar cases compared directly.
func deepEqual(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case int64:
		y, ok := b.(int64)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	}
	return reflect.DeepEqual(a, b)
}

// write inserts (old == nil) or updates the row with data (in.Data encoded), writes
// the revision and collects the addresses of its ipv4 fields (collectIPs, whose
// warnings it returns). With ifAbsent, an insert whose keyname exists writes nothing
// and reports false.
func (tx *Tx) write(ctx context.Context, s *model.Schema, old, in *Instance, action model.Action, data string, ifAbsent bool) (inserted bool, warnings []string, err error) {
	now := tx.db.now()
	if old == nil || in.Keyname != old.Keyname {
		if err := tx.fromSnapshot(ctx, in.Classname, in.Keyname); err != nil {
			return false, nil, err
		}
	}
	if old == nil {
		q := tx.db.dia.insertInstance
		if ifAbsent {
			q = tx.db.dia.insertInstanceIfAbsent
		}
		id, ok, err := tx.db.dia.insertID(ctx, counted{tx}, q, in.Classname, in.Keyname, in.Displayname, in.IsEnabled, data, now, now)
		if err != nil {
			if isUnique(err) {
				return false, nil, model.Errorf(model.EConflict, "%s %s already exists", in.Classname, clip.Quote(in.Keyname))
			}
			return false, nil, fmt.Errorf("insert %s %s: %w", in.Classname, in.Keyname, err)
		}
		if !ok {
			return false, nil, nil
		}
		in.ID = id
		in.CreatedAt, in.UpdatedAt = now, now
	} else {
		// Naming keyname in SET makes SQLite maintain its index even when the value is
		// the same: only a rename names it.
		q, args := `UPDATE instances SET displayname = ?, is_enabled = ?, data = ?, updated_at = ? WHERE id = ?`,
			[]any{in.Displayname, in.IsEnabled, data, now, old.ID}
		if in.Keyname != old.Keyname {
			q, args = `UPDATE instances SET keyname = ?, displayname = ?, is_enabled = ?, data = ?, updated_at = ?
			WHERE id = ?`, []any{in.Keyname, in.Displayname, in.IsEnabled, data, now, old.ID}
		}
		if _, err := tx.exec(ctx, q, args...); err != nil {
			if isUnique(err) {
				return false, nil, model.Errorf(model.EConflict, "%s %s already exists", in.Classname, clip.Quote(in.Keyname))
			}
			return false, nil, fmt.Errorf("update %s %s: %w", in.Classname, in.Keyname, err)
		}
		tx.listForSearch(old.ID)
		in.ID, in.CreatedAt, in.UpdatedAt = old.ID, old.CreatedAt, now
		if in.Classname == "_user" && fmt.Sprint(old.Data["password"]) != fmt.Sprint(in.Data["password"]) {
			// A new password ends the console sessions opened with the old one.
			if _, err := tx.exec(ctx, "DELETE FROM sessions WHERE user_id = ?", old.ID); err != nil {
				return false, nil, fmt.Errorf("end sessions of %s: %w", old.Keyname, err)
			}
		}
	}
	if old == nil {
		tx.remember(in.Classname, in.Keyname)
	} else if old.Keyname != in.Keyname {
		tx.forget()
	}
	var before, after string
	if old != nil {
		before, after = tx.deltas.Delta(s, old, in, data)
	} else {
		after = instanceDoc(s, in, data)
	}
	if err := tx.writeChange(ctx, s, action, old, in, before, after); err != nil {
		return false, nil, err
	}
	if _, warnings, err = tx.collectIPs(ctx, s, in); err != nil {
		return false, nil, err
	}
	return true, warnings, nil
}

// deleteInstance deletes an instance and writes its revision.
func (tx *Tx) deleteInstance(ctx context.Context, s *model.Schema, in *Instance) error {
	if _, err := tx.exec(ctx, "DELETE FROM instances WHERE id = ?", in.ID); err != nil {
		return fmt.Errorf("delete %s %s: %w", in.Classname, in.Keyname, err)
	}
	if in.Classname == "_user" {
		// Its console sessions end with it: a user created later may get the same row
		// id, and must not inherit them.
		if _, err := tx.exec(ctx, "DELETE FROM sessions WHERE user_id = ?", in.ID); err != nil {
			return fmt.Errorf("delete sessions of %s: %w", in.Keyname, err)
		}
	}
	tx.forget()
	return tx.writeChange(ctx, s, model.ActionDelete, in, nil, instanceDoc(s, in, in.raw), "")
}

// jsonString is s as a JSON string, escaped as encoding/json escapes it.
func jsonString(s string) string {
	return string(model.AppendJSONString(make([]byte, 0, len(s)+2), s))
}
