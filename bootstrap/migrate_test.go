package bootstrap_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"dataservice/bootstrap"
	"dataservice/internal/testkit"
	"dataservice/rules"
	"dataservice/store"
)

// removedIn420 are the permissions the 4.2.0 block deletes.
var removedIn420 = []string{"p_schema_create", "p_schema_update", "p_schema_delete", "p_schemafield_read",
	"p_schemafield_create", "p_schemafield_update", "p_schemafield_delete"}

// userDefaultContent is the content of the user_default dataview in 30_dataview.yml.
const userDefaultContent = "columns:\n  - keyname\n  - displayname\n  - email\n  - firstname\n  - lastname\n  - is_enabled\n"

func TestMigrate420(t *testing.T) {
	t.Parallel()
	db, rec := migratedDB(t)
	setRegistry(t, db, store.RegDBVersion, "4.1.0")
	for _, p := range removedIn420 {
		insertPermission(t, db, p)
	}
	execSQL(t, db,
		"DELETE FROM permissions WHERE keyname = 'p_keyname_rename'",
		"DELETE FROM instances WHERE classname = '_home' AND keyname IN ('code_editor', 'revision')",
		"DELETE FROM instances WHERE classname = '_dataview' AND keyname = 'user_default'",
		// ipam_ip as 4.1.x had it: keyname mode edit, no collected field.
		"UPDATE schemas SET keyname_mode = 'edit', displayname = 'Old IPs' WHERE keyname = 'ipam_ip'",
		"DELETE FROM schema_fields WHERE classname = 'ipam_ip' AND keyname = 'collected'",
	)
	o := options(t, rec)
	run(t, db, o)

	t.Run("deprecated permissions are deleted", func(t *testing.T) {
		for _, p := range removedIn420 {
			if _, ok := permission(t, db, p); ok {
				t.Fatalf("permission %s still exists", p)
			}
		}
		// 21 after the block; the code's own built-in permissions are synchronised at each start.
		if got, want := count(t, db, "SELECT count(*) FROM permissions"), 21+len(store.CodePermissions()); got != want {
			t.Fatalf("permissions = %d, want %d", got, want)
		}
	})
	t.Run("p_keyname_rename is reloaded as a built-in", func(t *testing.T) {
		p := mustPermission(t, db, "p_keyname_rename")
		if got, want := p.Displayname, "Keyname rename"; got != want {
			t.Fatalf("displayname = %q, want %q", got, want)
		}
		if got, want := p.Description, "Rename instances (cascading to references)"; got != want {
			t.Fatalf("description = %q, want %q", got, want)
		}
	})
	t.Run("dashboard entries code_editor and revision are reloaded", func(t *testing.T) {
		ce := mustInstance(t, db, "_home", "code_editor")
		for k, want := range map[string]string{"url": "/data/private/code_editor/", "permission": "p_code_editor",
			"icon": "fa-code", "dashboard_section": "Admin", "order": "360"} {
			if got := field(ce, k); got != want {
				t.Fatalf("code_editor %s = %q, want %q", k, got, want)
			}
		}
		rv := mustInstance(t, db, "_home", "revision")
		if got, want := field(rv, "url"), "/data/private/revision/"; got != want {
			t.Fatalf("revision url = %q, want %q", got, want)
		}
		if got, want := rv.Displayname, "Revisions"; got != want {
			t.Fatalf("revision displayname = %q, want %q", got, want)
		}
	})
	t.Run("dataview user_default is reloaded", func(t *testing.T) {
		dv := mustInstance(t, db, "_dataview", "user_default")
		if got, want := field(dv, "content"), userDefaultContent; got != want {
			t.Fatalf("content = %q, want %q", got, want)
		}
		if got, want := field(dv, "target_class"), "_user"; got != want {
			t.Fatalf("target_class = %q, want %q", got, want)
		}
	})
	t.Run("schema ipam_ip is reloaded with hexip and collected", func(t *testing.T) {
		var mode, name string
		if err := db.Reader().QueryRowContext(context.Background(), "SELECT keyname_mode, displayname FROM schemas WHERE keyname = 'ipam_ip'").Scan(&mode, &name); err != nil {
			t.Fatal(err)
		}
		if got, want := mode, "hexip"; got != want {
			t.Fatalf("keyname_mode = %q, want %q", got, want)
		}
		if got, want := name, "IP addresses"; got != want {
			t.Fatalf("displayname = %q, want %q", got, want)
		}
		var format, def string
		if err := db.Reader().QueryRowContext(context.Background(), "SELECT dataformat, default_value FROM schema_fields WHERE classname = 'ipam_ip' AND keyname = 'collected'").
			Scan(&format, &def); err != nil {
			t.Fatalf("field collected: %v", err)
		}
		if got, want := format+" "+def, "boolean false"; got != want {
			t.Fatalf("collected dataformat/default = %q, want %q", got, want)
		}
	})
	t.Run("every block runs once, without revision or error", func(t *testing.T) {
		if got, want := strings.Join(blocksStarted(rec), ","), "4.2.0,4.4.0,4.5.0,4.6.0,4.8.0,4.9.0"; got != want {
			t.Fatalf("blocks = %s, want %s", got, want)
		}
		if got := rec.AtLeast(slog.LevelWarn); len(got) != 0 {
			t.Fatalf("warnings or errors: %+v", got)
		}
		if got, want := count(t, db, "SELECT count(*) FROM revisions"), 0; got != want {
			t.Fatalf("revisions = %d, want %d", got, want)
		}
		if got, want := dbVersion(t, db), testVersion; got != want {
			t.Fatalf("DB_VERSION = %q, want %q", got, want)
		}
	})
	t.Run("running the blocks again changes nothing", func(t *testing.T) {
		assertRerunChangesNothing(t, db, o, "4.1.0")
	})
}

