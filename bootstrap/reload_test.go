package bootstrap_test

import (
	"context"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"testing"

	"dataservice/bootstrap"
	"dataservice/builtin"
	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
)

// reload runs bootstrap.Reload in one committed transaction and returns its error.
func reload(t *testing.T, db *store.DB, rec *testkit.Recorder, file string, items []string, action model.Action) error {
	t.Helper()
	return reloadFS(t, db, rec, builtin.Init(), file, items, action)
}

// reloadFS is reload from another init directory.
func reloadFS(t *testing.T, db *store.DB, rec *testkit.Recorder, fsys fs.FS, file string, items []string, action model.Action) error {
	ctx := context.Background()
	t.Helper()
	var rerr error
	err := db.WithTx(context.Background(), func(tx *store.Tx) error {
		rerr = bootstrap.Reload(ctx, tx, fsys, file, items, action, rec.Logger(t))
		return nil
	})
	if err != nil {
		t.Fatalf("transaction: %v", err)
	}
	return rerr
}

func TestReload(t *testing.T) {
	t.Parallel()
	t.Run("item missing from the file is an error, the found ones load", func(t *testing.T) {
		db, rec := migratedDB(t)
		execSQL(t, db, "DELETE FROM instances WHERE classname = '_home' AND keyname IN ('code_editor', 'ipam')")
		err := reload(t, db, rec, "20_home.yml", []string{"_home:code_editor", "_home:nope"}, "")
		if err == nil || !strings.Contains(err.Error(), "_home:nope not found") {
			t.Fatalf("err = %v, want one naming _home:nope", err)
		}
		if strings.Contains(err.Error(), "code_editor") {
			t.Fatalf("err = %v names the item that was found", err)
		}
		logged := rec.Find(slog.LevelError, "reload: entry not found in built-in file")
		if len(logged) != 1 || logged[0].Attrs["entry"] != "_home:nope" || logged[0].Attrs["file"] != "20_home.yml" {
			t.Fatalf("records = %+v, want one for _home:nope in 20_home.yml", logged)
		}
		if got, want := field(mustInstance(t, db, "_home", "code_editor"), "url"), "/data/private/code_editor/"; got != want {
			t.Fatalf("code_editor url = %q, want %q", got, want)
		}
		if in := instance(t, db, "_home", "ipam"); in != nil {
			t.Fatalf("_home ipam was loaded though not named")
		}
	})
	t.Run("star loads every entry of the file", func(t *testing.T) {
		db, rec := migratedDB(t)
		execSQL(t, db, "DELETE FROM instances WHERE classname = '_home'",
			"DELETE FROM instances WHERE classname = '_dataview' AND keyname = 'user_default'")
		if err := reload(t, db, rec, "20_home.yml", []string{"*"}, ""); err != nil {
			t.Fatal(err)
		}
		if got, want := count(t, db, "SELECT count(*) FROM instances WHERE classname = '_home'"), 4; got != want {
			t.Fatalf("_home entries = %d, want %d", got, want)
		}
		if in := instance(t, db, "_dataview", "user_default"); in != nil {
			t.Fatalf("an entry of another file was loaded")
		}
		if got := rec.AtLeast(slog.LevelWarn); len(got) != 0 {
			t.Fatalf("warnings or errors: %+v", got)
		}
	})
	t.Run("update of a missing object is reported and creates nothing", func(t *testing.T) {
		db, rec := migratedDB(t)
		execSQL(t, db, "DELETE FROM instances WHERE classname = '_home' AND keyname = 'revision'")
		setData(t, db, "_home", "code_editor", map[string]any{"url": "/old/"})
		err := reload(t, db, rec, "20_home.yml", []string{"_home:revision", "_home:code_editor"}, "update")
		if err == nil || !strings.Contains(err.Error(), "_home:revision") {
			t.Fatalf("err = %v, want one naming _home:revision", err)
		}
		if in := instance(t, db, "_home", "revision"); in != nil {
			t.Fatalf("update created _home revision")
		}
		if got, want := field(mustInstance(t, db, "_home", "code_editor"), "url"), "/data/private/code_editor/"; got != want {
			t.Fatalf("code_editor url = %q, want %q", got, want)
		}
		logged := rec.Find(slog.LevelError, "reload: entry failed")
		if len(logged) != 1 || logged[0].Attrs["entry"] != "_home:revision" {
			t.Fatalf("records = %+v, want one for _home:revision", logged)
		}
	})
	t.Run("create of an existing object merges the file values", func(t *testing.T) {
		db, rec := migratedDB(t)
		setData(t, db, "_home", "ipam", map[string]any{"url": "/old/", "extra": "kept"})
		if err := reload(t, db, rec, "20_home.yml", []string{"_home:ipam"}, "create"); err != nil {
			t.Fatal(err)
		}
		in := mustInstance(t, db, "_home", "ipam")
		if got, want := field(in, "url"), "/data/private/ipam/"; got != want {
			t.Fatalf("url = %q, want %q", got, want)
		}
		if got, want := field(in, "extra"), "kept"; got != want {
			t.Fatalf("extra = %q, want %q", got, want)
		}
	})
	t.Run("reload writes no revision", func(t *testing.T) {
		db, rec := migratedDB(t)
		execSQL(t, db, "DELETE FROM permissions WHERE keyname = 'p_api_conf'",
			"DELETE FROM instances WHERE classname = '_home' AND keyname = 'revision'")
		if err := reload(t, db, rec, "00_permission.yml", []string{"_permission:p_api_conf"}, ""); err != nil {
			t.Fatal(err)
		}
		if err := reload(t, db, rec, "20_home.yml", []string{"_home:revision"}, ""); err != nil {
			t.Fatal(err)
		}
		mustPermission(t, db, "p_api_conf")
		mustInstance(t, db, "_home", "revision")
		if got, want := count(t, db, "SELECT count(*) FROM revisions"), 0; got != want {
			t.Fatalf("revisions = %d, want %d", got, want)
		}
	})
	t.Run("bad action, missing file and invalid file are errors", func(t *testing.T) {
		db, rec := migratedDB(t)
		before := snapshot(t, db)
		dir := t.TempDir()
		writeFile(t, dir, "20_home.yml", "- classname: _home\n  keyname: [unclosed\n")
		for _, c := range []struct {
			fsys               fs.FS
			file, action, want string
		}{
			{builtin.Init(), "20_home.yml", "delete", `action "delete" is not create or update`},
			{builtin.Init(), "99_missing.yml", "", "reload 99_missing.yml"},
			{os.DirFS(dir), "20_home.yml", "", "reload 20_home.yml: 20_home.yml: invalid YAML/JSON"},
		} {
			err := reloadFS(t, db, rec, c.fsys, c.file, []string{"*"}, model.Action(c.action))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Reload(%s, %q) err = %v, want %q", c.file, c.action, err, c.want)
			}
		}
		if after := snapshot(t, db); after != before {
			t.Fatalf("failed reloads changed data: %s", diffLines(before, after))
		}
	})
}
