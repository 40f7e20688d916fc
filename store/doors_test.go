package store_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// writerCalls are the store's low-level writers (unexported) and the entry points of
// the apply path and of a load.
var writerCalls = []string{"write", "deleteInstance", "revision", "rename", "convertKeyname", "rewriteAll",
	"rewriteAllReferences", "rewriteReferences", "rewriteInstance", "deleteField", "deletePermission",
	"collectIPs", "putSchema", "putPermission", "writeSchema", "deleteSchema", "putInstance", "loadEntry", "writeInstance", "writeOne",
	"applyCreate", "applyUpdate", "applyDelete", "applyEnabled", "applyRename", "Apply", "loadStream", "execAny",
	"cascadeRename", "revisionRow", "writeChange", "recordEvents"}

// writerSQL are the statements that change instances, revisions, schemas, fields,
// permissions and the events outbox.
var writerSQL = []string{"INSERT INTO instances", "UPDATE instances", "UPDATE OR IGNORE instances",
	"DELETE FROM instances", "INSERT INTO revisions", "INSERT INTO schema_fields", "DELETE FROM schema_fields",
	"INSERT INTO schemas", "UPDATE schemas", "DELETE FROM schemas", "INSERT INTO permissions",
	"DELETE FROM permissions", "UPDATE permissions", "INSERT INTO events", "UPDATE events", "DELETE FROM events"}

// writerDialect are the dialect's statements and fragments that write instances
// (dialect.go): naming one writes as the statement holding it does.
var writerDialect = []string{"insertInstance", "insertInstanceIfAbsent", "convertKeyname", "jsonSet", "jsonRemove"}

// doors are the exported methods of the store that may write those tables directly,
// each with why it is a door and not a side entrance.
var doors = map[string]string{
	"Tx.Apply":                           "the one apply path",
	"DB.Apply":                           "the apply path in a transaction of its own",
	"Migration.Apply":                    "the apply path as the system identity, without revision",
	"DB.LoadStream":                      "a load: instances through the apply path, schemas and permissions through their load writers",
	"Tx.Load":                            "a load inside the caller's transaction (start-up reloads)",
	"DB.WriteOne":                        "one instance of the API's per-instance writes: a load entry's checks, then the apply path",
	"DB.CollectIPs":                      "IP collection over stored data, through the apply path",
	"Migrator.Rename":                    "migration door only: the apply path's cascading rename without its permission checks (tests' set-up)",
	"DB.TouchAPIKey":                     "an API key's last_used timestamp, not its data: no revision by design",
	"Migration.ConvertKeyname":           "migration-only bulk conversion",
	"Migration.RewriteAllReferences":     "migration-only reference rewrite",
	"Migration.RewriteAllReferencesFunc": "migration-only reference rewrite",
	"Migration.DeleteField":              "migration-only direct deletion (seed: a reload cannot express it)",
	"Migration.DeletePermission":         "migration-only direct deletion (seed: a reload cannot express it)",
	"Migration.Exec":                     "migration-only raw statement (repairs; tests' set-up of states no load makes)",
	"DB.ClaimEvents":                     "the delivery workers' lease of outbox events: the events' delivery state, never what an event says (recorded by the apply path only)",
	"DB.AckEvent":                        "an outbox event's delivery recorded by the worker holding its lease",
	"DB.FailEvent":                       "an outbox event's failed attempt recorded by the worker holding its lease",
	"DB.RedeliverEvent":                  "a dead outbox event made pending again (the operator's redeliver)",
	"DB.PurgeEvents":                     "delivered outbox events deleted after their retention",
}

// Every exported method of the store that writes instances, revisions, schemas, fields
// or permissions (a writing statement, or a call of a low-level writer) is a door listed
// above: the side entrances (SaveInstance, WriteInstance, DeleteInstance, ConvertKeyname
// or DeleteField on any transaction, ...) are gone, and a new one fails here until it is
// justified.
func TestStoreHasNoSideEntrance(t *testing.T) {
	t.Parallel()
	var found []string
	for _, f := range storeFiles(t, token.NewFileSet()) {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || !fn.Name.IsExported() || fn.Body == nil {
				continue
			}
			if recv := receiverName(fn.Recv.List[0].Type); recv != "" && writes(fn.Body) {
				found = append(found, recv+"."+fn.Name.Name)
			}
		}
	}
	slices.Sort(found)
	for _, m := range found {
		if _, ok := doors[m]; !ok {
			t.Errorf("%s writes and is no door of the store: route it through Apply, or make it migration-only", m)
		}
	}
	for m := range doors {
		if !slices.Contains(found, m) {
			t.Errorf("door %s is listed but no longer writes: drop it from the list", m)
		}
	}
}