func TestMigrate440(t *testing.T) {
	t.Parallel()
	db, rec := migratedDB(t)
	setRegistry(t, db, store.RegDBVersion, "4.3.0")
	execSQL(t, db,
		"DELETE FROM instances WHERE classname = '_pipeline' AND keyname = 'bulk_delete_disabled'",
		"DELETE FROM permissions WHERE keyname IN ('p_api_load', 'p_api_rawfile')",
	)
	// Deleted by 4.2.0: present afterwards only if 4.2.0 wrongly ran again.
	insertPermission(t, db, "p_schema_create")
	o := options(t, rec)
	run(t, db, o)

	t.Run("pipeline bulk_delete_disabled is added", func(t *testing.T) {
		p := mustInstance(t, db, "_pipeline", "bulk_delete_disabled")
		if got, want := field(p, "content"), bulkDeleteContent; got != want {
			t.Fatalf("content = %q, want %q", got, want)
		}
		if got, want := field(p, "description"), "Deletes every disabled instance of the schemas it runs on; enabled ones are left untouched"; got != want {
			t.Fatalf("description = %q, want %q", got, want)
		}
		if !p.IsEnabled {
			t.Fatalf("bulk_delete_disabled is disabled")
		}
	})
	t.Run("permissions p_api_load and p_api_rawfile are added as built-ins", func(t *testing.T) {
		if got, want := mustPermission(t, db, "p_api_load").Description, "POST /api/load/"; got != want {
			t.Fatalf("p_api_load description = %q, want %q", got, want)
		}
		if got, want := mustPermission(t, db, "p_api_rawfile").Description, "POST /api/rawfile/"; got != want {
			t.Fatalf("p_api_rawfile description = %q, want %q", got, want)
		}
		mustPermission(t, db, "p_data_import") // left unchanged beside p_api_rawfile
	})
	t.Run("block 4.2.0 does not run from 4.3.0", func(t *testing.T) {
		if _, ok := permission(t, db, "p_schema_create"); !ok {
			t.Fatalf("p_schema_create was deleted: block 4.2.0 ran")
		}
		if got, want := strings.Join(blocksStarted(rec), ","), "4.4.0,4.5.0,4.6.0,4.8.0,4.9.0"; got != want {
			t.Fatalf("blocks = %s, want %s", got, want)
		}
		if got, want := count(t, db, "SELECT count(*) FROM revisions"), 0; got != want {
			t.Fatalf("revisions = %d, want %d", got, want)
		}
	})
	t.Run("running the blocks again changes nothing", func(t *testing.T) {
		assertRerunChangesNothing(t, db, o, "4.3.0")
	})
}

