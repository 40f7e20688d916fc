package store_test

import (
	"context"
	"encoding/json"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
	"dataservice/store/model"
)

// A start-up write goes through the apply path in its system mode: validated, as the
// system identity, and without a revision row even in a transaction that records them.
func TestMigrationApplyWritesNoRevision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newTestDB(t)
	mustLoad(t, db, serverSchema+"\n---\n"+`{classname: _schema, keyname: nic, ip: {dataformat: ipv4}}`, store.LoadOptions{})
	mustLoad(t, db, `{classname: server, keyname: s1, hostname: h1}`, store.LoadOptions{})
	revs := func() int { return queryInt(t, db, "SELECT count(*) FROM revisions") }
	update := func(tx *store.Tx, host string) store.Write {
		t.Helper()
		s, err := tx.Schema(ctx, "server")
		if err != nil {
			t.Fatal(err)
		}
		old, err := tx.Instance(ctx, "server", "s1")
		if err != nil {
			t.Fatal(err)
		}
		next := *old
		next.Data = map[string]any{"hostname": host}
		return store.Write{Schema: s, Old: old, New: &next, Action: model.ActionUpdate}
	}

	t.Run("in a transaction that records revisions, the migration write records none", func(t *testing.T) {
		before := revs()
		err := db.WithTxAs(ctx, store.Revisions{Author: "user:ops"}, func(tx *store.Tx) error {
			if _, err := tx.Apply(ctx, update(tx, "h2"), store.ApplyOptions{Auth: model.SystemAuth(), System: true, Migration: true}); err != nil {
				return err
			}
			// The same transaction's ordinary writes keep their revisions.
			_, err := tx.Apply(ctx, update(tx, "h3"), store.ApplyOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := revs(), before+1; got != want {
			t.Fatalf("revisions = %d, want %d (only the ordinary write's)", got, want)
		}
		var after struct{ Data struct{ Hostname string } }
		if err := json.Unmarshal([]byte(queryString(t, db, "SELECT after FROM revisions ORDER BY id DESC LIMIT 1")), &after); err != nil {
			t.Fatal(err)
		}
		if got, want := after.Data.Hostname, "h3"; got != want {
			t.Fatalf("last revision's hostname = %s, want %s", got, want)
		}
	})

	t.Run("a Migration transaction applies through the apply path, validated, without revision", func(t *testing.T) {
		before := revs()
		var invalid error
		err := testkit.Migrator(t, db).Migrate(ctx, func(m *store.Migration) error {
			w := update(m.Tx(), "h4")
			if _, err := m.Apply(ctx, w); err != nil {
				return err
			}
			s, err := m.Schema(ctx, "nic")
			if err != nil {
				return err
			}
			// Validated like any write: a bad address is refused, nothing written.
			_, invalid = m.Apply(ctx, store.Write{Schema: s, Action: model.ActionCreate,
				New: &store.Instance{Classname: "nic", Keyname: "n0", IsEnabled: true, Data: map[string]any{"ip": "10.0.0.300"}}})
			// A created instance's address is collected, without revision either.
			_, err = m.Apply(ctx, store.Write{Schema: s, Action: model.ActionCreate,
				New: &store.Instance{Classname: "nic", Keyname: "n1", IsEnabled: true, Data: map[string]any{"ip": "10.8.0.1"}}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := store.ErrorCode(invalid), model.EInvalid; got != want {
			t.Fatalf("invalid address: error code %q (%v), want %q", got, invalid, want)
		}
		absent(t, db, "nic", "n0")
		if got, want := fmtValue(instance(t, db, "server", "s1").Data["hostname"]), "string(h4)"; got != want {
			t.Fatalf("hostname = %s, want %s", got, want)
		}
		instance(t, db, "ipam_ip", "0a080001")
		if got, want := revs(), before; got != want {
			t.Fatalf("revisions = %d, want %d", got, want)
		}
	})

	t.Run("the migration mode needs the system identity", func(t *testing.T) {
		before := revs()
		for _, opts := range []store.ApplyOptions{
			{Migration: true},
			{Auth: userAuth(model.PermDataAdmin), System: true, Migration: true},
		} {
			err := db.WithTx(ctx, func(tx *store.Tx) error {
				_, err := tx.Apply(ctx, update(tx, "h5"), opts)
				return err
			})
			if got, want := store.ErrorCode(err), model.EForbidden; got != want {
				t.Fatalf("%+v: error code %q (%v), want %q", opts, got, err, want)
			}
		}
		if got, want := fmtValue(instance(t, db, "server", "s1").Data["hostname"]), "string(h4)"; got != want {
			t.Fatalf("hostname = %s, want %s", got, want)
		}
		if got := revs(); got != before {
			t.Fatalf("revisions = %d, want %d", got, before)
		}
	})
}
