package store_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"dataservice/store"
	"dataservice/store/model"
)

func syncConfig(tb testing.TB, db *store.DB) {
	ctx := context.Background()
	tb.Helper()
	if err := db.WithTx(context.Background(), func(tx *store.Tx) error { return tx.SyncConfig(ctx) }); err != nil {
		tb.Fatalf("sync configuration: %v", err)
	}
}

// configText renders the stored configuration as keyname=value lines.
func configText(tb testing.TB, db *store.DB) string {
	tb.Helper()
	entries, err := db.Config(context.Background())
	if err != nil {
		tb.Fatalf("read configuration: %v", err)
	}
	var lines []string
	for _, e := range entries {
		lines = append(lines, fmt.Sprintf("%s=%s (default %s)", e.Keyname, e.Value, e.DefaultValue))
	}
	return strings.Join(lines, "\n")
}

func TestSyncConfig(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	syncConfig(t, db)
	want := strings.Join([]string{
		"BACKUP_INTERVAL_HOURS=0 (default 0)",
		"BACKUP_KEEP=7 (default 7)",
		"CONSOLE_SESSION_IDLE_MINUTES=60 (default 60)",
		"CONSOLE_SESSION_MAX_HOURS=12 (default 12)",
		"CSV_DELIMITER=; (default ;)",
		"DATA_DEFAULT_SIZE=200 (default 200)",
		"DATA_MAX_SIZE=500 (default 500)",
		"GLOBAL_APPNAME=dataservice (default dataservice)",
		"QUEUE_MAX=1000 (default 1000)",
		"QUEUE_MAX_PER_OWNER=100 (default 100)",
		"REVISION_RETENTION_DAYS=0 (default 0)",
		"TASK_RETENTION_DAYS=30 (default 30)",
		"WEBHOOK_ALLOW_PRIVATE= (default )",
		"WEBHOOK_MAX_ATTEMPTS=8 (default 8)",
		"WEBHOOK_TIMEOUT_SECONDS=10 (default 10)",
	}, "\n")
	if got := configText(t, db); got != want {
		t.Fatalf("configuration after the first sync:\n%s\nwant:\n%s", got, want)
	}
	if got, listed := len(store.ConfigDefs), strings.Count(want, "\n")+1; got != listed {
		t.Fatalf("ConfigDefs: got %d entries, the list above has %d", got, listed)
	}

	exec(t, db, "UPDATE configuration SET value = '700', default_value = 'stale', description = '' WHERE keyname = 'DATA_MAX_SIZE'")
	exec(t, db, "DELETE FROM configuration WHERE keyname = 'QUEUE_MAX'")
	exec(t, db, "INSERT INTO configuration(keyname, value, default_value, description) VALUES('OBSOLETE_KEY', 'x', 'x', 'gone')")
	syncConfig(t, db)

	t.Run("keeps a stored value and refreshes its default", func(t *testing.T) {
		if got, want := queryString(t, db, "SELECT value || '|' || default_value FROM configuration WHERE keyname = 'DATA_MAX_SIZE'"), "700|500"; got != want {
			t.Fatalf("DATA_MAX_SIZE: got %s, want %s", got, want)
		}
		if got := queryString(t, db, "SELECT description FROM configuration WHERE keyname = 'DATA_MAX_SIZE'"); got == "" {
			t.Fatal("DATA_MAX_SIZE description not restored")
		}
		if got, want := db.ConfigInt(context.Background(), "DATA_MAX_SIZE"), 700; got != want {
			t.Fatalf("ConfigInt: got %d, want %d", got, want)
		}
	})
	t.Run("adds a missing entry with its default", func(t *testing.T) {
		if got, want := queryString(t, db, "SELECT value FROM configuration WHERE keyname = 'QUEUE_MAX'"), "1000"; got != want {
			t.Fatalf("QUEUE_MAX: got %s, want %s", got, want)
		}
	})
	t.Run("removes an entry the code does not define", func(t *testing.T) {
		if got, want := queryInt(t, db, "SELECT count(*) FROM configuration WHERE keyname = 'OBSOLETE_KEY'"), 0; got != want {
			t.Fatalf("OBSOLETE_KEY rows: got %d, want %d", got, want)
		}
		if got, want := queryInt(t, db, "SELECT count(*) FROM configuration"), len(store.ConfigDefs); got != want {
			t.Fatalf("configuration rows: got %d, want %d", got, want)
		}
	})
}

