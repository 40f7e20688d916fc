package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"dataservice/store"
	"dataservice/store/model"
)

func schema(tb testing.TB, db *store.DB, name string) *model.Schema {
	tb.Helper()
	s, err := db.Schema(context.Background(), name)
	if err != nil {
		tb.Fatalf("schema %s: %v", name, err)
	}
	return s
}

func fieldNames(s *model.Schema) string {
	var names []string
	for _, f := range s.Fields {
		names = append(names, f.Keyname)
	}
	return strings.Join(names, ",")
}

func TestSchemaLoadForm(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	res := mustLoad(t, db, `
- classname: _schema
  keyname: server
  displayname: Servers
  keyname_mode: edit
  p_read: p_server_read
  p_create: p_server_create
  icon: fa-server
  order: 12
  hostname:
    displayname: Host name
    dataformat: string
    cardinal_min: 1
  tags: {dataformat: string, cardinal_max: 0, description: Free labels}
  rack: {dataformat: int, dataformat_ext: gte_1, default: 1, order: 5}
  _options: {description: Physical and virtual servers, page: infra}
  _scratch: ignored
`, store.LoadOptions{})
	if got, want := res.Created, 1; got != want {
		t.Fatalf("created: got %d, want %d", got, want)
	}
	s := schema(t, db, "server")
	for _, c := range []struct{ name, got, want string }{
		{"displayname", s.Displayname, "Servers"},
		{"description", s.Description, "Physical and virtual servers"},
		{"keyname_mode", s.KeynameMode, "edit"},
		{"p_read", s.PRead, "p_server_read"},
		{"p_create", s.PCreate, "p_server_create"},
		{"p_update", s.PUpdate, ""},
		{"option icon", fmtValue(s.Options["icon"]), "string(fa-server)"},
		{"option order", fmt.Sprint(s.Options["order"]), "12"},
		{"option page", fmtValue(s.Options["page"]), "string(infra)"},
		{"fields in order", fieldNames(s), "rack,hostname,tags"},
	} {
		if c.got != c.want {
			t.Fatalf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
	if _, ok := s.Options["_scratch"]; ok {
		t.Fatalf("_scratch kept as an option")
	}
	if got, want := s.IsEnabled && !s.IsBuiltin, true; got != want {
		t.Fatalf("enabled user schema: got is_enabled=%v is_builtin=%v", s.IsEnabled, s.IsBuiltin)
	}
	h := s.Field("hostname")
	if h == nil {
		t.Fatal("field hostname missing")
	}
	if got, want := h.Displayname+"|"+h.Dataformat, "Host name|string"; got != want {
		t.Fatalf("hostname: got %s, want %s", got, want)
	}
	if got, want := h.CardinalMin*10+h.CardinalMax, 11; got != want {
		t.Fatalf("hostname cardinality: got min=%d max=%d, want 1 and 1", h.CardinalMin, h.CardinalMax)
	}
	tags := s.Field("tags")
	if got, want := tags.CardinalMax, 0; got != want || !tags.IsMulti() {
		t.Fatalf("tags cardinal_max: got %d (multi %v), want %d", got, tags.IsMulti(), want)
	}
	if got, want := tags.Description, "Free labels"; got != want {
		t.Fatalf("tags description: got %q, want %q", got, want)
	}
	rack := s.Field("rack")
	if got, want := rack.DataformatExt+"|"+fmtValue(rack.Default), "gte_1|int64(1)"; got != want {
		t.Fatalf("rack: got %s, want %s", got, want)
	}
	if got, want := queryInt(t, db, "SELECT count(*) FROM schema_fields WHERE classname = 'server'"), 3; got != want {
		t.Fatalf("schema_fields rows: got %d, want %d", got, want)
	}
	if got, want := queryString(t, db, "SELECT p_read FROM schemas WHERE keyname = 'server'"), "p_server_read"; got != want {
		t.Fatalf("schemas.p_read: got %s, want %s", got, want)
	}

	t.Run("reloading the same definition is unchanged", func(t *testing.T) {
		res := mustLoad(t, db, `{classname: _schema, keyname: server, displayname: Servers, hostname: {dataformat: string}}`, store.LoadOptions{})
		if got, want := counts(res), "created=0 updated=0 unchanged=1 deleted=0 enabled=0 disabled=0 skipped=0 errors=0"; got != want {
			t.Fatalf("counts: got %s, want %s", got, want)
		}
	})
	t.Run("a new attribute merges into the schema", func(t *testing.T) {
		res := mustLoad(t, db, `{classname: _schema, keyname: server, displayname: Machines}`, store.LoadOptions{})
		if got, want := res.Updated, 1; got != want {
			t.Fatalf("updated: got %d, want %d", got, want)
		}
		s := schema(t, db, "server")
		if got, want := s.Displayname+"|"+fieldNames(s)+"|"+s.PRead, "Machines|rack,hostname,tags|p_server_read"; got != want {
			t.Fatalf("schema: got %s, want %s", got, want)
		}
	})
	t.Run("disable and enable set is_enabled", func(t *testing.T) {
		res := mustLoad(t, db, `{classname: _schema, keyname: server, _action: disable}`, store.LoadOptions{})
		if got, want := res.Disabled, 1; got != want {
			t.Fatalf("disabled: got %d, want %d", got, want)
		}
		if got, want := schema(t, db, "server").IsEnabled, false; got != want {
			t.Fatalf("is_enabled: got %v, want %v", got, want)
		}
		mustLoad(t, db, `{classname: _schema, keyname: server, _action: enable}`, store.LoadOptions{})
		if got, want := schema(t, db, "server").IsEnabled, true; got != want {
			t.Fatalf("is_enabled: got %v, want %v", got, want)
		}
	})
}

func TestSchemaDuplicateKeysKeepTheLastValue(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, `
- classname: _schema
  keyname: dup
  displayname: First
  port: {dataformat: string}
  displayname: Second
  port: {dataformat: int}
`, store.LoadOptions{})
	s := schema(t, db, "dup")
	if got, want := s.Displayname, "Second"; got != want {
		t.Fatalf("displayname: got %q, want %q", got, want)
	}
	if got, want := s.Field("port").Dataformat, "int"; got != want {
		t.Fatalf("port dataformat: got %q, want %q", got, want)
	}
	if got, want := fieldNames(s), "port"; got != want {
		t.Fatalf("fields: got %s, want %s", got, want)
	}
}

func TestSchemaFieldDelete(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, serverSchema, store.LoadOptions{})
	before := schema(t, db, "server")
	if before.Field("tags") == nil {
		t.Fatal("field tags missing before the delete")
	}
	res := mustLoad(t, db, `{classname: _schema, keyname: server, tags: {_action: delete}, gone: {_action: delete}}`, store.LoadOptions{})
	if got, want := res.Updated, 1; got != want {
		t.Fatalf("updated: got %d, want %d", got, want)
	}
	after := schema(t, db, "server")
	if after.Field("tags") != nil || after.Field("gone") != nil {
		t.Fatalf("fields after delete: %s", fieldNames(after))
	}
	if got, want := fieldNames(after), "hostname,port,mgmt_ip,site,site_city"; got != want {
		t.Fatalf("fields: got %s, want %s", got, want)
	}
	if got, want := queryInt(t, db, "SELECT count(*) FROM schema_fields WHERE classname = 'server' AND keyname = 'tags'"), 0; got != want {
		t.Fatalf("schema_fields rows of tags: got %d, want %d", got, want)
	}
	t.Run("values of a deleted field are ignored on load", func(t *testing.T) {
		mustLoad(t, db, `{classname: server, keyname: s1, tags: [a]}`, store.LoadOptions{})
		if v, ok := instance(t, db, "server", "s1").Data["tags"]; ok {
			t.Fatalf("tags stored: %s", fmtValue(v))
		}
	})
}

