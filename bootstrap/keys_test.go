package bootstrap_test

import (
	"log/slog"
	"strings"
	"testing"

	"dataservice/bootstrap"
	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
)

func TestRunSeedsAPIKeySecret(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	rec := &testkit.Recorder{}
	o := options(t, rec)
	secret := func() string { return field(mustInstance(t, db, "_apikey", "api_builtin"), "secret") }
	var first string

	t.Run("empty secret is set to a hash of APIKeySecret", func(t *testing.T) {
		o.APIKeySecret = "first-secret"
		run(t, db, o)
		first = secret()
		if first == "" || strings.Contains(first, "first-secret") || !model.IsSecretHash(first) {
			t.Fatalf("stored secret %q is not a hash of the setting", first)
		}
		if !model.VerifySecret("first-secret", first) {
			t.Fatalf("stored hash does not verify the setting")
		}
		if model.VerifySecret("second-secret", first) {
			t.Fatalf("stored hash verifies another secret")
		}
		if got, want := len(rec.Find(slog.LevelInfo, "built-in API key secret seeded")), 1; got != want {
			t.Fatalf("seeded records = %d, want %d", got, want)
		}
	})
	t.Run("existing secret is kept when APIKeySecret changes", func(t *testing.T) {
		o.APIKeySecret = "second-secret"
		before := snapshot(t, db)
		run(t, db, o)
		if got, want := secret(), first; got != want {
			t.Fatalf("secret = %q, want the first hash %q", got, want)
		}
		if after := snapshot(t, db); after != before {
			t.Fatalf("start changed data: %s", diffLines(before, after))
		}
	})
	t.Run("empty APIKeySecret changes nothing", func(t *testing.T) {
		o.APIKeySecret = ""
		before := snapshot(t, db)
		run(t, db, o)
		if got, want := secret(), first; got != want {
			t.Fatalf("secret = %q, want %q", got, want)
		}
		if after := snapshot(t, db); after != before {
			t.Fatalf("start changed data: %s", diffLines(before, after))
		}
	})
	t.Run("missing key is skipped with a warning", func(t *testing.T) {
		execSQL(t, db, "DELETE FROM instances WHERE classname = '_apikey' AND keyname = 'api_builtin'")
		rec.Reset()
		o.APIKeySecret = "third-secret"
		run(t, db, o)
		if got, want := len(rec.Find(slog.LevelWarn, "built-in API key api_builtin not found: secret not seeded")), 1; got != want {
			t.Fatalf("warnings = %d, want %d", got, want)
		}
		if in := instance(t, db, "_apikey", "api_builtin"); in != nil {
			t.Fatalf("api_builtin was recreated: %+v", in)
		}
	})
	t.Run("no revision is written", func(t *testing.T) {
		if got, want := count(t, db, "SELECT count(*) FROM revisions"), 0; got != want {
			t.Fatalf("revisions = %d, want %d", got, want)
		}
	})
}

