package bootstrap_test

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"dataservice/bootstrap"
	"dataservice/builtin"
	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/codec"
	"dataservice/store/model"
)

// builtinEntries parses every embedded built-in file.
func builtinEntries(t *testing.T) []*model.Entry {
	t.Helper()
	fsys := builtin.Init()
	names, err := fs.Glob(fsys, "*.yml")
	if err != nil {
		t.Fatal(err)
	}
	var out []*model.Entry
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := codec.ParseDocument(name, data)
		if err != nil {
			t.Fatalf("built-in file %s: %v", name, err)
		}
		out = append(out, entries...)
	}
	return out
}

// bulkDeleteContent is the content of the built-in pipeline, as in 40_pipeline.yml.
const bulkDeleteContent = "- set_condition: [disabled, is_false, is_enabled]\n- field_set: [disabled, _action, delete]\n"

func TestRunEmptyDatabase(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	rec := &testkit.Recorder{}
	// LAST_START is read from the database's clock (a ticking clock here).
	before := db.Now().UTC().Truncate(time.Second)
	run(t, db, options(t, rec))
	after := db.Now().UTC()
	reg := registry(t, db)

	t.Run("registry holds DB_VERSION, its date, LAST_START and INSTANCE_UUID only", func(t *testing.T) {
		if got, want := strings.Join(sortedKeys(reg), ","), "DB_VERSION,DB_VERSION_DATE,INSTANCE_UUID,LAST_START"; got != want {
			t.Fatalf("registry keys = %s, want %s", got, want)
		}
		if got, want := reg[store.RegDBVersion], testVersion; got != want {
			t.Fatalf("DB_VERSION = %q, want %q", got, want)
		}
		if got, want := reg[store.RegDBVersionDate], testVersionDate; got != want {
			t.Fatalf("DB_VERSION_DATE = %q, want %q", got, want)
		}
		ls, err := time.Parse(time.RFC3339, reg[store.RegLastStart])
		if err != nil {
			t.Fatalf("LAST_START %q is not RFC 3339: %v", reg[store.RegLastStart], err)
		}
		if !strings.HasSuffix(reg[store.RegLastStart], "Z") {
			t.Fatalf("LAST_START %q is not UTC", reg[store.RegLastStart])
		}
		if ls.Before(before) || ls.After(after) {
			t.Fatalf("LAST_START %v is not the time of this start (%v .. %v)", ls, before, after)
		}
	})

	t.Run("INSTANCE_UUID is a random UUID in canonical text form", func(t *testing.T) {
		raw := reg[store.RegInstanceUUID]
		u, err := uuid.Parse(raw)
		if err != nil {
			t.Fatalf("INSTANCE_UUID %q: %v", raw, err)
		}
		if got, want := u.String(), raw; got != want {
			t.Fatalf("INSTANCE_UUID %q is not canonical (%q)", raw, got)
		}
		if got, want := u.Version(), uuid.Version(4); got != want {
			t.Fatalf("INSTANCE_UUID version = %v, want %v", got, want)
		}
		if got, want := u.Variant(), uuid.RFC4122; got != want {
			t.Fatalf("INSTANCE_UUID variant = %v, want %v", got, want)
		}
	})

	t.Run("every object of the built-in files exists", func(t *testing.T) {
		var perms, schemas, instances int
		for _, e := range builtinEntries(t) {
			cls, key := e.Key()
			switch cls {
			case "_permission":
				perms++
				mustPermission(t, db, key)
			case "_schema":
				schemas++
				var fields []string
				for k, v := range e.Fields {
					if _, ok := v.(map[string]any); ok && k != "_options" {
						fields = append(fields, k)
					}
				}
				if got, want := count(t, db, "SELECT count(*) FROM schemas WHERE keyname = ? AND is_builtin = 1", key), 1; got != want {
					t.Fatalf("built-in schemas named %s = %d, want %d", key, got, want)
				}
				if got, want := count(t, db, "SELECT count(*) FROM schema_fields WHERE classname = ?", key), len(fields); got != want {
					t.Fatalf("fields of %s = %d, want %d (%v)", key, got, want, fields)
				}
				for _, f := range fields {
					if got, want := count(t, db, "SELECT count(*) FROM schema_fields WHERE classname = ? AND keyname = ?", key, f), 1; got != want {
						t.Fatalf("field %s.%s rows = %d, want %d", key, f, got, want)
					}
				}
			default:
				instances++
				mustInstance(t, db, cls, key)
			}
		}
		// The built-in files' permissions and those the code synchronises at each start.
		for _, p := range store.CodePermissions() {
			mustPermission(t, db, p.Keyname)
		}
		if got, want := count(t, db, "SELECT count(*) FROM permissions"), perms+len(store.CodePermissions()); got != want {
			t.Fatalf("permissions = %d, want %d (the built-in ones)", got, want)
		}
		if got, want := count(t, db, "SELECT count(*) FROM permissions WHERE is_builtin = 1"), perms+len(store.CodePermissions()); got != want {
			t.Fatalf("built-in permissions = %d, want %d", got, want)
		}
		if got, want := count(t, db, "SELECT count(*) FROM schemas WHERE is_builtin = 1"), schemas+len(store.CodeClasses()); got != want {
			t.Fatalf("built-in schemas = %d, want %d", got, want)
		}
		if got, want := count(t, db, "SELECT count(*) FROM schemas"), schemas+len(store.CodeClasses()); got != want {
			t.Fatalf("schemas = %d, want %d", got, want)
		}
		if got, want := count(t, db, "SELECT count(*) FROM instances"), instances; got != want {
			t.Fatalf("instances = %d, want %d", got, want)
		}
		if got, want := perms, 21; got != want {
			t.Fatalf("built-in files define %d permissions, want %d", got, want)
		}
	})

	t.Run("permissions removed by 4.2.0 are absent", func(t *testing.T) {
		for _, p := range []string{"p_schema_create", "p_schema_update", "p_schema_delete", "p_schemafield_read",
			"p_schemafield_create", "p_schemafield_update", "p_schemafield_delete"} {
			if _, ok := permission(t, db, p); ok {
				t.Fatalf("permission %s exists", p)
			}
		}
		for _, p := range []string{"p_keyname_rename", "p_api_load", "p_api_rawfile", "p_api_conf", "p_code_editor",
			"p_data_access", "p_pipeline_run", "p_data_import"} {
			mustPermission(t, db, p)
		}
	})

	t.Run("admin is locked without a password and belongs to role_admin", func(t *testing.T) {
		admin := mustInstance(t, db, "_user", "admin")
		if admin.IsEnabled {
			t.Fatalf("admin is_enabled = true, want false (no SERVICE_ADMIN_PASSWORD)")
		}
		if got, want := field(admin, "password"), ""; got != want {
			t.Fatalf("admin password = %q, want none", got)
		}
		role := mustInstance(t, db, "_role", "role_admin")
		if got, want := field(role, "users"), `["admin"]`; got != want {
			t.Fatalf("role_admin users = %s, want %s", got, want)
		}
		if !role.IsEnabled {
			t.Fatalf("role_admin is disabled")
		}
	})

	t.Run("dashboard entries, dataviews and the pipeline have their file values", func(t *testing.T) {
		for key, url := range map[string]string{"data": "/data/private/", "ipam": "/data/private/ipam/",
			"code_editor": "/data/private/code_editor/", "revision": "/data/private/revision/"} {
			if got, want := field(mustInstance(t, db, "_home", key), "url"), url; got != want {
				t.Fatalf("_home %s url = %q, want %q", key, got, want)
			}
		}
		if got, want := field(mustInstance(t, db, "_home", "code_editor"), "permission"), "p_code_editor"; got != want {
			t.Fatalf("_home code_editor permission = %q, want %q", got, want)
		}
		for key, target := range map[string]string{"user_default": "_user", "ipam_ip_default": "ipam_ip", "ipam_subnet": "ipam_subnet"} {
			if got, want := field(mustInstance(t, db, "_dataview", key), "target_class"), target; got != want {
				t.Fatalf("_dataview %s target_class = %q, want %q", key, got, want)
			}
		}
		p := mustInstance(t, db, "_pipeline", "bulk_delete_disabled")
		if got, want := field(p, "content"), bulkDeleteContent; got != want {
			t.Fatalf("bulk_delete_disabled content = %q, want %q", got, want)
		}
		if got, want := p.Displayname, "Delete disabled instances"; got != want {
			t.Fatalf("bulk_delete_disabled displayname = %q, want %q", got, want)
		}
	})

	t.Run("api_builtin exists without a secret", func(t *testing.T) {
		k := mustInstance(t, db, "_apikey", "api_builtin")
		if _, ok := k.Data["secret"]; ok {
			t.Fatalf("api_builtin has a secret %q, want none", field(k, "secret"))
		}
		if got, want := field(k, "is_readonly"), "false"; got != want {
			t.Fatalf("api_builtin is_readonly = %s, want %s", got, want)
		}
		if got, want := field(k, "permissions"), `["role:role_admin"]`; got != want {
			t.Fatalf("api_builtin permissions = %s, want %s", got, want)
		}
	})

	t.Run("ipam schemas have their keyname modes", func(t *testing.T) {
		for name, mode := range map[string]string{"ipam_subnet": "dataformat ipv4 subnet strict", "ipam_ip": "hexip", "ipam_vlan": "edit"} {
			s, err := db.Schema(context.Background(), name)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := s.KeynameMode, mode; got != want {
				t.Fatalf("%s keyname_mode = %q, want %q", name, got, want)
			}
			if !s.IsBuiltin {
				t.Fatalf("%s is_builtin = false", name)
			}
		}
		s, _ := db.Schema(context.Background(), "ipam_ip")
		if f := s.Field("collected"); f == nil || f.Dataformat != "boolean" {
			t.Fatalf("ipam_ip field collected = %+v, want a boolean field", f)
		}
	})

	t.Run("configuration is synchronised and no revision is written", func(t *testing.T) {
		if got, want := count(t, db, "SELECT count(*) FROM configuration"), len(store.ConfigDefs); got != want {
			t.Fatalf("configuration rows = %d, want %d", got, want)
		}
		if got, want := count(t, db, "SELECT count(*) FROM revisions"), 0; got != want {
			t.Fatalf("revisions = %d, want %d", got, want)
		}
	})

	t.Run("log shows one bootstrap, the blocks after 4.2.0 and no warning", func(t *testing.T) {
		if got, want := len(rec.Find(slog.LevelInfo, "bootstrap: empty database, loading built-in definitions")), 1; got != want {
			t.Fatalf("bootstrap records = %d, want %d", got, want)
		}
		if got, want := strings.Join(blocksStarted(rec), ","), "4.4.0,4.5.0,4.6.0,4.8.0,4.9.0"; got != want {
			t.Fatalf("blocks run = %s, want %s", got, want)
		}
		if got := rec.AtLeast(slog.LevelWarn); len(got) != 0 {
			t.Fatalf("warnings or errors logged: %+v", got)
		}
	})

	t.Run("second start changes nothing and keeps the INSTANCE_UUID", func(t *testing.T) {
		before := snapshot(t, db)
		rec2 := &testkit.Recorder{}
		run(t, db, options(t, rec2))
		if after := snapshot(t, db); after != before {
			t.Fatalf("second start changed data: %s", diffLines(before, after))
		}
		reg2 := registry(t, db)
		if got, want := reg2[store.RegInstanceUUID], reg[store.RegInstanceUUID]; got != want {
			t.Fatalf("INSTANCE_UUID = %q, want %q", got, want)
		}
		if _, ok := reg2[store.RegLastStartFailed]; ok {
			t.Fatalf("LAST_START_FAILED set by a good start")
		}
		if got := rec2.Find(slog.LevelInfo, "bootstrap: empty database, loading built-in definitions"); len(got) != 0 {
			t.Fatalf("second start bootstrapped again")
		}
		if got := blocksStarted(rec2); len(got) != 0 {
			t.Fatalf("second start ran blocks %v", got)
		}
	})
}