func TestConfigValueFallsBackToDefault(t *testing.T) {
	t.Parallel()
	db := newTestDB(t)
	ctx := context.Background()
	if got, want := db.ConfigValue(ctx, "CSV_DELIMITER"), ";"; got != want {
		t.Fatalf("unsynced CSV_DELIMITER: got %q, want %q", got, want)
	}
	syncConfig(t, db)
	exec(t, db, "UPDATE configuration SET value = 'many' WHERE keyname = 'QUEUE_MAX'")
	if got, want := db.ConfigInt(ctx, "QUEUE_MAX"), 1000; got != want {
		t.Fatalf("unreadable QUEUE_MAX: got %d, want the default %d", got, want)
	}
}

func TestSetConfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("valid values are stored", func(t *testing.T) {
		db := newTestDB(t)
		syncConfig(t, db)
		if err := db.SetConfig(ctx, map[string]string{"DATA_MAX_SIZE": "750", "CSV_DELIMITER": ",", "GLOBAL_APPNAME": "inventory"}); err != nil {
			t.Fatalf("SetConfig: %v", err)
		}
		for key, want := range map[string]string{"DATA_MAX_SIZE": "750", "CSV_DELIMITER": ",", "GLOBAL_APPNAME": "inventory"} {
			if got := db.ConfigValue(ctx, key); got != want {
				t.Fatalf("%s: got %q, want %q", key, got, want)
			}
		}
	})
	tests := []struct {
		name    string
		updates map[string]string
		want    string // part of the error message
	}{
		{"unknown key", map[string]string{"NO_SUCH_KEY": "1"}, "unknown configuration key"},
		{"non-integer", map[string]string{"DATA_MAX_SIZE": "lots"}, "not an integer"},
		{"decimal", map[string]string{"DATA_MAX_SIZE": "1.5"}, "not an integer"},
		{"below range", map[string]string{"TASK_RETENTION_DAYS": "0"}, "outside"},
		{"above range", map[string]string{"DATA_MAX_SIZE": "100001"}, "outside"},
		{"negative", map[string]string{"QUEUE_MAX": "-1"}, "outside"},
		{"negative retention", map[string]string{"REVISION_RETENTION_DAYS": "-1"}, "outside"},
		{"two-character delimiter", map[string]string{"CSV_DELIMITER": ";;"}, "CSV_DELIMITER"},
		{"empty delimiter", map[string]string{"CSV_DELIMITER": ""}, "CSV_DELIMITER"},
		{"one bad value among good ones", map[string]string{"GLOBAL_APPNAME": "x", "DATA_MAX_SIZE": "600", "QUEUE_MAX": "zero"}, "QUEUE_MAX"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" changes nothing", func(t *testing.T) {
			db := newTestDB(t)
			syncConfig(t, db)
			before := configText(t, db)
			err := db.SetConfig(ctx, tt.updates)
			if err == nil {
				t.Fatal("SetConfig: got no error")
			}
			if got, want := store.ErrorCode(err), model.EInvalid; got != want {
				t.Fatalf("error code: got %q, want %q", got, want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not contain %q", err, tt.want)
			}
			if got := configText(t, db); got != before {
				t.Fatalf("configuration changed:\n%s\nwas:\n%s", got, before)
			}
		})
	}
}