func TestRunForcesAdminPassword(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	rec := &testkit.Recorder{}
	o := options(t, rec)
	admin := func() *store.Instance { return mustInstance(t, db, "_user", "admin") }
	var hash string

	t.Run("absent password is set and the account activated", func(t *testing.T) {
		o.AdminPassword = "pw-one"
		run(t, db, o)
		a := admin()
		hash = field(a, "password")
		if !model.VerifySecret("pw-one", hash) || strings.Contains(hash, "pw-one") {
			t.Fatalf("stored password %q is not a hash of the setting", hash)
		}
		if !a.IsEnabled {
			t.Fatalf("admin is_enabled = false, want true")
		}
		if got, want := len(rec.Find(slog.LevelInfo, "admin account activated")), 1; got != want {
			t.Fatalf("activation records = %d, want %d", got, want)
		}
	})
	t.Run("password that verifies is left as stored", func(t *testing.T) {
		before := admin()
		rec.Reset()
		run(t, db, o)
		after := admin()
		if got, want := field(after, "password"), hash; got != want {
			t.Fatalf("password hash = %q, want unchanged %q", got, want)
		}
		if got, want := after.UpdatedAt, before.UpdatedAt; got != want {
			t.Fatalf("updated_at = %s, want unchanged %s", got, want)
		}
		if got := rec.Find(slog.LevelInfo, "admin password set from SERVICE_ADMIN_PASSWORD"); len(got) != 0 {
			t.Fatalf("password set again: %+v", got)
		}
	})
	t.Run("password that differs is replaced", func(t *testing.T) {
		o.AdminPassword = "pw-two"
		run(t, db, o)
		a := admin()
		next := field(a, "password")
		if next == hash {
			t.Fatalf("password hash unchanged")
		}
		if !model.VerifySecret("pw-two", next) || model.VerifySecret("pw-one", next) {
			t.Fatalf("new hash does not verify pw-two only")
		}
		if !a.IsEnabled {
			t.Fatalf("admin is_enabled = false, want true")
		}
		hash = next
	})
	t.Run("inactive account is activated and its password kept", func(t *testing.T) {
		execSQL(t, db, "UPDATE instances SET is_enabled = 0 WHERE classname = '_user' AND keyname = 'admin'")
		run(t, db, o)
		a := admin()
		if !a.IsEnabled {
			t.Fatalf("admin is_enabled = false, want true")
		}
		if got, want := field(a, "password"), hash; got != want {
			t.Fatalf("password hash = %q, want unchanged %q", got, want)
		}
	})
	t.Run("active account is locked when AdminPassword is empty", func(t *testing.T) {
		o.AdminPassword = ""
		rec.Reset()
		run(t, db, o)
		a := admin()
		if a.IsEnabled {
			t.Fatalf("admin is_enabled = true, want false")
		}
		if got, want := field(a, "password"), hash; got != want {
			t.Fatalf("password hash = %q, want unchanged %q", got, want)
		}
		if got, want := len(rec.Find(slog.LevelWarn, "SERVICE_ADMIN_PASSWORD not set: admin account locked")), 1; got != want {
			t.Fatalf("lock warnings = %d, want %d", got, want)
		}
	})
	t.Run("locked account is left untouched", func(t *testing.T) {
		before := snapshot(t, db)
		run(t, db, o)
		if after := snapshot(t, db); after != before {
			t.Fatalf("start changed data: %s", diffLines(before, after))
		}
	})
	t.Run("missing account is skipped without error", func(t *testing.T) {
		execSQL(t, db, "DELETE FROM instances WHERE classname = '_user' AND keyname = 'admin'")
		rec.Reset()
		o.AdminPassword = "pw-three"
		run(t, db, o)
		if in := instance(t, db, "_user", "admin"); in != nil {
			t.Fatalf("admin was recreated: %+v", in)
		}
		if got, want := len(rec.Find(slog.LevelInfo, "no admin account: password step skipped")), 1; got != want {
			t.Fatalf("skip records = %d, want %d", got, want)
		}
	})
	t.Run("no revision is written", func(t *testing.T) {
		if got, want := count(t, db, "SELECT count(*) FROM revisions"), 0; got != want {
			t.Fatalf("revisions = %d, want %d", got, want)
		}
	})
}

// The keys-and-admin step and the 4.6.0 rewrite write through the apply path in its
// system mode: only what they change is validated (a value of another field that the
// schema now refuses does not stop the start), and no revision is written.
func TestStartupWritesGoThroughTheApplyPath(t *testing.T) {
	t.Parallel()
	db, rec := migratedDB(t)
	o := options(t, rec)
	// A field added to _user and _pipeline after the values were stored: the stored
	// "many" is not an int.
	testkit.MustLoad(t, db, `
- {classname: _schema, keyname: _user, shoe_size: {dataformat: int}}
- {classname: _schema, keyname: _pipeline, shoe_size: {dataformat: int}}
`, store.LoadOptions{System: true, NoRevisions: true})
	_, rows := testkit.Rows(t, db, "SELECT classname, keyname FROM instances WHERE classname IN ('_user', '_pipeline')")
	for _, r := range rows {
		setData(t, db, r[0].(string), r[1].(string), map[string]any{"shoe_size": "many"})
	}
	setData(t, db, "_pipeline", "bulk_delete_disabled", map[string]any{"content": "tasks:\n  - field_lower: email\n"})
	revs := count(t, db, "SELECT count(*) FROM revisions")
	o.AdminPassword = "pw-apply"
	o.Version = "4.6.0-RC1"
	if err := bootstrap.Run(t.Context(), testkit.Migrator(t, db), o); err != nil {
		t.Fatalf("Run: %v", err)
	}
	a := mustInstance(t, db, "_user", "admin")
	if !a.IsEnabled || !model.VerifySecret("pw-apply", field(a, "password")) {
		t.Fatalf("admin: enabled %v, password set %v", a.IsEnabled, model.VerifySecret("pw-apply", field(a, "password")))
	}
	if got, want := field(a, "shoe_size"), "many"; got != want {
		t.Fatalf("admin shoe_size = %q, want the stored %q kept", got, want)
	}
	p := mustInstance(t, db, "_pipeline", "bulk_delete_disabled")
	if got, want := field(p, "content"), "- field_lower: email\n"; got != want {
		t.Fatalf("pipeline content = %q, want the flat list %q", got, want)
	}
	if got, want := count(t, db, "SELECT count(*) FROM revisions"), revs; got != want {
		t.Fatalf("revisions = %d, want %d", got, want)
	}
}
