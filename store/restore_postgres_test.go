package store_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"dataservice/internal/testkit"
	"dataservice/store"
)

// TestRestorePostgresSessionAppears: a session that connects while a restore runs
// (after its first check) makes it refuse before committing: the database keeps
// what it held, and the previous contents' copy is removed, as nothing changed.
func TestRestorePostgresSessionAppears(t *testing.T) {
	if !testkit.Postgres() {
		t.Skip("PostgreSQL's restore: runs on the PostgreSQL pass")
	}
	ctx := context.Background()
	addr := testkit.NewAddress(t, "restore")
	db, err := testkit.OpenStore(t, addr, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	testkit.MustLoad(t, db, "- {classname: _schema, keyname: box, note: {dataformat: string}}\n- {classname: box, keyname: b1}\n", store.LoadOptions{})
	dir := t.TempDir()
	file := filepath.Join(dir, "b.dump")
	if err := db.Backup(ctx, file); err != nil {
		t.Fatal(err)
	}
	testkit.MustLoad(t, db, "- {classname: box, keyname: after_backup}\n", store.LoadOptions{})
	db.Close()

	var late *sql.DB
	store.SetRestoreBeforeCommit(func() {
		late, err = sql.Open("pgx", addr)
		if err == nil {
			err = late.Ping()
		}
	})
	defer store.SetRestoreBeforeCommit(nil)
	keep := filepath.Join(dir, "before.dump")
	rerr := store.RestorePostgres(ctx, addr, file, keep)
	if err != nil {
		t.Fatal(err)
	}
	if rerr == nil || !strings.Contains(rerr.Error(), "other sessions are connected") || !strings.Contains(rerr.Error(), "nothing was changed") {
		t.Fatalf("restore while a session connected: %v", rerr)
	}
	if n := testkit.QueryInt(t, testkit.Pool(late), "SELECT count(*) FROM instances WHERE keyname = 'after_backup'"); n != 1 {
		t.Fatalf("the refused restore changed the database (%d)", n)
	}
	late.Close()
	if kept, _ := filepath.Glob(filepath.Join(dir, "before.dump*")); len(kept) != 0 {
		t.Fatalf("a refused restore left %v", kept)
	}
}