// Configuration is cached in memory, and a change made through this handle or by
// another process (another handle on the file) is seen by the next read.
func TestConfigCacheSeesChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := newTestDB(t)
	if err := db.WithTx(ctx, func(tx *store.Tx) error { return tx.SyncConfig(ctx) }); err != nil {
		t.Fatal(err)
	}
	if got := db.ConfigInt(ctx, "DATA_MAX_SIZE"); got != 500 {
		t.Fatalf("DATA_MAX_SIZE = %d, want the default 500", got)
	}
	if err := db.SetConfig(ctx, map[string]string{"DATA_MAX_SIZE": "77"}); err != nil {
		t.Fatal(err)
	}
	if got := db.ConfigInt(ctx, "DATA_MAX_SIZE"); got != 77 {
		t.Fatalf("after a local change DATA_MAX_SIZE = %d, want 77", got)
	}
	other, err := store.Open(ctx, db.Path(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.SetConfig(ctx, map[string]string{"DATA_MAX_SIZE": "88"}); err != nil {
		t.Fatal(err)
	}
	if got := db.ConfigInt(ctx, "DATA_MAX_SIZE"); got != 88 {
		t.Fatalf("after another process's change DATA_MAX_SIZE = %d, want 88", got)
	}
	exec(t, db, "DELETE FROM configuration WHERE keyname = 'DATA_MAX_SIZE'")
	if got := db.ConfigInt(ctx, "DATA_MAX_SIZE"); got != 500 {
		t.Fatalf("after the entry is removed DATA_MAX_SIZE = %d, want the default 500", got)
	}
}

func TestConfigKeysAreDefined(t *testing.T) {
	t.Parallel()
	defined := map[string]bool{}
	for _, d := range store.ConfigDefs {
		defined[d.Keyname] = true
	}
	for _, k := range []string{store.ConfigAppName, store.ConfigCSVDelimiter, store.ConfigDataDefaultSize,
		store.ConfigDataMaxSize, store.ConfigTaskRetentionDays, store.ConfigQueueMax,
		store.ConfigSessionIdleMinutes, store.ConfigSessionMaxHours, store.ConfigQueueMaxPerOwner,
		store.ConfigBackupIntervalHours, store.ConfigBackupKeep, store.ConfigRevisionRetention,
		store.ConfigWebhookAllowPrivate, store.ConfigWebhookMaxAttempts, store.ConfigWebhookTimeout} {
		if !defined[k] {
			t.Errorf("configuration key constant %q has no ConfigDefs entry", k)
		}
	}
	if got, want := len(defined), 15; got != want {
		t.Errorf("ConfigDefs: %d entries, want %d (one constant each)", got, want)
	}
}

// TestWebhookAllowPrivateIsValidated: the allow list takes hosts, addresses and CIDR
// ranges; anything else is refused with the item named.
func TestWebhookAllowPrivateIsValidated(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"", "127.0.0.1", "127.0.0.0/8, ::1, receiver.lab", "169.254.169.254"} {
		if err := store.ValidateConfig(store.ConfigWebhookAllowPrivate, ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"10.0.0.0/40", "http://127.0.0.1/", "a b"} {
		err := store.ValidateConfig(store.ConfigWebhookAllowPrivate, bad)
		if err == nil || !strings.Contains(err.Error(), "WEBHOOK_ALLOW_PRIVATE") {
			t.Errorf("%q: %v, want a refusal naming the entry", bad, err)
		}
	}
}

func TestUnknownConfigKeyIsLogged(t *testing.T) {
	t.Parallel()
	var buf strings.Builder
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "c.db"),
		store.Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := db.ConfigInt(context.Background(), "QUEUE_MAXX"); got != 0 {
		t.Fatalf("unknown key: got %d, want 0", got)
	}
	if !strings.Contains(buf.String(), "unknown configuration key") || !strings.Contains(buf.String(), "QUEUE_MAXX") {
		t.Fatalf("log %q does not report the unknown key QUEUE_MAXX", buf.String())
	}
}