func TestMigrate450(t *testing.T) {
	t.Parallel()
	db, rec := migratedDB(t)
	setRegistry(t, db, store.RegDBVersion, "4.4.0")
	execSQL(t, db,
		"DELETE FROM permissions WHERE keyname = 'p_api_conf'",
		// Added by 4.4.0: stays missing unless 4.4.0 wrongly runs again.
		"DELETE FROM instances WHERE classname = '_pipeline' AND keyname = 'bulk_delete_disabled'",
	)
	o := options(t, rec)
	run(t, db, o)

	t.Run("permission p_api_conf is added as a built-in", func(t *testing.T) {
		p := mustPermission(t, db, "p_api_conf")
		if got, want := p.Displayname, "API configuration"; got != want {
			t.Fatalf("displayname = %q, want %q", got, want)
		}
		if got, want := p.Description, "/api/conf/ (with p_conf_view or p_conf_admin)"; got != want {
			t.Fatalf("description = %q, want %q", got, want)
		}
	})
	t.Run("block 4.4.0 does not run from 4.4.0", func(t *testing.T) {
		if in := instance(t, db, "_pipeline", "bulk_delete_disabled"); in != nil {
			t.Fatalf("bulk_delete_disabled was added: block 4.4.0 ran")
		}
		if got, want := strings.Join(blocksStarted(rec), ","), "4.5.0,4.6.0,4.8.0,4.9.0"; got != want {
			t.Fatalf("blocks = %s, want %s", got, want)
		}
	})
	t.Run("running the blocks again changes nothing", func(t *testing.T) {
		assertRerunChangesNothing(t, db, o, "4.4.0")
	})
}

// Pipeline contents of the 4.6.0 rewrite: a list is kept byte for byte, a mapping with
// tasks: becomes that list, anything else becomes [].
const (
	flatContent = "# already a flat list: kept byte for byte\n- field_lower: email\n-   field_set: ['', role, user]   # odd spacing\n"
	wrapContent = `csv_delimiter: ";"
encoding: utf-8
classname: server
keyfield: hostname
tasks:
  - field_lower: email
  - set_condition: [is_admin, field_match, email, '@admin\.example$']
  - field_set: [is_admin, role, admin]
`
	wrapFlattened = `- field_lower: email
- set_condition: [is_admin, field_match, email, '@admin\.example$']
- field_set: [is_admin, role, admin]
`
)

// taggedContent has an unquoted gate, a YAML tag.
const taggedContent = "- set_condition: [is_prod, field_match, env, '^prod$']\n- field_delete: [!is_prod, env]\n"

// indent indents every line of a rule list by two spaces, as under a `tasks:` key.
func indent(list string) string {
	return "  " + strings.ReplaceAll(strings.TrimSuffix(list, "\n"), "\n", "\n  ") + "\n"
}

// mustNormalize is the 4.6.0 rewrite of content, which must be a rule list (not []).
func mustNormalize(t *testing.T, content string) string {
	t.Helper()
	norm, changed := rules.Normalize(content)
	if !changed || norm == "[]" || !strings.Contains(norm, "field_delete") {
		t.Fatalf("Normalize(%q) = %q, %v: want the flattened list", content, norm, changed)
	}
	return norm
}

