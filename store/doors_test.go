package store_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// writerCalls are the store's low-level writers (unexported) and the entry points of
// the apply path and of a load.
var writerCalls = []string{"write", "deleteInstance", "revision", "rename", "convertKeyname", "rewriteAll",
	"rewriteAllReferences", "rewriteReferences", "rewriteInstance", "deleteField", "deletePermission",
	"collectIPs", "putSchema", "putPermission", "writeSchema", "deleteSchema", "putInstance", "loadEntry", "writeInstance",
	"applyCreate", "applyUpdate", "applyDelete", "applyEnabled", "applyRename", "Apply", "loadStream", "execAny"}

// writerSQL are the statements that change instances, revisions, schemas, fields and
// permissions.
var writerSQL = []string{"INSERT INTO instances", "UPDATE instances", "UPDATE OR IGNORE instances",
	"DELETE FROM instances", "INSERT INTO revisions", "INSERT INTO schema_fields", "DELETE FROM schema_fields",
	"INSERT INTO schemas", "UPDATE schemas", "DELETE FROM schemas", "INSERT INTO permissions",
	"DELETE FROM permissions", "UPDATE permissions"}

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
	"DB.CollectIPs":                      "IP collection over stored data, through the apply path",
	"Tx.Rename":                          "the apply path's cascading rename (with its revision)",
	"DB.TouchAPIKey":                     "an API key's last_used timestamp, not its data: no revision by design",
	"Migration.ConvertKeyname":           "migration-only bulk conversion",
	"Migration.RewriteAllReferences":     "migration-only reference rewrite",
	"Migration.RewriteAllReferencesFunc": "migration-only reference rewrite",
	"Migration.DeleteField":              "migration-only direct deletion (seed: a reload cannot express it)",
	"Migration.DeletePermission":         "migration-only direct deletion (seed: a reload cannot express it)",
	"Migration.Exec":                     "migration-only raw statement (repairs; tests' set-up of states no load makes)",
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
// revisions (Off, NoRevisions) and the migration transaction are the start-up
// sequence's: no code outside bootstrap (and store itself, and the tests' kit) names
// them, so no request, task or command reaches them but through bootstrap. The CLI
// (the root package, internal/cli) acts for the operator as the system identity, but
// it too reaches migrations only through bootstrap.
func TestSystemIdentityIsNotReachableFromRequests(t *testing.T) {
	t.Parallel()
	cli := map[string]bool{"..": true, "../internal/cli": true}
	allowed := map[string]bool{"../bootstrap": true, "../store": true, "../internal/testkit": true}
	var dirs []string
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != ".." && (strings.HasPrefix(name, ".") || name == "testdata" || allowed[path]) {
			return filepath.SkipDir
		}
		dirs = append(dirs, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{"../server", "../server/console", "../tasks"} {
		if !slices.Contains(dirs, must) {
			t.Fatalf("%s is not scanned", must)
		}
	}
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		forbidden := []string{"Migrate", "Migration", "SystemAuth", "AuthSystem"}
		if cli[dir] {
			forbidden = []string{"Migrate", "Migration"}
		}
		fset := token.NewFileSet()
		for _, e := range entries {
			name := e.Name()
			if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
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
					if slices.Contains(forbidden, x.Sel.Name) {
						t.Errorf("%s: names %s", fset.Position(x.Pos()), x.Sel.Name)
					}
				case *ast.KeyValueExpr:
					// System or Migration in a store.LoadOptions or store.ApplyOptions
					// literal; Off or NoRevisions in store.Revisions or store.LoadOptions.
					if k, ok := x.Key.(*ast.Ident); ok && slices.Contains([]string{"System", "Migration", "Off", "NoRevisions"}, k.Name) {
						t.Errorf("%s: sets %s", fset.Position(x.Pos()), k.Name)
					}
				}
				return true
			})
		}
	}
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
