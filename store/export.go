package store

import (
	"context"
	"io"
	"strings"

	"dataservice/store/codec"
	"dataservice/store/model"
)

// InstanceDoc renders an instance in the load format: header keys, then the schema's
// fields in order, with external fields computed and secrets left out.
func (db *DB) InstanceDoc(ctx context.Context, s *model.Schema, in *Instance) *model.Doc {
	return db.InstanceDocAs(ctx, nil, s, in)
}

// InstanceDocAs is InstanceDoc as auth reads it: an external field shows a value only
// when auth may read every schema the value is read from (nil: every permission).
func (db *DB) InstanceDocAs(ctx context.Context, auth *model.Auth, s *model.Schema, in *Instance) *model.Doc {
	d := &model.Doc{Keys: make([]string, 0, 4+len(s.Fields)), Vals: make(map[string]any, 4+len(s.Fields))}
	d.Set("classname", in.Classname)
	d.Set("keyname", in.Keyname)
	d.Set("displayname", in.Displayname)
	d.Set("is_enabled", in.IsEnabled)
	for _, f := range s.Fields {
		switch f.Dataformat {
		case "secret":
			continue
		case "external":
			if v := db.external(ctx, auth, s, in, f, 0); v != nil {
				d.Set(f.Keyname, v)
			}
			continue
		}
		if v, ok := in.Data[f.Keyname]; ok {
			d.Set(f.Keyname, v)
		}
	}
	return d
}

// external computes an external field: the REMOTE_FIELD of the instance referenced by
// the single-valued schema field PARENT_FIELD.
func (db *DB) external(ctx context.Context, auth *model.Auth, s *model.Schema, in *Instance, f *model.Field, depth int) any {
	w := strings.Fields(f.DataformatExt)
	if len(w) < 2 || depth > 4 {
		return nil
	}
	pf := s.Field(w[0])
	if pf == nil || pf.Dataformat != "schema" || pf.IsMulti() {
		return nil
	}
	ref, _ := in.Data[pf.Keyname].(string)
	target := strings.Fields(pf.DataformatExt)
	if ref == "" || len(target) == 0 {
		return nil
	}
	ts, err := db.Schema(ctx, target[0])
	if err != nil || !model.CanRead(auth, ts) {
		return nil
	}
	rin, err := db.Instance(ctx, target[0], ref)
	if err != nil {
		return nil
	}
	switch w[1] {
	case "keyname":
		return rin.Keyname
	case "displayname":
		return rin.Displayname
	}
	rf := ts.Field(w[1])
	if rf == nil || rf.Dataformat == "secret" {
		return nil
	}
	if rf.Dataformat == "external" {
		return db.external(ctx, auth, ts, rin, rf, depth+1)
	}
	return rin.Data[rf.Keyname]
}

// Export writes the named schemas (a `_schema` entry for each that is not built-in)
// and all their instances in the load format, as YAML or JSON. Secrets never appear.
func (db *DB) Export(ctx context.Context, w io.Writer, names []string, format string) error {
	out, err := codec.NewWriter(w, format)
	if err != nil {
		return err
	}
	var schemas []*model.Schema
	for _, n := range names {
		s, err := db.Schema(ctx, n)
		if err != nil {
			return err
		}
		schemas = append(schemas, s)
	}
	// Definitions first, so every instance's schema exists when the output is loaded.
	for _, s := range schemas {
		if !s.IsBuiltin {
			if err := out.Write(s.Doc()); err != nil {
				return err
			}
		}
	}
	for _, s := range referrersLast(schemas) {
		err := db.EachInstance(ctx, s.Keyname, func(in *Instance) error { return out.Write(db.InstanceDoc(ctx, s, in)) })
		if err != nil {
			return err
		}
	}
	return out.Close()
}

// referrersLast orders schemas for their instances' export: event rules and schedules
// after every other class (in the order given otherwise), so that when the output is
// loaded the pipeline and the schemas each names already exist.
func referrersLast(schemas []*model.Schema) []*model.Schema {
	out := make([]*model.Schema, 0, len(schemas))
	var last []*model.Schema
	for _, s := range schemas {
		if s.Keyname == EventRuleClass || s.Keyname == ScheduleClass {
			last = append(last, s)
		} else {
			out = append(out, s)
		}
	}
	return append(out, last...)
}