func TestMigrate460(t *testing.T) {
	t.Parallel()
	db, rec := migratedDB(t)
	setRegistry(t, db, store.RegDBVersion, "4.5.0")
	pipelines := []struct {
		key, content, want string
	}{
		{"p_flat", flatContent, flatContent},
		{"p_wrapped", wrapContent, wrapFlattened},
		{"p_garbage", "tasks: [unclosed\n  - : :", "[]"},
		{"p_scalar", "just some text", "[]"},
		{"p_no_tasks", "classname: server\nkeyfield: hostname\n", "[]"},
		{"p_empty_tasks", "csv_delimiter: ','\ntasks: []\n", "[]"},
		// YAML tags are refused when content is saved or run, not by the rewrite: a
		// tagged list is a list, left as it is for its owner to quote the gate.
		{"p_tagged", taggedContent, taggedContent},
		// The same in the older wrapper, and a gate no rule sets: flattened as any
		// wrapper is, never failing the block (the checks of a save would refuse both).
		{"p_tagged_wrapped", "tasks:\n" + indent(taggedContent), mustNormalize(t, "tasks:\n"+indent(taggedContent))},
		{"p_unset_gate_wrapped", "tasks:\n  - field_delete: [nobody_sets, env]\n", "- field_delete: [nobody_sets, env]\n"},
	}
	for _, p := range pipelines {
		insertInstance(t, db, "_pipeline", p.key, map[string]any{"content": p.content, "description": "legacy " + p.key,
			"run_permission": "p_pipeline_run"})
	}
	setData(t, db, "_home", "code_editor", map[string]any{"url": "/code_editor/"})
	execSQL(t, db,
		`UPDATE instances SET updated_at = '`+oldTime+`' WHERE classname = '_home' AND keyname = 'code_editor'`,
		"DELETE FROM instances WHERE classname = '_apikey' AND keyname = 'api_builtin'",
		"DELETE FROM permissions WHERE keyname = 'p_code_editor'",
		// Added by 4.5.0: stays missing unless 4.5.0 wrongly runs again.
		"DELETE FROM permissions WHERE keyname = 'p_api_conf'",
	)
	o := options(t, rec)
	run(t, db, o)

	for _, p := range pipelines {
		t.Run("pipeline "+p.key+" holds a flat rule list", func(t *testing.T) {
			in := mustInstance(t, db, "_pipeline", p.key)
			if got, want := field(in, "content"), p.want; got != want {
				t.Fatalf("content = %q, want %q", got, want)
			}
			if got, want := field(in, "description"), "legacy "+p.key; got != want {
				t.Fatalf("description = %q, want %q", got, want)
			}
			if got, want := field(in, "run_permission"), "p_pipeline_run"; got != want {
				t.Fatalf("run_permission = %q, want %q", got, want)
			}
			for _, k := range []string{"csv_delimiter", "encoding", "classname", "keyfield", "tasks"} {
				if _, ok := in.Data[k]; ok {
					t.Fatalf("data key %s is present", k)
				}
			}
			if rewritten := in.UpdatedAt != oldTime; rewritten != (p.want != p.content) {
				t.Fatalf("updated_at = %s: rewritten = %v, want %v", in.UpdatedAt, rewritten, p.want != p.content)
			}
		})
	}
	t.Run("built-in pipeline is left as it was", func(t *testing.T) {
		if got, want := field(mustInstance(t, db, "_pipeline", "bulk_delete_disabled"), "content"), bulkDeleteContent; got != want {
			t.Fatalf("content = %q, want %q", got, want)
		}
	})
	t.Run("code_editor entry gets the new url", func(t *testing.T) {
		ce := mustInstance(t, db, "_home", "code_editor")
		if got, want := field(ce, "url"), "/data/private/code_editor/"; got != want {
			t.Fatalf("url = %q, want %q", got, want)
		}
		if got, want := field(ce, "permission"), "p_code_editor"; got != want {
			t.Fatalf("permission = %q, want %q", got, want)
		}
	})
	t.Run("permission p_code_editor is added as a built-in", func(t *testing.T) {
		if got, want := mustPermission(t, db, "p_code_editor").Description, "The raw YAML/JSON code editor"; got != want {
			t.Fatalf("description = %q, want %q", got, want)
		}
	})
	t.Run("api_builtin is added without a secret", func(t *testing.T) {
		k := mustInstance(t, db, "_apikey", "api_builtin")
		if _, ok := k.Data["secret"]; ok {
			t.Fatalf("api_builtin has a secret")
		}
		if got, want := field(k, "permissions"), `["role:role_admin"]`; got != want {
			t.Fatalf("permissions = %s, want %s", got, want)
		}
	})
	t.Run("block 4.5.0 does not run, 4.6.0 logs its count, no revision", func(t *testing.T) {
		if _, ok := permission(t, db, "p_api_conf"); ok {
			t.Fatalf("p_api_conf was added: block 4.5.0 ran")
		}
		if got, want := strings.Join(blocksStarted(rec), ","), "4.6.0,4.8.0,4.9.0"; got != want {
			t.Fatalf("blocks = %s, want %s", got, want)
		}
		r := rec.Find(slog.LevelInfo, "pipelines rewritten to flat rule lists")
		if len(r) != 1 || r[0].Attrs["count"] != "7" {
			t.Fatalf("rewrite records = %+v, want one with count 7", r)
		}
		if got, want := count(t, db, "SELECT count(*) FROM revisions"), 0; got != want {
			t.Fatalf("revisions = %d, want %d", got, want)
		}
		if got := rec.AtLeast(slog.LevelWarn); len(got) != 0 {
			t.Fatalf("warnings or errors: %+v", got)
		}
	})
	t.Run("running the block again changes nothing", func(t *testing.T) {
		assertRerunChangesNothing(t, db, o, "4.5.0")
	})
	t.Run("a start at 4.6.0 does not rewrite pipelines again", func(t *testing.T) {
		setData(t, db, "_pipeline", "p_flat", map[string]any{"content": "tasks: []"})
		run(t, db, o)
		if got, want := field(mustInstance(t, db, "_pipeline", "p_flat"), "content"), "tasks: []"; got != want {
			t.Fatalf("content = %q, want %q (block 4.6.0 ran at 4.6.0)", got, want)
		}
	})
}

