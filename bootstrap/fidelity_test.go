package bootstrap_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"dataservice/bootstrap"
	"dataservice/internal/testkit"
	"dataservice/store"
)

// renameInstance renames an instance the way a user does (a cascading rename).
func renameInstance(t *testing.T, db *store.DB, cls, from, to string) {
	t.Helper()
	if _, err := testkit.Rename(t, db, "", cls, from, to); err != nil {
		t.Fatalf("rename %s %s -> %s: %v", cls, from, to, err)
	}
}

// A 4.9.0 release candidate re-runs block 4.9.0 at every start: it must not read the
// deleted `subnet` values back and undo a rename a user made since the first run.
func TestMigrate490RerunKeepsUserRenames(t *testing.T) {
	t.Parallel()
	db, rec := migratedDB(t)
	shape48(t, db)
	ipamRow(t, db, "ipam_subnet", "office-lan", "Office LAN", map[string]any{"subnet": "10.10.0.0/16"})
	ipamRow(t, db, "ipam_vlan", "v1", "", map[string]any{"vlan_id": 1, "subnet": []any{"office-lan"}})
	setRegistry(t, db, store.RegDBVersion, "4.8.0")
	o := options(t, rec)
	o.Version = "4.9.0-RC1"
	run(t, db, o)
	if in := mustInstance(t, db, "ipam_subnet", "10.10.0.0/16"); in.Data["subnet"] != nil {
		t.Fatalf("subnet value kept after the field was deleted: %v", in.Data["subnet"])
	}

	// The user moves the subnet to another CIDR; every later start re-runs 4.9.0.
	renameInstance(t, db, "ipam_subnet", "10.10.0.0/16", "10.11.0.0/16")
	for i := 0; i < 2; i++ {
		rec.Reset()
		run(t, db, o)
		if got, want := strings.Join(blocksStarted(rec), ","), "4.9.0"; got != want {
			t.Fatalf("blocks = %s, want %s", got, want)
		}
		if instance(t, db, "ipam_subnet", "10.10.0.0/16") != nil || instance(t, db, "ipam_subnet", "10.11.0.0/16") == nil {
			t.Fatalf("start %d: the user's rename to 10.11.0.0/16 was undone", i+2)
		}
		if got, want := field(mustInstance(t, db, "ipam_vlan", "v1"), "subnet"), `["10.11.0.0/16"]`; got != want {
			t.Fatalf("start %d: ipam_vlan v1 subnet = %s, want %s", i+2, got, want)
		}
		checkAttrs(t, oneLog(t, rec, slog.LevelInfo, msg490Done),
			map[string]string{"renamed": "0", "skipped": "0", "references_updated": "0"})
	}
}

// A database migrated by a release that deleted the field definition but left its
// values in the data: a re-run ignores those values (no field, nothing to read) and
// removes them.
func TestMigrate490RerunIgnoresLeftoverValues(t *testing.T) {
	t.Parallel()
	db, rec := migratedDB(t)
	ipamRow(t, db, "ipam_subnet", "10.11.0.0/16", "", map[string]any{"subnet": "10.10.0.0/16", "site": "hq"})
	ipamRow(t, db, "ipam_vlan", "v1", "", map[string]any{"vlan_id": 1, "subnet": []any{"10.11.0.0/16"}})
	o := options(t, rec)
	o.Version = "4.9.0-RC3"
	run(t, db, o)
	in := mustInstance(t, db, "ipam_subnet", "10.11.0.0/16")
	if _, ok := in.Data["subnet"]; ok {
		t.Fatalf("leftover subnet value still stored: %v", in.Data)
	}
	if got, want := field(in, "site"), "hq"; got != want {
		t.Fatalf("site = %q, want %q", got, want)
	}
	if instance(t, db, "ipam_subnet", "10.10.0.0/16") != nil {
		t.Fatal("the leftover value renamed the subnet back")
	}
	if got, want := field(mustInstance(t, db, "ipam_vlan", "v1"), "subnet"), `["10.11.0.0/16"]`; got != want {
		t.Fatalf("ipam_vlan v1 subnet = %s, want %s", got, want)
	}
}