func TestRunBootstrapsDBVersionZero(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	setRegistry(t, db, store.RegDBVersion, "0")
	rec := &testkit.Recorder{}
	run(t, db, options(t, rec))
	if got, want := len(rec.Find(slog.LevelInfo, "bootstrap: empty database, loading built-in definitions")), 1; got != want {
		t.Fatalf("bootstrap records = %d, want %d", got, want)
	}
	reg := registry(t, db)
	if got, want := reg[store.RegDBVersion], testVersion; got != want {
		t.Fatalf("DB_VERSION = %q, want %q", got, want)
	}
	if _, err := uuid.Parse(reg[store.RegInstanceUUID]); err != nil {
		t.Fatalf("INSTANCE_UUID %q: %v", reg[store.RegInstanceUUID], err)
	}
	mustInstance(t, db, "_user", "admin")
	mustPermission(t, db, "p_data_access")
}

func TestRunFailedBootstrapLeavesNothing(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	// The role is loaded after the permissions, schemas and admin, in the same
	// transaction: its failure must take them all back.
	failOn(t, db, "fail_role", "INSERT", "instances", "NEW.keyname = 'role_admin'")
	rec := &testkit.Recorder{}
	o := options(t, rec)
	err := bootstrap.Run(context.Background(), testkit.Migrator(t, db), o)

	t.Run("Run returns the bootstrap error", func(t *testing.T) {
		if err == nil || !strings.HasPrefix(err.Error(), "bootstrap: load 10_user.yml") || !strings.Contains(err.Error(), "injected failure") {
			t.Fatalf("err = %v, want a bootstrap error loading 10_user.yml", err)
		}
		c := rec.AtLeast(bootstrap.LevelCritical)
		if len(c) != 1 || c[0].Attrs["step"] != "bootstrap" {
			t.Fatalf("critical records = %+v, want one for the bootstrap step", c)
		}
	})
	t.Run("registry holds only LAST_START_FAILED", func(t *testing.T) {
		reg := registry(t, db)
		if got, want := strings.Join(sortedKeys(reg), ","), "LAST_START_FAILED"; got != want {
			t.Fatalf("registry keys = %s, want %s", got, want)
		}
	})
	t.Run("nothing of the bootstrap is left", func(t *testing.T) {
		// The table layout adds the code's permissions and classes when the file is
		// opened: they are not the bootstrap's.
		code := "'" + strings.Join(store.CodeClasses(), "','") + "'"
		for _, table := range []string{"permissions", "schemas", "schema_fields", "instances"} {
			want, query := 0, "SELECT count(*) FROM "+table
			switch table {
			case "permissions":
				want = len(store.CodePermissions())
			case "schemas":
				query += " WHERE keyname NOT IN (" + code + ")"
			case "schema_fields":
				query += " WHERE classname NOT IN (" + code + ")"
			}
			if got := count(t, db, query); got != want {
				t.Fatalf("%s rows = %d, want %d", table, got, want)
			}
		}
	})
	t.Run("next start bootstraps once the cause is gone", func(t *testing.T) {
		dropFail(t, db, "fail_role", "instances")
		run(t, db, o)
		mustInstance(t, db, "_role", "role_admin")
		if got, want := dbVersion(t, db), testVersion; got != want {
			t.Fatalf("DB_VERSION = %q, want %q", got, want)
		}
	})
}