func TestMigrateReleaseCandidateRerunsItsBlock(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	rec := &testkit.Recorder{}
	o := options(t, rec)
	o.Version = "4.6.0-RC1"
	run(t, db, o)
	if got, want := dbVersion(t, db), "4.6.0-RC1"; got != want {
		t.Fatalf("DB_VERSION = %q, want %q", got, want)
	}
	for i := 1; i <= 2; i++ {
		t.Run(fmt.Sprintf("block 4.6.0 runs again at start %d", i+1), func(t *testing.T) {
			// Break what 4.6.0 fixes and what 4.2.0 fixes, then start again.
			execSQL(t, db, "DELETE FROM permissions WHERE keyname = 'p_code_editor'")
			if _, ok := permission(t, db, "p_schema_create"); !ok {
				insertPermission(t, db, "p_schema_create")
			}
			if instance(t, db, "_pipeline", "p_rc") == nil {
				insertInstance(t, db, "_pipeline", "p_rc", map[string]any{"content": wrapContent})
			} else {
				setData(t, db, "_pipeline", "p_rc", map[string]any{"content": `tasks: [{field_noop: ""}]`})
			}
			rec.Reset()
			run(t, db, o)
			want := wrapFlattened
			if i == 2 {
				want = "- {field_noop: \"\"}\n"
			}
			if got := field(mustInstance(t, db, "_pipeline", "p_rc"), "content"); got != want {
				t.Fatalf("p_rc content = %q, want %q", got, want)
			}
			mustPermission(t, db, "p_code_editor")
			if _, ok := permission(t, db, "p_schema_create"); !ok {
				t.Fatalf("p_schema_create was deleted: block 4.2.0 ran")
			}
			if got, want := strings.Join(blocksStarted(rec), ","), "4.6.0,4.8.0,4.9.0"; got != want {
				t.Fatalf("blocks = %s, want %s", got, want)
			}
			if got, want := dbVersion(t, db), "4.6.0-RC1"; got != want {
				t.Fatalf("DB_VERSION = %q, want %q", got, want)
			}
		})
	}
}

// failRegistryWrite makes any write of DB_VERSION = version abort, so the block that
// ends with that version fails at its last step.
func failRegistryWrite(t *testing.T, db *store.DB, version string) {
	t.Helper()
	cond := "NEW.key = 'DB_VERSION' AND NEW.value = '" + version + "'"
	failOn(t, db, "fail_insert", "INSERT", "registry", cond)
	failOn(t, db, "fail_update", "UPDATE", "registry", cond)
}

