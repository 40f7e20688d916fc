package store

import (
	"context"
	"path/filepath"
	"testing"
)

func TestIsUnique(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "u.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ins := "INSERT INTO instances(classname, keyname, created_at, updated_at) VALUES('c', 'k', '', '')"
	if _, err := db.w.ExecContext(ctx, ins); err != nil {
		t.Fatal(err)
	}
	_, err = db.w.ExecContext(ctx, ins)
	if err == nil || !isUnique(err) {
		t.Fatalf("duplicate keyname: isUnique(%v) = false, want true", err)
	}
	_, err = db.w.ExecContext(ctx, "INSERT INTO instances(classname, keyname) VALUES('c', 'other')")
	if err == nil || isUnique(err) {
		t.Fatalf("NOT NULL violation: isUnique(%v) = true, want false", err)
	}
}