// writeFile writes a file under dir, creating its directories.
func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// initDir builds a real init directory: a copy of the built-in files plus files that
// show the order and the filters of the bootstrap: files load in name order, symlinks,
// invalid YAML and empty files are handled without stopping start-up.
func initDir(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "init")
	err := fs.WalkDir(builtin.Init(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(builtin.Init(), p)
		if err != nil {
			return err
		}
		if p == "00_permission.yml" {
			// Defined first here; 000_first.yml (earlier in path order) overrides the
			// displayname only if 00_permission.yml was loaded before it. The schema
			// is not a permission and must be skipped.
			data = append(data, []byte(`- {classname: _permission, keyname: p_order, displayname: from 00_permission.yml, description: defined by 00_permission.yml}
- {classname: _schema, keyname: not_a_permission, displayname: Not a permission}
`)...)
		}
		writeFile(t, dir, p, string(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "000_first.yml", "- {classname: _permission, keyname: p_order, displayname: from 000_first.yml}\n")
	writeFile(t, dir, "15_invalid.yml", "- classname: _permission\n  keyname: p_invalid\n  displayname: [unclosed\n")
	writeFile(t, dir, "16_empty.yml", "")
	writeFile(t, dir, "17_comment.yml", "# nothing here yet\n")
	writeFile(t, dir, "18_bad_entry.yml", "- {classname: no_such_class, keyname: x}\n- {classname: _permission, keyname: p_after_bad, displayname: After a bad entry}\n")
	// a.yml sorts before a/b.yml as a path, though a directory walk visits a/ first.
	writeFile(t, dir, "a.yml", "- {classname: _permission, keyname: p_path_order, displayname: from a.yml}\n")
	writeFile(t, dir, "a/b.yml", "- {classname: _permission, keyname: p_path_order, displayname: from a/b.yml}\n")
	writeFile(t, dir, "notes.yaml", "- {classname: _permission, keyname: p_yaml_ext, displayname: wrong extension}\n")
	writeFile(t, root, "outside/linked.yml", "- {classname: _permission, keyname: p_symlinked, displayname: through a symlink}\n")
	if err := os.Symlink(filepath.Join(root, "outside", "linked.yml"), filepath.Join(dir, "zz_link.yml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "outside"), filepath.Join(dir, "zz_linkdir")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestInitFiles(t *testing.T) {
	t.Parallel()
	builtinFiles := []string{"01_schema.yml", "10_user.yml", "20_home.yml", "30_dataview.yml", "40_pipeline.yml",
		"50_apikey.yml", "60_ipam.yml"}
	tests := []struct {
		name string
		fsys fs.FS
		want []string
	}{
		{"embedded files other than 00_permission.yml in name order", builtin.Init(), builtinFiles},
		{"regular .yml files at any depth in path order, no symlink", os.DirFS(initDir(t)), []string{
			"000_first.yml", "01_schema.yml", "10_user.yml", "15_invalid.yml", "16_empty.yml", "17_comment.yml",
			"18_bad_entry.yml", "20_home.yml", "30_dataview.yml", "40_pipeline.yml", "50_apikey.yml", "60_ipam.yml", "a.yml", "a/b.yml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := bootstrap.InitFiles(tt.fsys)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("InitFiles = %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("missing directory is an error", func(t *testing.T) {
		_, err := bootstrap.InitFiles(os.DirFS(filepath.Join(t.TempDir(), "missing")))
		if err == nil || !strings.Contains(err.Error(), "read init directory") {
			t.Fatalf("err = %v, want a read init directory error", err)
		}
	})
}

func TestRunBootstrapFromDirectory(t *testing.T) {
	t.Parallel()
	dir := initDir(t)
	db := newDB(t)
	rec := &testkit.Recorder{}
	o := options(t, rec)
	o.Init = os.DirFS(dir)
	run(t, db, o)

	t.Run("00_permission.yml is loaded before every other file", func(t *testing.T) {
		p := mustPermission(t, db, "p_order")
		if got, want := p.Displayname, "from 000_first.yml"; got != want {
			t.Fatalf("p_order displayname = %q, want %q", got, want)
		}
		if got, want := p.Description, "defined by 00_permission.yml"; got != want {
			t.Fatalf("p_order description = %q, want %q", got, want)
		}
	})
	t.Run("00_permission.yml loads permissions only", func(t *testing.T) {
		if got, want := count(t, db, "SELECT count(*) FROM schemas WHERE keyname = 'not_a_permission'"), 0; got != want {
			t.Fatalf("schema not_a_permission rows = %d, want %d", got, want)
		}
		w := rec.Find(slog.LevelWarn, "bootstrap: entry is not a permission, skipped")
		if len(w) != 1 || w[0].Attrs["classname"] != "_schema" || w[0].Attrs["file"] != "00_permission.yml" {
			t.Fatalf("warnings = %+v, want one for the _schema entry of 00_permission.yml", w)
		}
	})
	t.Run("nested file loads after a.yml in path order", func(t *testing.T) {
		if got, want := mustPermission(t, db, "p_path_order").Displayname, "from a/b.yml"; got != want {
			t.Fatalf("p_path_order displayname = %q, want %q", got, want)
		}
	})
	t.Run("symlinked and non-.yml files are ignored", func(t *testing.T) {
		for _, p := range []string{"p_symlinked", "p_yaml_ext"} {
			if _, ok := permission(t, db, p); ok {
				t.Fatalf("permission %s was loaded", p)
			}
		}
	})
	t.Run("invalid YAML is logged and skipped, the files after it load", func(t *testing.T) {
		if _, ok := permission(t, db, "p_invalid"); ok {
			t.Fatalf("permission p_invalid was loaded")
		}
		errs := rec.Find(slog.LevelError, "bootstrap: invalid built-in file skipped")
		if len(errs) != 1 || errs[0].Attrs["file"] != "15_invalid.yml" {
			t.Fatalf("records = %+v, want exactly one for 15_invalid.yml", errs)
		}
		mustInstance(t, db, "_home", "code_editor")   // 20_home.yml
		mustInstance(t, db, "_apikey", "api_builtin") // 50_apikey.yml
		mustInstance(t, db, "_pipeline", "bulk_delete_disabled")
	})
	t.Run("failed entry is logged and the rest of its file loads", func(t *testing.T) {
		errs := rec.Find(slog.LevelError, "bootstrap: built-in entry failed")
		if len(errs) != 1 || errs[0].Attrs["file"] != "18_bad_entry.yml" || !strings.Contains(errs[0].Attrs["entry"], "no_such_class") {
			t.Fatalf("records = %+v, want exactly one for the no_such_class entry", errs)
		}
		mustPermission(t, db, "p_after_bad")
		if got, want := len(rec.AtLeast(slog.LevelError)), 2; got != want {
			t.Fatalf("error records = %d, want %d (invalid file, failed entry)", got, want)
		}
	})
	t.Run("empty and comment-only files are skipped silently", func(t *testing.T) {
		for _, e := range rec.All() {
			if f := e.Attrs["file"]; f == "16_empty.yml" || f == "17_comment.yml" {
				t.Fatalf("record about %s: %+v", f, e)
			}
		}
	})
	t.Run("database is complete and at the code version", func(t *testing.T) {
		if got, want := dbVersion(t, db), testVersion; got != want {
			t.Fatalf("DB_VERSION = %q, want %q", got, want)
		}
		// 21 built-in permissions + p_order + p_path_order + p_after_bad + those the code
		// synchronises at each start.
		if got, want := count(t, db, "SELECT count(*) FROM permissions WHERE is_builtin = 1"), 24+len(store.CodePermissions()); got != want {
			t.Fatalf("built-in permissions = %d, want %d", got, want)
		}
	})
}
