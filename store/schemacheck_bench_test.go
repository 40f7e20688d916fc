package store

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
)

// BenchmarkOpenUpToDate measures opening (and closing) an up-to-date file, the part
// of every start and CLI command that the schema check adds to: "cached" is every
// open after the first in a process, "first in process" also builds the reference
// layout in memory. BenchmarkSchemaCheck is the check alone on an open file.
func BenchmarkOpenUpToDate(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "data.db")
	db, err := Open(ctx, path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	db.Close()
	for _, c := range []struct {
		name  string
		reset bool
	}{{"cached", false}, {"first in process", true}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if c.reset {
					references = sync.Map{}
				}
				db, err := Open(ctx, path, Options{})
				if err != nil {
					b.Fatal(err)
				}
				db.Close()
			}
		})
	}
}

func BenchmarkSchemaCheck(b *testing.B) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(b.TempDir(), "data.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for b.Loop() {
		if err := checkSchema(ctx, db.w); err != nil {
			b.Fatal(err)
		}
	}
}
