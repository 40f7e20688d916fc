package store

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// catalogReader runs the check's catalog queries: a pool, or the connection of a
// restore's transaction (which checks what it restored before committing).
type catalogReader interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// checkPostgresSchema refuses a database whose schema (current_schema()) holds objects
// the service's layout and the registered owners do not create, as SQLite's check
// refuses such a file: another application's database, or a crafted dump that brings
// code along (a trigger firing on every write, a redefined bookkeeping function, a
// rule rewriting statements, a view, a policy hiding rows, a default or CHECK calling
// a function). It compares pg_catalog with the layout's text: tables; indexes (the
// layout's, and those backing a key); sequences (those of identity columns only);
// functions, by name and body; triggers, by name, table, function and events; column
// defaults and CHECK constraints, only where and as the layout writes them (defaults
// constants). Rules, views, policies, row-level security, event triggers, types and
// operators the layout does not create are foreign. Objects an extension owns (the
// functions and operators of pg_trgm) are left out: pg_depend marks them 'e'. Every
// open runs it, before anything is written, and restore runs it on the restored
// database.
func checkPostgresSchema(ctx context.Context, pool catalogReader) error {
	ref := postgresReference()
	var unexpected, changed []SchemaObject
	foreign := func(typ, name, table, sql string) {
		unexpected = append(unexpected, SchemaObject{Type: typ, Name: name, Table: table, SQL: sql})
	}
	var tables []string
	for _, c := range postgresChecks {
		rows, err := pool.QueryContext(ctx, c.query)
		if err != nil {
			return fmt.Errorf("read the database's %s: %w", c.what, err)
		}
		for rows.Next() {
			var kind, name, table, def string
			if err := rows.Scan(&kind, &name, &table, &def); err != nil {
				rows.Close()
				return fmt.Errorf("read the database's %s: %w", c.what, err)
			}
			switch typ, ok := c.judge(ref, kind, name, table, def); {
			case ok:
			case typ == "changed" || strings.HasPrefix(typ, "changed "):
				what := strings.TrimPrefix(strings.TrimPrefix(typ, "changed"), " ")
				if what == "" {
					what = c.what
				}
				changed = append(changed, SchemaObject{Type: what, Name: name, Table: table, SQL: def})
			default:
				if typ == "table" {
					tables = append(tables, name)
				}
				foreign(typ, name, table, def)
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return fmt.Errorf("read the database's %s: %w", c.what, err)
		}
	}
	if len(unexpected) == 0 && len(changed) == 0 {
		return nil
	}
	return &SchemaError{Layout: "the PostgreSQL layout", Unexpected: unexpected, Changed: changed,
		tables: strings.Join(append(tables, "(no repair on PostgreSQL)"), ", ")}
}

// notExtension is a condition true when the object of oid (in the catalog cat) is
// no extension's member.
func notExtension(oid, cat string) string {
	return `NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = '` + cat + `'::regclass AND d.objid = ` + oid + ` AND d.deptype = 'e')`
}

// postgresCheck is one catalog query of the check, each row (kind, name, table,
// definition), and how a row is judged: ok, or the kind of object to report
// ("changed" for a layout object that differs, "changed KIND" to name its kind).
type postgresCheck struct {
	what  string
	query string
	judge func(r *postgresRef, kind, name, table, def string) (string, bool)
}

var postgresChecks = []postgresCheck{
	{what: "relations", query: `SELECT c.relkind::text, c.relname, coalesce(t.relname, c.relname),
		CASE WHEN c.relkind = 'S' THEN CASE WHEN EXISTS (SELECT 1 FROM pg_depend d JOIN pg_attribute a
			ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
			WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'i' AND a.attidentity <> '') THEN 'identity' ELSE '' END
		WHEN c.relkind IN ('i', 'I') THEN CASE WHEN EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = c.oid AND k.contype IN ('p', 'u'))
			THEN 'key' ELSE replace(pg_get_indexdef(c.oid), ' ON ' || quote_ident(n.nspname) || '.', ' ON ') END
		WHEN c.relrowsecurity THEN 'row-level security' ELSE '' END
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_index x ON x.indexrelid = c.oid LEFT JOIN pg_class t ON t.oid = x.indrelid
		WHERE n.nspname = current_schema() AND ` + notExtension("c.oid", "pg_class") + ` ORDER BY 2`,
		judge: func(r *postgresRef, kind, name, table, def string) (string, bool) {
			switch kind {
			case "r", "p":
				if !r.tables[name] {
					return "table", false
				}
				if def != "" {
					return def + " on table", false
				}
				return "", true
			case "i", "I":
				if def == "key" {
					return "index", r.tables[table]
				}
				want, ok := r.indexes[name]
				if !ok || want.table != table {
					return "index", false
				}
				// The layout's index, but on another expression (one calling a
				// function of another schema, say).
				return "changed index", indexWords(def) == want.words
			case "S":
				return "sequence", def == "identity"
			case "v":
				return "view", false
			case "m":
				return "materialized view", false
			case "f":
				return "foreign table", false
			case "c":
				return "type", false
			}
			return "relation (" + kind + ")", false
		}},
	{what: "function", query: `SELECT p.prokind::text, p.proname, p.proname,
		'LANGUAGE ' || l.lanname || CASE WHEN p.prosecdef THEN ' SECURITY DEFINER' ELSE '' END || ' AS ' || p.prosrc
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace JOIN pg_language l ON l.oid = p.prolang
		WHERE n.nspname = current_schema() AND ` + notExtension("p.oid", "pg_proc") + ` ORDER BY 2`,
		judge: func(r *postgresRef, kind, name, _, body string) (string, bool) {
			want, ok := r.functions[name]
			if !ok || kind != "f" {
				return "function", false
			}
			if r.seenFunction[name] {
				return "function", false // an overload beside the layout's
			}
			r.seenFunction[name] = true
			return "changed", body == want
		}},
	{what: "trigger", query: `SELECT '', t.tgname, c.relname, replace(pg_get_triggerdef(t.oid), ' ON ' || quote_ident(n.nspname) || '.', ' ON ')
		FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND NOT t.tgisinternal ORDER BY 2`,
		judge: func(r *postgresRef, _, name, table, def string) (string, bool) {
			want, ok := r.triggers[name]
			if !ok || want.table != table {
				return "trigger", false
			}
			return "changed", triggerWords(def) == want.words
		}},
	{what: "rule", query: `SELECT '', r.rulename, c.relname, pg_get_ruledef(r.oid)
		FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND c.relkind <> 'v' AND c.relkind <> 'm' ORDER BY 2`,
		judge: func(*postgresRef, string, string, string, string) (string, bool) { return "rule", false }},
	{what: "policy", query: `SELECT '', p.polname, c.relname, coalesce(pg_get_expr(p.polqual, p.polrelid), '')
		FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() ORDER BY 2`,
		judge: func(*postgresRef, string, string, string, string) (string, bool) { return "policy", false }},
	{what: "event trigger", query: `SELECT '', e.evtname, e.evtname, e.evtevent FROM pg_event_trigger e
		WHERE ` + notExtension("e.oid", "pg_event_trigger") + ` ORDER BY 2`,
		judge: func(*postgresRef, string, string, string, string) (string, bool) { return "event trigger", false }},
	{what: "column default", query: `SELECT '', a.attname, c.relname, pg_get_expr(d.adbin, d.adrelid)
		FROM pg_attrdef d JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
		JOIN pg_class c ON c.oid = d.adrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() ORDER BY 3, 2`,
		judge: func(r *postgresRef, _, col, table, def string) (string, bool) {
			if !r.defaults[table+"."+col] {
				return "default of column", false
			}
			return "changed", constantDefault.MatchString(def)
		}},
	{what: "CHECK constraint", query: `SELECT '', k.conname, c.relname, pg_get_constraintdef(k.oid)
		FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND k.contype = 'c' ORDER BY 3, 2`,
		judge: func(r *postgresRef, _, name, table, def string) (string, bool) {
			return "CHECK constraint", slices.Contains(r.checks[table], checkWords(def))
		}},
	{what: "type", query: `SELECT t.typtype::text, t.typname, t.typname, '' FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
		WHERE n.nspname = current_schema() AND t.typrelid = 0 AND NOT (t.typcategory = 'A' AND t.typelem <> 0)
		AND ` + notExtension("t.oid", "pg_type") + ` ORDER BY 2`,
		judge: func(*postgresRef, string, string, string, string) (string, bool) { return "type", false }},
	{what: "operator", query: `SELECT '', o.oprname, o.oprname, '' FROM pg_operator o JOIN pg_namespace n ON n.oid = o.oprnamespace
		WHERE n.nspname = current_schema() AND ` + notExtension("o.oid", "pg_operator") + ` ORDER BY 2`,
		judge: func(*postgresRef, string, string, string, string) (string, bool) { return "operator", false }},
}

// constantDefault is a column default that is a constant: a number, or a quoted
// literal with its type cast.
var constantDefault = regexp.MustCompile(`^(-?[0-9]+|'(?:[^']|'')*'(?:::[a-z ]+)?)$`)

// postgresRef is what the layout creates, read from its text.
type postgresRef struct {
	tables    map[string]bool
	indexes   map[string]struct{ table, words string } // index -> its table and indexWords
	functions map[string]string                        // function -> "LANGUAGE lang AS body", as the check reads it
	triggers  map[string]struct{ table, words string }
	defaults  map[string]bool     // "table.column"
	checks    map[string][]string // table -> CHECK expressions (checkWords)
	// seenFunction marks the layout's functions met in the database (an overload
	// of one is foreign).
	seenFunction map[string]bool
}

var (
	pgCreateIndex    = regexp.MustCompile(`(?i)\bCREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)\s+ON\s+(\w+)[^;]*`)
	pgCast           = regexp.MustCompile(`(?i)\bCAST\s*\(\s*(\w+)\s+AS\s+(\w+)\s*\)`)
	pgCreateFunction = regexp.MustCompile(`(?s)\bCREATE\s+FUNCTION\s+(\w+)\s*\(.*?\bLANGUAGE\s+(\w+).*?\bAS\s+\$\$(.*?)\$\$`)
	pgCreateTrigger  = regexp.MustCompile(`(?s)\bCREATE\s+TRIGGER\s+(\w+)\s+(.*?)\s+ON\s+(\w+)\s+(FOR\s+EACH.*?)\);`)
	pgTableBody      = regexp.MustCompile(`(?s)\bCREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)\s*\((.*?)\n\)`)
	pgAddColumn      = regexp.MustCompile(`(?i)\bALTER\s+TABLE\s+(\w+)\s+ADD\s+COLUMN\s+(\w+)\s+([^;\n]*)`)
	pgColumnLine     = regexp.MustCompile(`^\s*(\w+)\s+(.*)$`)
	pgCheck          = regexp.MustCompile(`(?i)\bCHECK\s*(\(.*\))`)
	pgDefault        = regexp.MustCompile(`(?i)\bDEFAULT\b`)
	pgIdentity       = regexp.MustCompile(`(?i)\bGENERATED\s+(?:BY\s+DEFAULT|ALWAYS)\s+AS\s+IDENTITY\b`)
)

// postgresReference reads what PostgreSQL's layout and every registered owner's
// steps create.
func postgresReference() *postgresRef {
	r := &postgresRef{tables: knownTables(), indexes: map[string]struct{ table, words string }{}, functions: map[string]string{},
		triggers: map[string]struct{ table, words string }{}, defaults: map[string]bool{}, checks: map[string][]string{},
		seenFunction: map[string]bool{}}
	steps := append([]string{}, postgresLayout...)
	_, owners := ownedLayouts()
	names := make([]string, 0, len(owners))
	for o := range owners {
		names = append(names, o)
	}
	sort.Strings(names)
	for _, o := range names {
		steps = append(steps, owners[o]...)
	}
	for _, step := range steps {
		for _, m := range pgCreateIndex.FindAllStringSubmatch(step, -1) {
			r.indexes[m[1]] = struct{ table, words string }{m[2], indexWords(m[0])}
		}
		for _, m := range pgCreateFunction.FindAllStringSubmatch(step, -1) {
			r.functions[m[1]] = "LANGUAGE " + m[2] + " AS " + m[3]
		}
		for _, m := range pgCreateTrigger.FindAllStringSubmatch(step, -1) {
			r.triggers[m[1]] = struct{ table, words string }{m[3], triggerWords("CREATE TRIGGER " + m[1] + " " + m[2] + " ON " + m[3] + " " + m[4] + ")")}
		}
		for _, m := range pgTableBody.FindAllStringSubmatch(step, -1) {
			for _, line := range strings.Split(m[2], "\n") {
				r.column(m[1], line)
			}
		}
		for _, m := range pgAddColumn.FindAllStringSubmatch(step, -1) {
			r.column(m[1], m[2]+" "+m[3])
		}
	}
	return r
}

// column notes the default and CHECK of one column definition of table.
func (r *postgresRef) column(table, line string) {
	line = strings.TrimSpace(line)
	if i := strings.Index(line, "--"); i >= 0 {
		line = line[:i]
	}
	m := pgColumnLine.FindStringSubmatch(line)
	if m == nil {
		return
	}
	switch strings.ToUpper(m[1]) {
	case "UNIQUE", "PRIMARY", "CHECK", "FOREIGN", "CONSTRAINT":
		return
	}
	// An identity column ("GENERATED BY DEFAULT AS IDENTITY") has no default.
	if pgDefault.MatchString(pgIdentity.ReplaceAllString(m[2], "")) {
		r.defaults[table+"."+m[1]] = true
	}
	if c := pgCheck.FindStringSubmatch(m[2]); c != nil {
		r.checks[table] = append(r.checks[table], checkWords(c[1]))
	}
}

// triggerWords is a trigger's definition as a sorted list of words, without
// parentheses: PostgreSQL writes the events of a trigger in its own order. Names keep
// their schema: the query takes the service schema's off the table's name only, and
// PostgreSQL qualifies a function outside the search path (the service's schema), so
// a trigger calling other.dataservice_instances_insert() differs from the layout's.
func triggerWords(def string) string {
	def = strings.NewReplacer("(", " ", ")", " ", ",", " ", ";", " ").Replace(def)
	words := strings.Fields(strings.ToLower(def))
	sort.Strings(words)
	return strings.Join(words, " ")
}

// indexWords is an index's definition reduced to compare the layout's text with
// pg_get_indexdef's: lower case, CAST(x AS t) as x::t, text casts, btree (the
// default method), IF NOT EXISTS, quotes, parentheses and spaces left out. Names keep
// their schema, as in triggerWords: an index on other.f(classname) differs from one
// on classname.
func indexWords(def string) string {
	def = strings.ToLower(pgCast.ReplaceAllString(def, "$1::$2"))
	def = strings.NewReplacer("::text", "", "(", "", ")", "", "'", "", " ", "", "\t", "", "\n", "", ";", "").Replace(def)
	return strings.NewReplacer("ifnotexists", "", "usingbtree", "").Replace(def)
}

// checkWords is a CHECK expression without parentheses, spaces or the word CHECK.
func checkWords(expr string) string {
	expr = strings.TrimPrefix(strings.TrimSpace(expr), "CHECK")
	return strings.NewReplacer("(", "", ")", "", " ", "", "\t", "").Replace(strings.ToLower(expr))
}

// knownTables are the tables PostgreSQL's layout and the registered owners create.
func knownTables() map[string]bool {
	known := map[string]bool{"layout_versions": true}
	steps := append([]string{}, postgresLayout...)
	_, owners := ownedLayouts()
	for _, s := range owners {
		steps = append(steps, s...)
	}
	for _, step := range steps {
		for _, m := range createTable.FindAllStringSubmatch(step, -1) {
			known[m[2]] = true
		}
	}
	return known
}
