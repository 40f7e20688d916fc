package store_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// sqliteOnly are SQL words and functions of SQLite's own that another engine spells
// differently (or lacks): placeholders aside, they are where the engines differ.
var sqliteOnly = []string{"json_", "->>", " GLOB ", "instr(", "PRAGMA", "sqlite_", "INSERT OR ", "UPDATE OR ",
	"VACUUM", "rowid", " MATCH ", "fts5", "WITHOUT ROWID", "_txlock", "immutable=1"}

// postgresOnly are PostgreSQL's own SQL (placeholders, casts, types, operators,
// functions and catalogs, row locks and notifications), each a pattern and what it
// is: SQLite has none of them, so a statement holding one is PostgreSQL's text.
var postgresOnly = []struct {
	re   *regexp.Regexp
	what string
}{
	{regexp.MustCompile(`\$[0-9]+`), "$N placeholders"},
	{regexp.MustCompile(`::\s*(?i:text|json|jsonb|int|int2|int4|int8|integer|bigint|smallint|bool|boolean|numeric|real|float4|float8|double|varchar|char|bytea|uuid|inet|cidr|date|timestamp|timestamptz|interval|regclass|regproc|oid|name)\b`), ":: casts"},
	{regexp.MustCompile(`(?i)\bjsonb`), "jsonb"},
	{regexp.MustCompile(`\bILIKE\b`), "ILIKE"},
	{regexp.MustCompile(`\bpg_\w+\s*\(`), "pg_ functions"},
	{regexp.MustCompile(`\b(FROM|JOIN)\s+(pg_\w+|information_schema)`), "PostgreSQL's catalogs"},
	{regexp.MustCompile(`\bpg_catalog\b`), "pg_catalog"},
	{regexp.MustCompile(`\bFOR\s+(NO\s+KEY\s+)?(UPDATE|SHARE)\b`), "row locks (FOR UPDATE)"},
	{regexp.MustCompile(`\b(SKIP LOCKED|NOWAIT)\b`), "SKIP LOCKED / NOWAIT"},
	{regexp.MustCompile(`\b(LISTEN|NOTIFY|UNLISTEN)\s+\w`), "LISTEN/NOTIFY"},
	{regexp.MustCompile(`\b(greatest|least|string_agg|array_agg|to_regclass|gen_random_uuid|current_setting|set_config|now|translate|similarity|jsonb?_\w+)\s*\(`), "PostgreSQL's functions"},
	{regexp.MustCompile(`\b(GENERATED\s+(BY\s+DEFAULT|ALWAYS)\s+AS\s+IDENTITY|BIGSERIAL|SERIAL)\b`), "identity columns"},
	{regexp.MustCompile(`\bDISTINCT\s+ON\s*\(|\bANY\s*\(|\$\$`), "DISTINCT ON, ANY(array), $$ bodies"},
	{regexp.MustCompile(`\b(TRUNCATE|LANGUAGE\s+plpgsql|CREATE\s+EXTENSION)\b`), "TRUNCATE, PL/pgSQL, extensions"},
}

// Every statement text that differs between engines comes from the dialect: no
// string in the store's other files or in the tasks package (which runs its
// statements through the store's Table) holds SQLite's own SQL, so a new engine is a
// new dialect, not an edit of the statements' callers. The same holds for
// PostgreSQL's own SQL. The files that are SQLite's
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
				for _, p := range postgresOnly {
					if m := p.re.FindString(s); m != "" {
						t.Errorf("%s: %q holds PostgreSQL's %q (%s): take it from the dialect", fset.Position(lit.Pos()), s, m, p.what)
					}
				}
				return true
			})
		}
	}
}