// Block 4.9.0: a `subnet` value that is not text is warned about, left, and counted
// as skipped.
func TestMigrate490NonTextSubnetIsWarnedAndSkipped(t *testing.T) {
	t.Parallel()
	db, rec := migratedDB(t)
	shape48(t, db)
	ipamRow(t, db, "ipam_subnet", "list-net", "", map[string]any{"subnet": []any{"10.5.0.0/16"}})
	ipamRow(t, db, "ipam_subnet", "number-net", "", map[string]any{"subnet": 42})
	ipamRow(t, db, "ipam_subnet", "bool-net", "", map[string]any{"subnet": true})
	ipamRow(t, db, "ipam_subnet", "empty-list", "", map[string]any{"subnet": []any{}})
	ipamRow(t, db, "ipam_subnet", "null-net", "", map[string]any{"subnet": nil})
	ipamRow(t, db, "ipam_subnet", "good-net", "", map[string]any{"subnet": "10.6.0.0/16"})
	setRegistry(t, db, store.RegDBVersion, "4.8.0")
	run(t, db, options(t, rec))

	var warned []string
	for _, e := range rec.Find(slog.LevelWarn, "4.9.0: subnet field is not text; instance left as is") {
		warned = append(warned, e.Attrs["keyname"]+"="+e.Attrs["subnet"])
	}
	if got, want := strings.Join(warned, ","), `list-net=["10.5.0.0/16"],number-net=42,bool-net=true`; got != want {
		t.Fatalf("warnings = %s, want %s", got, want)
	}
	checkAttrs(t, oneLog(t, rec, slog.LevelInfo, msg490Done),
		map[string]string{"renamed": "1", "skipped": "3", "references_updated": "0"})
	for _, k := range []string{"list-net", "number-net", "bool-net", "empty-list", "null-net", "10.6.0.0/16"} {
		mustInstance(t, db, "ipam_subnet", k)
	}
}

// A re-run of block 4.6.0 (a 4.6.0 release candidate) adds api_builtin and
// p_code_editor only when missing, and sets the url of _home:code_editor without
// touching its other fields.
func TestMigrate460RerunKeepsUserChanges(t *testing.T) {
	t.Parallel()
	db, rec := migratedDB(t)
	setData(t, db, "_apikey", "api_builtin", map[string]any{"is_readonly": true, "permissions": []any{"p_data_access"},
		"description": "narrowed by the operator"})
	setData(t, db, "_home", "code_editor", map[string]any{"url": "/code_editor/", "order": 999, "icon": "fa-pen", "description": "ours"})
	execSQL(t, db,
		`UPDATE instances SET displayname = 'My editor' WHERE classname = '_home' AND keyname = 'code_editor'`,
		`UPDATE permissions SET displayname = 'Editor', description = 'local wording' WHERE keyname = 'p_code_editor'`)
	key := mustInstance(t, db, "_apikey", "api_builtin")
	o := options(t, rec)
	o.Version = "4.6.0-RC2"
	run(t, db, o)
	if got, want := strings.Join(blocksStarted(rec), ","), "4.6.0,4.8.0,4.9.0"; got != want {
		t.Fatalf("blocks = %s, want %s", got, want)
	}

	t.Run("api_builtin stays read-only with its narrowed permissions", func(t *testing.T) {
		k := mustInstance(t, db, "_apikey", "api_builtin")
		for _, f := range []string{"is_readonly", "permissions", "description"} {
			if got, want := field(k, f), field(key, f); got != want {
				t.Fatalf("%s = %s, want %s", f, got, want)
			}
		}
		if got, want := field(k, "is_readonly"), "true"; got != want {
			t.Fatalf("is_readonly = %s, want %s", got, want)
		}
	})
	t.Run("code_editor gets its url and keeps everything else", func(t *testing.T) {
		ce := mustInstance(t, db, "_home", "code_editor")
		got := ce.Displayname + "|" + field(ce, "url") + "|" + field(ce, "order") + "|" + field(ce, "icon") + "|" + field(ce, "description")
		if want := "My editor|/data/private/code_editor/|999|fa-pen|ours"; got != want {
			t.Fatalf("code_editor = %s, want %s", got, want)
		}
	})
	t.Run("p_code_editor keeps its wording", func(t *testing.T) {
		p := mustPermission(t, db, "p_code_editor")
		if got, want := p.Displayname+"|"+p.Description, "Editor|local wording"; got != want {
			t.Fatalf("p_code_editor = %s, want %s", got, want)
		}
	})
	t.Run("a missing api_builtin is created again", func(t *testing.T) {
		execSQL(t, db, "DELETE FROM instances WHERE classname = '_apikey' AND keyname = 'api_builtin'")
		run(t, db, o)
		k := mustInstance(t, db, "_apikey", "api_builtin")
		if got, want := field(k, "permissions"), `["role:role_admin"]`; got != want {
			t.Fatalf("permissions = %s, want %s", got, want)
		}
	})
}

