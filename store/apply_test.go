package store_test

import (
	"context"
	"testing"

	"dataservice/store"
	"dataservice/store/model"
)

// TestApply drives the apply path the console uses: one instance at a time, each in
// its own transaction, with the user's authorisation.
func TestApply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newTestDB(t)
	mustLoad(t, db, serverSchema+`
- {classname: site, keyname: berlin}
- {classname: server, keyname: web, site: berlin, port: 80}
`, store.LoadOptions{})
	sch, err := db.Schema(ctx, "server")
	if err != nil {
		t.Fatal(err)
	}
	admin := userAuth("p_data_admin", "p_keyname_rename")
	apply := func(t *testing.T, w store.Write, opts store.ApplyOptions) (store.Outcome, error) {
		t.Helper()
		w.Schema = sch
		return db.Apply(ctx, w, opts)
	}

	t.Run("create validates, normalizes and writes", func(t *testing.T) {
		out, err := apply(t, store.Write{Action: model.ActionCreate,
			New: &store.Instance{Keyname: "db", IsEnabled: true, Data: map[string]any{"port": "5432", "site": "berlin"}}},
			store.ApplyOptions{Auth: admin})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := out.Result, store.OutCreated; got != want {
			t.Fatalf("outcome: got %s, want %s", got, want)
		}
		if got, want := fmtValue(instance(t, db, "server", "db").Data["port"]), "int64(5432)"; got != want {
			t.Fatalf("port: got %s, want %s", got, want)
		}
		if got, want := queryString(t, db, "SELECT author FROM revisions WHERE classname = 'server' AND keyname = 'db'"), "user:tester"; got != want {
			t.Fatalf("revision author: got %s, want %s", got, want)
		}
	})
	t.Run("invalid value is refused and writes nothing", func(t *testing.T) {
		_, err := apply(t, store.Write{Action: model.ActionCreate,
			New: &store.Instance{Keyname: "bad", Data: map[string]any{"port": "99999"}}}, store.ApplyOptions{Auth: admin})
		if store.ErrorCode(err) != model.EInvalid {
			t.Fatalf("got %v, want invalid", err)
		}
		absent(t, db, "server", "bad")
	})
	t.Run("edit without update permission is forbidden", func(t *testing.T) {
		old := instance(t, db, "server", "web")
		next := *old
		next.Data = map[string]any{"port": int64(81), "site": "berlin"}
		_, err := apply(t, store.Write{Old: old, New: &next, Action: model.ActionUpdate}, store.ApplyOptions{Auth: userAuth("p_data_create")})
		if store.ErrorCode(err) != model.EForbidden {
			t.Fatalf("got %v, want forbidden", err)
		}
		if got, want := fmtValue(instance(t, db, "server", "web").Data["port"]), "int64(80)"; got != want {
			t.Fatalf("port: got %s, want %s", got, want)
		}
	})
	t.Run("unchanged edit writes no revision", func(t *testing.T) {
		before := queryInt(t, db, "SELECT count(*) FROM revisions")
		old := instance(t, db, "server", "web")
		next := *old
		out, err := apply(t, store.Write{Old: old, New: &next, Action: model.ActionUpdate}, store.ApplyOptions{Auth: admin})
		if err != nil || out.Result != store.OutUnchanged {
			t.Fatalf("got %+v, %v; want unchanged", out, err)
		}
		if got := queryInt(t, db, "SELECT count(*) FROM revisions"); got != before {
			t.Fatalf("revisions: got %d, want %d", got, before)
		}
	})
	t.Run("dry-run rename writes nothing", func(t *testing.T) {
		old := instance(t, db, "server", "web")
		next := *old
		next.Keyname = "www"
		out, err := apply(t, store.Write{Old: old, New: &next, Action: model.ActionUpdate}, store.ApplyOptions{Auth: admin, DryRun: true})
		if err != nil || out.Result != store.OutUpdated || !out.Renamed {
			t.Fatalf("got %+v, %v; want updated and renamed", out, err)
		}
		absent(t, db, "server", "www")
	})
	t.Run("rename needs p_keyname_rename", func(t *testing.T) {
		old := instance(t, db, "server", "web")
		next := *old
		next.Keyname = "www"
		_, err := apply(t, store.Write{Old: old, New: &next, Action: model.ActionUpdate}, store.ApplyOptions{Auth: userAuth("p_data_admin")})
		if store.ErrorCode(err) != model.EForbidden {
			t.Fatalf("got %v, want forbidden", err)
		}
		absent(t, db, "server", "www")
	})
	t.Run("disable then delete", func(t *testing.T) {
		out, err := apply(t, store.Write{Old: instance(t, db, "server", "web"), Action: model.ActionDisable}, store.ApplyOptions{Auth: admin})
		if err != nil || out.Result != store.OutDisabled {
			t.Fatalf("disable: got %+v, %v", out, err)
		}
		if instance(t, db, "server", "web").IsEnabled {
			t.Fatal("web is still enabled")
		}
		out, err = apply(t, store.Write{Old: instance(t, db, "server", "web"), Action: model.ActionDelete}, store.ApplyOptions{Auth: admin})
		if err != nil || out.Result != store.OutDeleted {
			t.Fatalf("delete: got %+v, %v", out, err)
		}
		absent(t, db, "server", "web")
	})
}