// storeFiles parses the store's Go files, tests left out.
func storeFiles(t *testing.T, fset *token.FileSet) []*ast.File {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

func receiverName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// writes reports whether body holds a writing statement or calls a low-level writer.
func writes(body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.CallExpr:
			if sel, ok := x.Fun.(*ast.SelectorExpr); ok && slices.Contains(writerCalls, sel.Sel.Name) {
				found = true
			}
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.SelectorExpr); ok && id.Sel.Name == "dia" && slices.Contains(writerDialect, x.Sel.Name) {
				found = true
			}
		case *ast.BasicLit:
			if x.Kind == token.STRING {
				s, _ := strconv.Unquote(x.Value)
				for _, q := range writerSQL {
					if strings.Contains(s, q) {
						found = true
					}
				}
			}
		}
		return !found
	})
	return found
}

// The system mode of the apply path (System, Migration, SystemAuth), writing without
// revisions (Off, NoRevisions) and the migration door (Migrator, Migrate, Migration)
// are the start-up sequence's: no code outside bootstrap (and store itself, and the
// tests' kit) names them, so no request, task or command reaches them but through
// bootstrap. The compiler already keeps the server, the console and the tasks from
// migrating (they hold a DB, which has no migration method); this keeps them from
// the system identity too. The CLI (the root package, internal/cli) acts for the
// operator as the system identity and opens the Migrator it hands to bootstrap, but
// it too migrates only through bootstrap.
func TestSystemIdentityIsNotReachableFromRequests(t *testing.T) {
	t.Parallel()
	cli := map[string]bool{"..": true, "../internal/cli": true}
	allowed := map[string]bool{"../bootstrap": true, "../store": true, "../internal/testkit": true}
	dirs := repoDirs(t, allowed)
	for _, must := range []string{"../server", "../server/console", "../tasks", "../store/model", "../store/codec"} {
		if !slices.Contains(dirs, must) {
			t.Fatalf("%s is not scanned", must)
		}
	}
	for _, dir := range dirs {
		forbidden := []string{"Migrate", "Migration", "Migrator", "OpenMigrator", "SystemAuth", "AuthSystem"}
		keys := []string{"System", "Migration", "Off", "NoRevisions"}
		if cli[dir] {
			forbidden = []string{"Migrate", "Migration"}
		}
		for _, v := range namedIn(t, dir, false, forbidden, keys) {
			t.Error(v)
		}
	}
}

// migratorOpeners are the packages that may open the migration door (name
// store.OpenMigrator), tests included: the CLI, the start-up sequence and the tests'
// kit, besides store itself.
var migratorOpeners = map[string]bool{"../internal/cli": true, "../bootstrap": true, "../internal/testkit": true, "../store": true}

// Only the openers name the Migrator's constructor, in code or tests: every other
// package, tests included, gets a DB and, in tests, the kit's Migrator of it.
func TestMigratorOpenedOnlyByTheOpeners(t *testing.T) {
	t.Parallel()
	for _, dir := range repoDirs(t, migratorOpeners) {
		for _, v := range namedIn(t, dir, true, []string{"OpenMigrator"}, nil) {
			t.Error(v)
		}
	}
	t.Run("a package naming it is found", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		src := "package server\n\nimport \"dataservice/store\"\n\nvar _ = store.OpenMigrator\n"
		if err := os.WriteFile(filepath.Join(dir, "open_test.go"), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := namedIn(t, dir, true, []string{"OpenMigrator"}, nil); len(got) != 1 || !strings.Contains(got[0], "names OpenMigrator") {
			t.Fatalf("violations = %q, want one naming OpenMigrator", got)
		}
		if got := namedIn(t, dir, false, []string{"OpenMigrator"}, nil); len(got) != 0 {
			t.Fatalf("violations without tests = %q, want none", got)
		}
	})
}

// repoDirs lists the repository's directories (hidden and testdata left out) but
// those in skip; the directories below a skipped one are listed.
func repoDirs(t *testing.T, skip map[string]bool) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != ".." && (strings.HasPrefix(name, ".") || name == "testdata") {
			return filepath.SkipDir
		}
		if !skip[path] { // its subpackages (store/model, store/codec) are scanned
			dirs = append(dirs, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// namedIn returns a line for each selector of dir's Go files (tests too when tests)
// whose name is in names, and each key of a composite literal in keys.
func namedIn(t *testing.T, dir string, tests bool, names, keys []string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || (!tests && strings.HasSuffix(name, "_test.go")) {
			continue
		}
		path := filepath.Join(dir, name)
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.SelectorExpr:
				if slices.Contains(names, x.Sel.Name) {
					found = append(found, fmt.Sprintf("%s: names %s", fset.Position(x.Pos()), x.Sel.Name))
				}
			case *ast.KeyValueExpr:
				// System or Migration in a store.LoadOptions or store.ApplyOptions
				// literal; Off or NoRevisions in store.Revisions or store.LoadOptions.
				if k, ok := x.Key.(*ast.Ident); ok && slices.Contains(keys, k.Name) {
					found = append(found, fmt.Sprintf("%s: sets %s", fset.Position(x.Pos()), k.Name))
				}
			}
			return true
		})
	}
	return found
}

