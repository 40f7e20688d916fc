package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// A dry-run load runs in short write transactions that are all rolled back, so the
// writer is released between them as it is between the batches of a real load. For
// the report to stay the one a single transaction gives, each batch carries forward
// what the earlier (rolled-back) batches changed, and puts it back before an entry
// may see it:
//   - every instance row a batch inserted, updated or deleted is remembered in its final
//     state (or as absent), keyed by class and keyname; the tables of schemas, fields
//     and permissions are remembered whole when a batch changed them;
//   - a new batch first writes back the remembered schema, field and permission tables
//     and the remembered rows of built-in classes (users, roles, groups, keys,
//     pipelines: what permission checks read);
//   - before each entry, it writes back the remembered rows that share a word (a
//     keyname, a displayname or any text value, also as a hexip keyname and in lower
//     case) with the entry as it will be applied: its own object, the objects it
//     references, the objects that reference it (delete and rename checks), objects
//     with the same unique value and collected addresses. Before a schema entry
//     (which may rewrite every instance of a class) everything is written back.
//
// Writing a row back gives it a new id (ids are never reused); a load's report does not
// depend on ids.

// dryCarry is what the rolled-back batches of a dry-run load changed.
type dryCarry struct {
	rows   map[string]*carriedRow
	tables map[string][][]any
	// byWord indexes rows by the words they hold.
	byWord map[string][]string
	// replayed are the rows written back in the current batch.
	replayed map[string]bool
	// stuck is set once the carry would be too large (see full).
	stuck bool
}

// carriedRow is the final state of an instance after the batches so far.
type carriedRow struct {
	classname, keyname string
	present            bool
	displayname        string
	enabled            bool
	data, created      string
	updated            string
}

// maxDryCarry bounds the rows a dry run keeps in memory. A batch that would carry
// more (a schema change rewriting a large class) keeps the rest of the dry run in its
// own transaction instead, holding the writer as a single transaction does.
var maxDryCarry = 200000

// full reports whether carrying the current batch would exceed maxDryCarry; once it
// does, it keeps reporting so.
func (c *dryCarry) full(ctx context.Context, tx *Tx) bool {
	if c.stuck {
		return true
	}
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM temp.dry_touched").Scan(&n); err != nil || len(c.rows)+n > maxDryCarry {
		c.stuck = true
	}
	return c.stuck
}

// dryTables are the definition tables a dry run carries whole, in the order they are
// written back.
var dryTables = []string{"permissions", "schemas", "schema_fields"}

func newDryCarry() *dryCarry {
	return &dryCarry{rows: map[string]*carriedRow{}, tables: map[string][][]any{}, byWord: map[string][]string{}}
}

// start writes back the carried tables and built-in rows, then records what the batch
// changes from here on (temporary triggers, dropped with the rollback).
func (c *dryCarry) start(ctx context.Context, tx *Tx) error {
	c.replayed = map[string]bool{}
	if len(c.tables) > 0 {
		for i := len(dryTables) - 1; i >= 0; i-- {
			if _, ok := c.tables[dryTables[i]]; ok {
				if _, err := tx.ExecContext(ctx, "DELETE FROM main."+dryTables[i]); err != nil {
					return fmt.Errorf("dry run: %w", err)
				}
			}
		}
		for _, name := range dryTables {
			rows, ok := c.tables[name]
			if !ok {
				continue
			}
			for _, r := range rows {
				q := "INSERT INTO main." + name + " VALUES(?" + strings.Repeat(", ?", len(r)-1) + ")"
				if _, err := tx.ExecContext(ctx, q, r...); err != nil {
					return fmt.Errorf("dry run: %w", err)
				}
			}
		}
		tx.schemasChanged()
	}
	for k, r := range c.rows {
		if strings.HasPrefix(r.classname, "_") {
			if err := c.replay(ctx, tx, k); err != nil {
				return err
			}
		}
	}
	stmts := []string{
		`CREATE TEMP TABLE dry_touched(classname TEXT NOT NULL, keyname TEXT NOT NULL, PRIMARY KEY(classname, keyname)) WITHOUT ROWID`,
		`CREATE TEMP TABLE dry_tables(name TEXT PRIMARY KEY) WITHOUT ROWID`,
		`CREATE TEMP TRIGGER dry_instances_insert AFTER INSERT ON main.instances BEGIN ` + touch("NEW") + ` END`,
		`CREATE TEMP TRIGGER dry_instances_delete AFTER DELETE ON main.instances BEGIN ` + touch("OLD") + ` END`,
		`CREATE TEMP TRIGGER dry_instances_update AFTER UPDATE ON main.instances BEGIN ` + touch("OLD") + touch("NEW") + ` END`,
	}
	for _, name := range dryTables {
		for _, ev := range []string{"INSERT", "UPDATE", "DELETE"} {
			stmts = append(stmts, fmt.Sprintf(`CREATE TEMP TRIGGER dry_%s_%s AFTER %s ON main.%s BEGIN
				INSERT INTO dry_tables SELECT '%[4]s' WHERE NOT EXISTS (SELECT 1 FROM dry_tables WHERE name = '%[4]s'); END`,
				name, strings.ToLower(ev), ev, name))
		}
	}
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("dry run: %w", err)
		}
	}
	return nil
}

// touch is the trigger statement recording row's class and keyname (an outer
// statement's conflict clause would override an OR IGNORE here).
func touch(row string) string {
	return fmt.Sprintf(`INSERT INTO dry_touched SELECT %[1]s.classname, %[1]s.keyname WHERE NOT EXISTS
		(SELECT 1 FROM dry_touched WHERE classname = %[1]s.classname AND keyname = %[1]s.keyname);`, row)
}

