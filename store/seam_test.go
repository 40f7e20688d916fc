package store_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// sqliteOnly are SQL words and functions of SQLite's own that another engine spells
// differently (or lacks): placeholders aside, they are where the engines differ.
var sqliteOnly = []string{"json_", "->>", " GLOB ", "instr(", "PRAGMA", "sqlite_", "INSERT OR ", "UPDATE OR ",
	"VACUUM", "rowid", " MATCH ", "fts5", "WITHOUT ROWID", "_txlock", "immutable=1"}

// Every statement text that differs between engines comes from the dialect: no
// string in the store's other files or in the tasks package (which runs its
// statements through the store's Table) holds SQLite's own SQL, so a new engine is a
// new dialect, not an edit of the statements' callers. The files that are SQLite's
// by nature say so in their name (*_sqlite.go, and *_postgres.go for PostgreSQL's): the dialects' own, and the machinery
// of the SQLite file (the schema-object check of a file, a dry run's private
// database, restore's checks of a file no DB has open).
func TestEngineSQLOnlyInTheDialect(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{".", "../tasks"} {
		names, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		for _, name := range names {
			base := filepath.Base(name)
			if strings.HasSuffix(base, "_test.go") || strings.HasSuffix(base, "_sqlite.go") || strings.HasSuffix(base, "_postgres.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, _ := strconv.Unquote(lit.Value)
				for _, w := range sqliteOnly {
					if strings.Contains(s, w) {
						t.Errorf("%s: %q holds SQLite's %q: take it from the dialect", fset.Position(lit.Pos()), s, w)
					}
				}
				return true
			})
		}
	}
}