// A caller may build the new state from scratch (its ID left zero, as a form post
// does): the rename still renames the stored instance, found by the old state's ID,
// and rewrites the references to it.
func TestApplyRenameWithoutNewID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newTestDB(t)
	mustLoad(t, db, serverSchema+`
- {classname: site, keyname: berlin, city: Berlin}
- {classname: site, keyname: paris, city: Paris}
- {classname: server, keyname: web, site: berlin}
- {classname: server, keyname: db, site: paris}
`, store.LoadOptions{})
	sch, err := db.Schema(ctx, "site")
	if err != nil {
		t.Fatal(err)
	}
	admin := userAuth("p_data_admin", "p_keyname_rename")
	for _, tc := range []struct {
		name, from, to, city string
	}{
		{"keyname only", "berlin", "bln", "Berlin"},
		{"keyname and a value", "paris", "par", "Paris, France"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := instance(t, db, "site", tc.from)
			next := &store.Instance{Keyname: tc.to, IsEnabled: true, Data: map[string]any{"city": tc.city}}
			out, err := db.Apply(ctx, store.Write{Schema: sch, Old: old, New: next, Action: model.ActionUpdate},
				store.ApplyOptions{Auth: admin})
			if err != nil || out.Result != store.OutUpdated || !out.Renamed {
				t.Fatalf("got %+v, %v; want updated and renamed", out, err)
			}
			absent(t, db, "site", tc.from)
			got := instance(t, db, "site", tc.to)
			if got.ID != old.ID {
				t.Fatalf("renamed instance has id %d, want %d", got.ID, old.ID)
			}
			if got, want := got.Data["city"], tc.city; got != want {
				t.Fatalf("city: got %v, want %s", got, want)
			}
			if got, want := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'site'"), 2; got != want {
				t.Fatalf("sites: got %d, want %d", got, want)
			}
			if got, want := queryInt(t, db, "SELECT count(*) FROM instances WHERE classname = 'server' AND data ->> 'site' = ?", tc.to), 1; got != want {
				t.Fatalf("servers referencing %s: got %d, want %d", tc.to, got, want)
			}
		})
	}
}

// TestApplyUnchangedByStoredText: an update whose encoding equals the stored text is
// unchanged and writes nothing, even where the decoded value compares unequal to the
// new one (a float -0 is stored as -0 and reads back as the integer 0).
func TestApplyUnchangedByStoredText(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newTestDB(t)
	mustLoad(t, db, `
- {classname: _schema, keyname: reading, value: {dataformat: float}}
- {classname: reading, keyname: r1, value: "-0.0"}
`, store.LoadOptions{})
	sch, err := db.Schema(ctx, "reading")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := queryString(t, db, "SELECT data FROM instances WHERE classname = 'reading'"), `{"value":-0}`; got != want {
		t.Fatalf("stored %s, want %s", got, want)
	}
	revisions := queryInt(t, db, "SELECT count(*) FROM revisions")
	old := instance(t, db, "reading", "r1")
	next := *old
	next.Data = map[string]any{"value": "-0"}
	out, err := db.Apply(ctx, store.Write{Schema: sch, Old: old, New: &next, Action: model.ActionUpdate},
		store.ApplyOptions{Auth: userAuth("p_data_admin")})
	if err != nil || out.Result != store.OutUnchanged {
		t.Fatalf("got %+v, %v; want unchanged", out, err)
	}
	if got := queryInt(t, db, "SELECT count(*) FROM revisions"); got != revisions {
		t.Fatalf("revisions: %d, want %d (nothing written)", got, revisions)
	}
}