// before writes back the carried rows entry e may see.
func (c *dryCarry) before(ctx context.Context, tx *Tx, e *Entry) error {
	if e.Classname == "_schema" {
		for k := range c.rows {
			if err := c.replay(ctx, tx, k); err != nil {
				return err
			}
		}
		return nil
	}
	words := map[string]bool{}
	addWords(words, e.Keyname)
	addWords(words, e.Displayname)
	for _, v := range e.Fields {
		walkText(v, func(s string) { addWords(words, s) })
	}
	for w := range words {
		for _, k := range c.byWord[w] {
			if err := c.replay(ctx, tx, k); err != nil {
				return err
			}
		}
	}
	return nil
}

// replay writes the carried state of row k back, once per batch.
func (c *dryCarry) replay(ctx context.Context, tx *Tx, k string) error {
	if c.replayed[k] {
		return nil
	}
	c.replayed[k] = true
	r := c.rows[k]
	if _, err := tx.ExecContext(ctx, "DELETE FROM instances WHERE classname = ? AND keyname = ?", r.classname, r.keyname); err != nil {
		return fmt.Errorf("dry run: %w", err)
	}
	if !r.present {
		return nil
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO instances(id, classname, keyname, displayname, is_enabled, data, created_at, updated_at)
		VALUES(`+nextInstanceID+`, ?, ?, ?, ?, ?, ?, ?)`, r.classname, r.keyname, r.displayname, r.enabled, r.data, r.created, r.updated)
	if err != nil {
		return fmt.Errorf("dry run: %w", err)
	}
	return nil
}

// capture remembers what the batch changed; the caller then rolls it back.
func (c *dryCarry) capture(ctx context.Context, tx *Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT t.classname, t.keyname, i.id IS NOT NULL, coalesce(i.displayname, ''),
		coalesce(i.is_enabled, 0), coalesce(i.data, ''), coalesce(i.created_at, ''), coalesce(i.updated_at, '')
		FROM temp.dry_touched t LEFT JOIN main.instances i ON i.classname = t.classname AND i.keyname = t.keyname`)
	if err != nil {
		return fmt.Errorf("dry run: %w", err)
	}
	var got []*carriedRow
	for rows.Next() {
		r := &carriedRow{}
		if err := rows.Scan(&r.classname, &r.keyname, &r.present, &r.displayname, &r.enabled, &r.data, &r.created, &r.updated); err != nil {
			rows.Close()
			return fmt.Errorf("dry run: %w", err)
		}
		got = append(got, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("dry run: %w", err)
	}
	for _, r := range got {
		k := r.classname + "\x00" + r.keyname
		if _, ok := c.rows[k]; !ok {
			words := map[string]bool{}
			addWords(words, r.keyname)
			for w := range words {
				c.byWord[w] = append(c.byWord[w], k)
			}
		}
		// Words of the new state are added; stale words only cause an extra write-back.
		words := map[string]bool{}
		addWords(words, r.displayname)
		var data any
		if r.data != "" && json.Unmarshal([]byte(r.data), &data) == nil {
			walkText(data, func(s string) { addWords(words, s) })
		}
		for w := range words {
			if !containsKey(c.byWord[w], k) {
				c.byWord[w] = append(c.byWord[w], k)
			}
		}
		c.rows[k] = r
	}
	var names []string
	if err := scanStrings(ctx, tx, "SELECT name FROM temp.dry_tables", &names); err != nil {
		return err
	}
	for _, name := range names {
		table, err := dumpTable(ctx, tx, name)
		if err != nil {
			return err
		}
		c.tables[name] = table
	}
	return nil
}

func containsKey(list []string, k string) bool {
	for _, x := range list {
		if x == k {
			return true
		}
	}
	return false
}

func scanStrings(ctx context.Context, tx *Tx, q string, out *[]string) error {
	rows, err := tx.QueryContext(ctx, q)
	if err != nil {
		return fmt.Errorf("dry run: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return fmt.Errorf("dry run: %w", err)
		}
		*out = append(*out, s)
	}
	return rows.Err()
}

// dumpTable reads every row of a definition table, columns in table order.
func dumpTable(ctx context.Context, tx *Tx, name string) ([][]any, error) {
	rows, err := tx.QueryContext(ctx, "SELECT * FROM main."+name)
	if err != nil {
		return nil, fmt.Errorf("dry run: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, fmt.Errorf("dry run: %w", err)
	}
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("dry run: %w", err)
		}
		out = append(out, vals)
	}
	return out, rows.Err()
}

// addWords adds s, its lower case and, for a dotted IPv4 address, its hexip keyname.
func addWords(words map[string]bool, s string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return
	}
	words[s] = true
	words[strings.ToLower(s)] = true
	if IsDottedIPv4(s) {
		if h, err := HexIP(s); err == nil {
			words[h] = true
		}
	}
}

// walkText calls fn with every scalar of v as text.
func walkText(v any, fn func(string)) {
	switch x := v.(type) {
	case string:
		fn(x)
	case []any:
		for _, y := range x {
			walkText(y, fn)
		}
	case map[string]any:
		for _, y := range x {
			walkText(y, fn)
		}
	case float64:
		fn(strconv.FormatFloat(x, 'f', -1, 64))
	case int:
		fn(strconv.Itoa(x))
	case int64:
		fn(strconv.FormatInt(x, 10))
	case bool:
		fn(strconv.FormatBool(x))
	case nil:
	default:
		fn(fmt.Sprint(x))
	}
}