func TestMigrateFailingBlockRollsBackAndStops(t *testing.T) {
	t.Parallel()
	db, rec := migratedDB(t)
	setRegistry(t, db, store.RegDBVersion, "4.1.0")
	setRegistry(t, db, store.RegDBVersionDate, "2020-01-01")
	insertPermission(t, db, "p_schema_create")
	execSQL(t, db,
		"DELETE FROM registry WHERE key = 'LAST_START'",
		"DELETE FROM instances WHERE classname = '_pipeline' AND keyname = 'bulk_delete_disabled'",
		"DELETE FROM permissions WHERE keyname IN ('p_api_load', 'p_api_conf', 'p_code_editor')",
	)
	failRegistryWrite(t, db, "4.4.0")
	o := options(t, rec)
	err := bootstrap.Run(context.Background(), testkit.Migrator(t, db), o)

	t.Run("Run returns an error naming the block", func(t *testing.T) {
		if err == nil {
			t.Fatal("Run succeeded")
		}
		if !strings.Contains(err.Error(), "migration block 4.4.0") || !strings.Contains(err.Error(), "injected failure") {
			t.Fatalf("err = %v, want it to name block 4.4.0 and the failure", err)
		}
		c := rec.AtLeast(bootstrap.LevelCritical)
		if len(c) != 1 || c[0].Attrs["step"] != "migration block 4.4.0" || !strings.Contains(c[0].Attrs["error"], "injected failure") {
			t.Fatalf("critical records = %+v, want one naming the block and the error", c)
		}
	})
	t.Run("DB_VERSION stays at the previous block", func(t *testing.T) {
		reg := registry(t, db)
		if got, want := reg[store.RegDBVersion], "4.2.0"; got != want {
			t.Fatalf("DB_VERSION = %q, want %q", got, want)
		}
		if got, want := reg[store.RegDBVersionDate], "2020-01-01"; got != want {
			t.Fatalf("DB_VERSION_DATE = %q, want %q", got, want)
		}
		if _, err := time.Parse(time.RFC3339, reg[store.RegLastStartFailed]); err != nil {
			t.Fatalf("LAST_START_FAILED = %q: %v", reg[store.RegLastStartFailed], err)
		}
		if v, ok := reg[store.RegLastStart]; ok {
			t.Fatalf("LAST_START = %q, want none", v)
		}
	})
	t.Run("the block before it is committed", func(t *testing.T) {
		if _, ok := permission(t, db, "p_schema_create"); ok {
			t.Fatalf("p_schema_create exists: block 4.2.0 was not committed")
		}
	})
	t.Run("the failed block is rolled back", func(t *testing.T) {
		if in := instance(t, db, "_pipeline", "bulk_delete_disabled"); in != nil {
			t.Fatalf("bulk_delete_disabled exists")
		}
		if _, ok := permission(t, db, "p_api_load"); ok {
			t.Fatalf("p_api_load exists")
		}
	})
	t.Run("later blocks did not run", func(t *testing.T) {
		for _, p := range []string{"p_api_conf", "p_code_editor"} {
			if _, ok := permission(t, db, p); ok {
				t.Fatalf("%s exists", p)
			}
		}
		if got, want := strings.Join(blocksStarted(rec), ","), "4.2.0,4.4.0"; got != want {
			t.Fatalf("blocks = %s, want %s", got, want)
		}
	})
	t.Run("next start completes once the cause is gone", func(t *testing.T) {
		dropFail(t, db, "fail_insert", "registry")
		dropFail(t, db, "fail_update", "registry")
		rec.Reset()
		run(t, db, o)
		if got, want := strings.Join(blocksStarted(rec), ","), "4.4.0,4.5.0,4.6.0,4.8.0,4.9.0"; got != want {
			t.Fatalf("blocks = %s, want %s", got, want)
		}
		for _, p := range []string{"p_api_load", "p_api_conf", "p_code_editor"} {
			mustPermission(t, db, p)
		}
		mustInstance(t, db, "_pipeline", "bulk_delete_disabled")
		if got, want := dbVersion(t, db), testVersion; got != want {
			t.Fatalf("DB_VERSION = %q, want %q", got, want)
		}
	})
}

func TestMigrateRejectedPipelineFailsBlock460(t *testing.T) {
	t.Parallel()
	db, rec := migratedDB(t)
	setRegistry(t, db, store.RegDBVersion, "4.5.0")
	// The content field now only takes JSON: "[]" passes, a rewritten YAML list does not.
	execSQL(t, db, "UPDATE schema_fields SET dataformat_ext = 'json' WHERE classname = '_pipeline' AND keyname = 'content'",
		"DELETE FROM permissions WHERE keyname = 'p_code_editor'")
	insertInstance(t, db, "_pipeline", "a_first", map[string]any{"content": "not: a list"})
	insertInstance(t, db, "_pipeline", "b_second", map[string]any{"content": wrapContent})
	err := bootstrap.Run(context.Background(), testkit.Migrator(t, db), options(t, rec))

	if err == nil {
		t.Fatal("Run succeeded")
	}
	if got, want := err.Error(), "migration block 4.6.0: rewrite pipeline b_second: field content: not valid JSON"; got != want {
		t.Fatalf("err = %q, want %q", got, want)
	}
	if got, want := dbVersion(t, db), "4.5.0"; got != want {
		t.Fatalf("DB_VERSION = %q, want %q", got, want)
	}
	if _, ok := registry(t, db)[store.RegLastStartFailed]; !ok {
		t.Fatalf("LAST_START_FAILED not set")
	}
	if got, want := field(mustInstance(t, db, "_pipeline", "a_first"), "content"), "not: a list"; got != want {
		t.Fatalf("a_first content = %q, want %q (rewrite not rolled back)", got, want)
	}
	if _, ok := permission(t, db, "p_code_editor"); ok {
		t.Fatalf("p_code_editor exists")
	}
}
