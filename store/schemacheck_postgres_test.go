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