// The "add" steps of blocks 4.4.0 and 4.5.0 leave an existing object as users left it
// when the blocks run again (a version that sorts below 4.4.0 as text).
func TestMigrateAddStepsKeepExistingObjects(t *testing.T) {
	t.Parallel()
	db, rec := migratedDB(t)
	setData(t, db, "_pipeline", "bulk_delete_disabled", map[string]any{"description": "off for now"})
	execSQL(t, db,
		`UPDATE instances SET is_enabled = 0 WHERE classname = '_pipeline' AND keyname = 'bulk_delete_disabled'`,
		`UPDATE permissions SET description = 'local wording' WHERE keyname IN ('p_api_load', 'p_api_rawfile', 'p_api_conf')`,
		`DELETE FROM permissions WHERE keyname = 'p_api_conf'`)
	before := mustInstance(t, db, "_pipeline", "bulk_delete_disabled")
	setRegistry(t, db, store.RegDBVersion, "4.3.0")
	run(t, db, options(t, rec))
	after := mustInstance(t, db, "_pipeline", "bulk_delete_disabled")
	if after.IsEnabled || field(after, "description") != "off for now" || field(after, "content") != field(before, "content") {
		t.Fatalf("bulk_delete_disabled reset: enabled %v, description %q", after.IsEnabled, field(after, "description"))
	}
	for _, p := range []string{"p_api_load", "p_api_rawfile"} {
		if got, want := mustPermission(t, db, p).Description, "local wording"; got != want {
			t.Fatalf("%s description = %q, want %q", p, got, want)
		}
	}
	if got := mustPermission(t, db, "p_api_conf").Description; got == "" || got == "local wording" {
		t.Fatalf("p_api_conf was not added from the built-in file: description %q", got)
	}
}

// Block 4.6.0 on a 4.5.0 database without the `_pipeline` schema: the pipeline
// rewrite has nothing to do, the three other steps run.
func TestMigrate460WithoutPipelineSchema(t *testing.T) {
	t.Parallel()
	db, rec := migratedDB(t)
	setData(t, db, "_home", "code_editor", map[string]any{"url": "/code_editor/"})
	execSQL(t, db,
		"DELETE FROM instances WHERE classname = '_pipeline'",
		"DELETE FROM schemas WHERE keyname = '_pipeline'",
		"DELETE FROM instances WHERE classname = '_apikey' AND keyname = 'api_builtin'",
		"DELETE FROM permissions WHERE keyname = 'p_code_editor'")
	setRegistry(t, db, store.RegDBVersion, "4.5.0")
	run(t, db, options(t, rec))

	if got, want := field(mustInstance(t, db, "_home", "code_editor"), "url"), "/data/private/code_editor/"; got != want {
		t.Fatalf("code_editor url = %q, want %q", got, want)
	}
	mustPermission(t, db, "p_code_editor")
	mustInstance(t, db, "_apikey", "api_builtin")
	if got, want := dbVersion(t, db), testVersion; got != want {
		t.Fatalf("DB_VERSION = %q, want %q", got, want)
	}
	if got := len(rec.Find(slog.LevelWarn, "4.6.0: schema _pipeline not found; no pipeline to rewrite")); got != 1 {
		t.Fatalf("missing-schema warnings = %d, want 1", got)
	}
}

// The seed's order: step 3 (configuration sync) runs before step 4, whose first row
// refuses data older than 4.0.0. The registry stays as it was.
func TestRunRefusalAfterConfigurationSync(t *testing.T) {
	t.Parallel()
	db, rec := migratedDB(t)
	setRegistry(t, db, store.RegDBVersion, "3.9.0")
	execSQL(t, db,
		"DELETE FROM configuration WHERE keyname = 'QUEUE_MAX'",
		"INSERT INTO configuration(keyname, value, default_value, description) VALUES('OBSOLETE_KEY', 'x', 'x', 'gone')")
	before := registry(t, db)
	o := options(t, rec)
	o.Sleep = func(context.Context, time.Duration) {}
	err := bootstrap.Run(context.Background(), testkit.Migrator(t, db), o)
	if !errors.Is(err, bootstrap.ErrRefused) {
		t.Fatalf("err = %v, want ErrRefused", err)
	}
	if got, want := count(t, db, "SELECT count(*) FROM configuration WHERE keyname = 'QUEUE_MAX'"), 1; got != want {
		t.Fatalf("QUEUE_MAX rows = %d, want %d (configuration not synchronised)", got, want)
	}
	if got, want := count(t, db, "SELECT count(*) FROM configuration WHERE keyname = 'OBSOLETE_KEY'"), 0; got != want {
		t.Fatalf("OBSOLETE_KEY rows = %d, want %d", got, want)
	}
	after := registry(t, db)
	if len(after) != len(before) {
		t.Fatalf("registry keys = %v, want %v", sortedKeys(after), sortedKeys(before))
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("registry %s = %q, want %q", k, after[k], v)
		}
	}
}

