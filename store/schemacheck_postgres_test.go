package store_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// TestPostgresSchemaCheckRefusesForeignObjects: a database holding an object the
// service's layout does not create, or a layout object changed, is refused at open
// with a SchemaError naming it, before anything is written; the clean layout opens.
// PostgreSQL's by nature: it crafts pg_catalog objects.
func TestPostgresSchemaCheckRefusesForeignObjects(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name, sql, want string
	}{
		{"foreign table", `CREATE TABLE other_app(x int)`, "unexpected table other_app"},
		{"foreign trigger on instances", `CREATE FUNCTION evil() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
			CREATE TRIGGER evil AFTER INSERT ON instances FOR EACH ROW EXECUTE FUNCTION evil()`, "unexpected trigger evil on instances"},
		{"redefined layout function", `CREATE OR REPLACE FUNCTION dataservice_configuration_changed() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN DELETE FROM instances; RETURN NULL; END $$`, "changed function dataservice_configuration_changed"},
		{"rule", `CREATE RULE hide AS ON INSERT TO revisions DO INSTEAD NOTHING`, "unexpected rule hide on revisions"},
		{"view", `CREATE VIEW peek AS SELECT keyname FROM instances`, "unexpected view peek"},
		{"policy", `ALTER TABLE instances ENABLE ROW LEVEL SECURITY; CREATE POLICY few ON instances USING (id < 10)`, "unexpected policy few on instances"},
		{"layout trigger made BEFORE", `DROP TRIGGER instances_insert ON instances;
			CREATE TRIGGER instances_insert BEFORE INSERT ON instances FOR EACH ROW EXECUTE FUNCTION dataservice_instances_insert()`, "changed trigger instances_insert"},
		{"default calling a function", `ALTER TABLE revisions ALTER COLUMN author SET DEFAULT current_user`, "unexpected default of column author on revisions"},
		{"layout default calling a function", `ALTER TABLE instances ALTER COLUMN data SET DEFAULT CAST(now() AS text)::json`, "changed column default data on instances"},
		{"CHECK constraint", `ALTER TABLE instances ADD CONSTRAINT short CHECK (length(keyname) < 5)`, "unexpected CHECK constraint short on instances"},
		{"event trigger", `CREATE FUNCTION on_ddl() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN END $$;
			CREATE EVENT TRIGGER on_ddl ON ddl_command_start EXECUTE FUNCTION on_ddl()`, "unexpected event trigger on_ddl"},
		{"foreign index", `CREATE INDEX instances_evil ON instances(displayname)`, "unexpected index instances_evil on instances"},
		{"foreign sequence", `CREATE SEQUENCE counter`, "unexpected sequence counter"},
		// A layout trigger calling another schema's function of the same name.
		{"layout trigger calling another schema", `CREATE SCHEMA evil;
			CREATE FUNCTION evil.dataservice_instances_insert() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
			DROP TRIGGER instances_insert ON instances;
			CREATE TRIGGER instances_insert AFTER INSERT ON instances FOR EACH ROW EXECUTE FUNCTION evil.dataservice_instances_insert()`,
			"changed trigger instances_insert"},
		{"another schema", `CREATE SCHEMA other`, "unexpected schema other"},
		{"function in public beside the service's schema", `CREATE SCHEMA svc; CREATE FUNCTION svc.f() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$`,
			"unexpected function svc.f"},
		{"aggregate in another schema", `CREATE SCHEMA other; CREATE AGGREGATE other.total(int) (SFUNC = int4pl, STYPE = int)`,
			"unexpected aggregate other.total"},
		{"type in another schema", `CREATE SCHEMA other; CREATE TYPE other.mood AS ENUM ('a')`, "unexpected type other.mood"},
		{"collation in the service's schema", `CREATE COLLATION mine FROM "C"`, "unexpected collation public.mine"},
		// The layout's index, on an expression calling a function.
		{"layout index on an expression", `DROP INDEX revisions_class; CREATE INDEX revisions_class ON revisions(dataservice_fold(classname), id)`,
			"changed index revisions_class"},
		{"layout index on another schema's function", `CREATE SCHEMA evil;
			CREATE FUNCTION evil.f(t text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT t $$;
			DROP INDEX instances_classname_id; CREATE INDEX instances_classname_id ON instances(evil.f(classname), id)`,
			"changed index instances_classname_id"},
		{"another extension", `CREATE EXTENSION citext`, "unexpected extension citext"},
		{"function added to pg_trgm", `CREATE FUNCTION sneak() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$; ALTER EXTENSION pg_trgm ADD FUNCTION sneak()`,
			"unexpected member of the extension function sneak() on pg_trgm"},
		{"database setting", `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET session_replication_role = replica', current_database()); END $$`,
			"unexpected setting session_replication_role on database"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			addr := testkit.NewPostgresAddress(t)
			db, err := store.Open(ctx, addr, store.Options{})
			if err != nil {
				t.Fatalf("the clean layout: %v", err)
			}
			db.Close()
			raw, err := sql.Open("pgx", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			if _, err := raw.ExecContext(ctx, c.sql); err != nil {
				t.Fatalf("craft: %v", err)
			}
			raw.Close()
			db, err = store.Open(ctx, addr, store.Options{})
			if err == nil {
				db.Close()
				t.Fatalf("opened a database with a %s", c.name)
			}
			var se *store.SchemaError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want a SchemaError naming %q", err, c.want)
			}
			if _, err := store.Open(ctx, addr, store.Options{ReadOnly: true}); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("read-only open: %v, want it refused", err)
			}
		})
	}
	// A search_path the database sets does not move the service's names: every
	// connection sets its own (public), so the check reads the service's tables where
	// they are and refuses the setting alone.
	t.Run("database search_path", func(t *testing.T) {
		addr := testkit.NewPostgresAddress(t)
		db, err := store.Open(ctx, addr, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		raw, err := sql.Open("pgx", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		if _, err := raw.ExecContext(ctx, `CREATE SCHEMA evil; CREATE TABLE evil.registry(key text, value text);
			DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET search_path = evil, public', current_database()); END $$`); err != nil {
			t.Fatal(err)
		}
		raw.Close()
		_, err = store.Open(ctx, addr, store.Options{})
		if err == nil || !strings.Contains(err.Error(), "unexpected setting search_path on database") ||
			!strings.Contains(err.Error(), "unexpected table evil.registry") || strings.Contains(err.Error(), "table instances") {
			t.Fatalf("open: %v, want the setting and the other schema's table refused, the service's tables found", err)
		}
	})
	t.Run("clean layout with data", func(t *testing.T) {
		addr := testkit.NewPostgresAddress(t)
		db, err := testkit.OpenStore(t, addr, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		testkit.MustLoad(t, db, "- {classname: _schema, keyname: box, n: {dataformat: int}}\n- {classname: box, keyname: a, n: 1}\n", store.LoadOptions{})
		db.Close()
		db, err = store.Open(ctx, addr, store.Options{})
		if err != nil {
			t.Fatalf("reopen the clean layout: %v", err)
		}
		db.Close()
	})
}