func TestSchemaInvalidDefinitions(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, doc, want string }{
		{"unknown dataformat", `{classname: _schema, keyname: x, f: {dataformat: colour}}`, `unknown dataformat "colour"`},
		{"schema field without target", `{classname: _schema, keyname: x, f: {dataformat: schema}}`, "dataformat_ext"},
		{"enumerate field without name", `{classname: _schema, keyname: x, f: {dataformat: enumerate}}`, "dataformat_ext"},
		{"external field with one word", `{classname: _schema, keyname: x, f: {dataformat: external, dataformat_ext: parent}}`, "external"},
		{"negative cardinal_max", `{classname: _schema, keyname: x, f: {cardinal_max: -1}}`, "cardinal_max"},
		{"cardinal_min above cardinal_max", `{classname: _schema, keyname: x, f: {cardinal_min: 3, cardinal_max: 2}}`, "cardinal_min"},
		{"field named displayname", `{classname: _schema, keyname: x, displayname: {dataformat: string}}`, "displayname"},
		{"field named is_enabled", `{classname: _schema, keyname: x, is_enabled: {dataformat: string}}`, "is_enabled"},
		{"field name starting with a digit", `{classname: _schema, keyname: x, 1st: {dataformat: string}}`, "field name"},
		{"unknown field action", `{classname: _schema, keyname: x, f: {_action: rename}}`, "_action"},
		{"update of a missing field", `{classname: _schema, keyname: x, f: {_action: update}}`, "not found"},
		{"unknown keyname_mode", `{classname: _schema, keyname: x, keyname_mode: random}`, "keyname_mode"},
		{"keyname_mode with an unknown dataformat", `{classname: _schema, keyname: x, keyname_mode: dataformat colour}`, "keyname_mode"},
		{"keyname_mode with a secret", `{classname: _schema, keyname: x, keyname_mode: dataformat secret}`, "keyname_mode"},
		{"uppercase schema name", `{classname: _schema, keyname: Server}`, "must match"},
		{"schema name with a dash", `{classname: _schema, keyname: my-schema}`, "must match"},
		{"built-in name in a user load", `{classname: _schema, keyname: _mine}`, "built-in"},
		{"non-boolean is_enabled", `{classname: _schema, keyname: x, is_enabled: perhaps}`, "is_enabled"},
		{"update of a missing schema", `{classname: _schema, keyname: x, _action: update}`, "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			db := newTestDB(t)
			n := queryInt(t, db, "SELECT count(*) FROM schemas")
			res := load(t, db, tt.doc, store.LoadOptions{})
			if got, want := res.Errors, 1; got != want {
				t.Fatalf("errors: got %d, want %d", got, want)
			}
			if msg := res.Messages[0].Message; !strings.Contains(msg, tt.want) {
				t.Fatalf("message %q does not contain %q", msg, tt.want)
			}
			if got, want := queryInt(t, db, "SELECT count(*) FROM schemas"), n; got != want {
				t.Fatalf("schemas rows: got %d, want %d", got, want)
			}
		})
	}
}