// Versions compare as text (the seed); a start logs a warning when the stored and the
// code version, or the code version and a block's version, order differently as
// numbers.
func TestRunWarnsWhenVersionsOrderDifferentlyAsText(t *testing.T) {
	t.Parallel()
	const msgStored = "stored and code versions order differently as text and as numbers; migrations compare them as text"
	const msgBlocks = "code version orders differently from migration blocks as text and as numbers; once stored, those blocks re-run at every start"
	cases := []struct {
		stored, code string
		stored1      bool   // the stored/code warning is logged
		blocks       string // the blocks named by the block warning ("" = none)
	}{
		{"4.9.0", "4.10.0", true, "4.2.0,4.4.0,4.5.0,4.6.0,4.8.0,4.9.0"},
		{"4.10.0", "4.9.0", true, ""},
		{"4.8.0", "4.9.0", false, ""},
		{"4.9.0-RC2", "4.9.0", false, ""},
		{"4.9.0", "4.9.1", false, ""},
		{"4.9.0", "10.0.0", true, "4.2.0,4.4.0,4.5.0,4.6.0,4.8.0,4.9.0"},
	}
	for _, c := range cases {
		t.Run(c.stored+" to "+c.code, func(t *testing.T) {
			db, rec := migratedDB(t)
			setRegistry(t, db, store.RegDBVersion, c.stored)
			o := options(t, rec)
			o.Version = c.code
			run(t, db, o)
			w := rec.Find(slog.LevelWarn, msgStored)
			if got := len(w) == 1; got != c.stored1 || len(w) > 1 {
				t.Fatalf("stored/code warnings = %+v, want %v", w, c.stored1)
			}
			var blocks string
			if b := rec.Find(slog.LevelWarn, msgBlocks); len(b) == 1 {
				blocks = b[0].Attrs["blocks"]
			}
			if blocks != c.blocks {
				t.Fatalf("block warning names %q, want %q", blocks, c.blocks)
			}
		})
	}
}

// SERVICE_VERSION is MAJOR.MINOR.PATCH, alone or followed by "-" and a suffix of 1 to
// 64 printable ASCII characters without spaces (it is stored in DB_VERSION).
func TestCheckVersion(t *testing.T) {
	t.Parallel()
	suffix64 := strings.Repeat("x", 64)
	for _, v := range []string{"4.9.0", "4.9.0-RC1", "4.10.0", "5.0.0-RC12", "4.0.0", "4.9.0-RC", "4.9.0-rc1",
		"4.9.0-RC1-hotfix", "4.9.0-beta", "4.9.0-" + suffix64, "4.9.0-a+b~c!"} {
		if err := bootstrap.CheckVersion(v); err != nil {
			t.Errorf("CheckVersion(%q) = %v, want nil", v, err)
		}
	}
	for _, c := range []struct{ v, want string }{
		{"", "blank"}, {"   ", "blank"}, {" 4.9.0", "white space around it"}, {"4.9.0 ", "white space around it"},
		{"4.9", "not a version"}, {"4.9.0.1", "not a version"}, {"v4.9.0", "not a version"},
		{"4.09.0", "not a version"}, {"4.9.0-", "nothing follows"}, {"4.9.0-RC 1", "printable ASCII without spaces"},
		{"4.9.0-RC\t1", "printable ASCII without spaces"}, {"4.9.0-\u00e9t\u00e9", "printable ASCII without spaces"},
		{"4.9.0-x\x7f", "printable ASCII without spaces"}, {"4.9.0-" + suffix64 + "y", "longer than 64"},
		{"3.0.0", "sorts below"}, {"3.99.99", "sorts below"}, {"4.9.0\n", "white space around it"},
		{strings.Repeat("9", 5000), "not a version"},
	} {
		err := bootstrap.CheckVersion(c.v)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckVersion(%q) = %v, want an error saying %q", c.v, err, c.want)
			continue
		}
		if len(err.Error()) > 300 {
			t.Errorf("CheckVersion(%.20q...) error is %d bytes long: it must quote a bounded part", c.v, len(err.Error()))
		}
	}
}