// rawSQL are database/sql's handles: a pool, a transaction, a connection, a prepared
// statement.
var rawSQL = []string{"DB", "Tx", "Conn", "Stmt"}

// No exported function, method or field of the store hands out a raw database/sql
// handle (the read pool, a write transaction): every statement from outside goes
// through a door (Apply, a table owner's Table, the query-only Reader, Migration),
// and the compiler holds everyone else to them.
func TestStoreHandsOutNoRawSQL(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	isRaw := func(e ast.Expr) bool {
		found := false
		ast.Inspect(e, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "sql" && slices.Contains(rawSQL, sel.Sel.Name) {
					found = true
				}
			}
			return !found
		})
		return found
	}
	for _, f := range storeFiles(t, fset) {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || d.Type.Results == nil {
					continue
				}
				if d.Recv != nil && !ast.IsExported(receiverName(d.Recv.List[0].Type)) {
					continue
				}
				for _, r := range d.Type.Results.List {
					if isRaw(r.Type) {
						t.Errorf("%s: %s returns a raw database/sql handle", fset.Position(d.Pos()), d.Name.Name)
					}
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					ts, ok := spec.(*ast.TypeSpec)
					if !ok || !ts.Name.IsExported() {
						continue
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						continue
					}
					for _, field := range st.Fields.List {
						exported := len(field.Names) == 0 // embedded: promoted methods
						for _, n := range field.Names {
							exported = exported || n.IsExported()
						}
						if exported && isRaw(field.Type) {
							t.Errorf("%s: %s has an exported raw database/sql field", fset.Position(field.Pos()), ts.Name.Name)
						}
					}
				}
			}
		}
	}
}

// instanceUpdates match the statements that update instances in place, however
// spelled (any case and spacing, a conflict clause, a schema, quotes), and an upsert
// into instances that updates: a function holding one must list what it updates for
// the search index.
var instanceUpdates = []*regexp.Regexp{
	regexp.MustCompile(`(?is)\bupdate\s+(or\s+\w+\s+)?("?main"?\.)?"?instances"?\s+(as\s+\w+\s+)?set\b`),
	regexp.MustCompile(`(?is)\binsert\s+(or\s+\w+\s+)?into\s+("?main"?\.)?"?instances"?[\s(].*\bdo\s+update\b`),
}

// listers are the calls that list updated instances for SQLite's search index
// (searchlist.go).
var listers = []string{"listForSearch", "listWhereForSearch", "rawListing"}

// Since layout 20 no trigger lists an updated row for the search index: every function
// of the store that updates instances (its own UPDATE statement, or the dialect's
// keyname conversion) lists what it updates, in the same function. A new UPDATE that
// does not fails here (and searches would miss its rows until the next write of them).
func TestEveryInstanceUpdateIsListed(t *testing.T) {
	t.Parallel()
	var updaters []string
	for _, f := range storeFiles(t, token.NewFileSet()) {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			updates, lists := false, false
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.CallExpr:
					if sel, ok := x.Fun.(*ast.SelectorExpr); ok && slices.Contains(listers, sel.Sel.Name) {
						lists = true
					}
				case *ast.SelectorExpr:
					if id, ok := x.X.(*ast.SelectorExpr); ok && id.Sel.Name == "dia" && x.Sel.Name == "convertKeyname" {
						updates = true
					}
				case *ast.BasicLit:
					if s, err := strconv.Unquote(x.Value); err == nil && x.Kind == token.STRING {
						for _, re := range instanceUpdates {
							updates = updates || re.MatchString(s)
						}
					}
				}
				return true
			})
			if updates {
				updaters = append(updaters, fn.Name.Name)
				if !lists {
					t.Errorf("%s updates instances and lists nothing for the search index (listForSearch)", fn.Name.Name)
				}
			}
		}
	}
	slices.Sort(updaters)
	// The patterns match the spellings they are for, and not another table's update.
	for q, want := range map[string]bool{"update  Instances\n\tSET data = ?": true, `UPDATE OR IGNORE main."instances" SET k = 1`: true,
		"INSERT INTO instances(id) VALUES(1) ON CONFLICT(id) DO UPDATE SET data = ?": true,
		"UPDATE instances_search_dirty SET staged = 1":                               false, "INSERT INTO instances(id) VALUES(1) ON CONFLICT DO NOTHING": false} {
		got := false
		for _, re := range instanceUpdates {
			got = got || re.MatchString(q)
		}
		if got != want {
			t.Errorf("%q: matched %v, want %v", q, got, want)
		}
	}
	// The scan finds the store's updates: the apply path's (write), the renames', an API key's
	// last use, a field's deletion and the keyname conversion.
	for _, want := range []string{"write", "rename", "rewriteInstance", "TouchAPIKey", "deleteField", "convertKeyname"} {
		if !slices.Contains(updaters, want) {
			t.Errorf("%s is not found updating instances (found %v): the scan misses it", want, updaters)
		}
	}
}