func TestSchemaDelete(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, serverSchema+`- {classname: server, keyname: s1}`, store.LoadOptions{})
	t.Run("schema with instances is refused", func(t *testing.T) {
		res := load(t, db, `{classname: _schema, keyname: server, _action: delete}`, store.LoadOptions{})
		if got, want := res.Errors, 1; got != want {
			t.Fatalf("errors: got %d, want %d", got, want)
		}
		if msg := res.Messages[0].Message; !strings.Contains(msg, "instances") {
			t.Fatalf("message %q does not mention the instances", msg)
		}
		schema(t, db, "server")
	})
	t.Run("schema without instances is deleted with its fields", func(t *testing.T) {
		res := mustLoad(t, db, `
- {classname: server, keyname: s1, _action: delete}
- {classname: _schema, keyname: server, _action: delete}
`, store.LoadOptions{})
		if got, want := res.Deleted, 2; got != want {
			t.Fatalf("deleted: got %d, want %d", got, want)
		}
		if _, err := db.Schema(context.Background(), "server"); store.ErrorCode(err) != model.ENotFound {
			t.Fatalf("schema after delete: got %v, want not found", err)
		}
		if got, want := queryInt(t, db, "SELECT count(*) FROM schema_fields WHERE classname = 'server'"), 0; got != want {
			t.Fatalf("schema_fields rows: got %d, want %d", got, want)
		}
	})
	t.Run("missing schema delete is unchanged", func(t *testing.T) {
		res := mustLoad(t, db, `{classname: _schema, keyname: server, _action: delete}`, store.LoadOptions{})
		if got, want := res.Unchanged, 1; got != want {
			t.Fatalf("unchanged: got %d, want %d", got, want)
		}
	})
	t.Run("built-in schema is refused", func(t *testing.T) {
		exec(t, db, "DELETE FROM instances WHERE classname = '_dataview'")
		res := load(t, db, `{classname: _schema, keyname: _dataview, _action: delete}`, store.LoadOptions{})
		if got, want := res.Errors, 1; got != want {
			t.Fatalf("errors: got %d, want %d", got, want)
		}
		schema(t, db, "_dataview")
	})
}

