package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
)

// A file at every layout version, made by running only the steps up to it as a
// program of that version did (owners' steps first), opens: the check accepts it
// before migrating, and the migrated file is accepted at the next open.
func TestEveryLayoutVersionPassesTheSchemaCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	owners, steps := ownedLayouts()
	if len(owners) == 0 {
		t.Fatal("no owned layouts registered: the test binary must link the tasks package")
	}
	for v := 0; v <= len(sqliteLayout); v++ {
		t.Run(fmt.Sprintf("layout %d", v), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "old.db")
			raw, err := sql.Open("sqlite", "file:"+path)
			if err != nil {
				t.Fatal(err)
			}
			raw.SetMaxOpenConns(1)
			var stmts []string
			for _, owner := range owners {
				stmts = append(stmts, layoutVersionsTable)
				stmts = append(stmts, steps[owner]...)
				stmts = append(stmts, fmt.Sprintf("INSERT INTO layout_versions(owner, version) VALUES('%s', %d)", owner, len(steps[owner])))
			}
			stmts = append(stmts, sqliteLayout[:v]...)
			stmts = append(stmts, fmt.Sprintf("PRAGMA user_version = %d", v))
			for _, q := range stmts {
				if _, err := raw.Exec(q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			raw.Close()
			for i := 0; i < 2; i++ {
				db, err := Open(ctx, path, Options{})
				if err != nil {
					t.Fatalf("open %d: %v", i+1, err)
				}
				db.Close()
			}
			db, err := Open(ctx, path, Options{ReadOnly: true})
			if err != nil {
				t.Fatalf("open read-only: %v", err)
			}
			db.Close()
		})
	}
}