func TestSchemaCacheFollowsChanges(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, serverSchema, store.LoadOptions{})
	if schema(t, db, "server").Field("rack") != nil {
		t.Fatal("field rack before it is defined")
	}
	mustLoad(t, db, `{classname: _schema, keyname: server, rack: {dataformat: int}}`, store.LoadOptions{})
	if f := schema(t, db, "server").Field("rack"); f == nil || f.Dataformat != "int" {
		t.Fatalf("field rack after the change: got %+v, want an int field", f)
	}
	mustLoad(t, db, `{classname: _schema, keyname: server, rack: {dataformat: string}}`, store.LoadOptions{})
	if got, want := schema(t, db, "server").Field("rack").Dataformat, "string"; got != want {
		t.Fatalf("rack dataformat after a second change: got %s, want %s", got, want)
	}
	mustLoad(t, db, `{classname: _schema, keyname: server, rack: {_action: delete}}`, store.LoadOptions{})
	if schema(t, db, "server").Field("rack") != nil {
		t.Fatal("field rack after its delete")
	}
	t.Run("a dry run does not leave its schema in the cache", func(t *testing.T) {
		load(t, db, `{classname: _schema, keyname: server, ghost: {dataformat: string}}`, store.LoadOptions{DryRun: true})
		if schema(t, db, "server").Field("ghost") != nil {
			t.Fatal("field ghost after a dry run")
		}
	})
	t.Run("a new field is validated by the next load", func(t *testing.T) {
		mustLoad(t, db, `{classname: _schema, keyname: server, weight: {dataformat: int}}`, store.LoadOptions{})
		res := load(t, db, `{classname: server, keyname: s1, weight: heavy}`, store.LoadOptions{})
		if got, want := res.Errors, 1; got != want {
			t.Fatalf("errors: got %d, want %d", got, want)
		}
	})
}

// TestSecretFieldKeepsItsDataformat: a secret field cannot become another dataformat
// (its stored hashes would become readable values); the schema is left unchanged.
func TestSecretFieldKeepsItsDataformat(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	mustLoad(t, db, `{classname: _schema, keyname: vault, token: {dataformat: secret}}`, store.LoadOptions{})
	mustLoad(t, db, `{classname: vault, keyname: v1, token: hunter2}`, store.LoadOptions{})
	for _, to := range []string{"string", "text"} {
		res := load(t, db, `{classname: _schema, keyname: vault, token: {dataformat: `+to+`}}`, store.LoadOptions{})
		if got, want := messages(res), "a secret field cannot change its dataformat (to "+to+")"; res.Errors != 1 || !strings.Contains(got, want) {
			t.Fatalf("to %s: got %d errors %q, want the refusal %q", to, res.Errors, got, want)
		}
	}
	if got := schema(t, db, "vault").Field("token").Dataformat; got != "secret" {
		t.Fatalf("dataformat after refusals: %s", got)
	}
	// Naming the same dataformat again, or adding a new field, is fine.
	mustLoad(t, db, `{classname: _schema, keyname: vault, token: {dataformat: secret, displayname: Token}, note: {dataformat: string}}`, store.LoadOptions{})
}
