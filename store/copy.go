package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// CopiedTable is one table a Copy moved: its rows and their checksum, read the same
// way from the source and from the target.
type CopiedTable struct {
	Name string
	Rows int64
	// Sum is the checksum of the table's rows (tableSum).
	Sum string
}

// ErrTargetNotEmpty is the error of a Copy into a database that holds data.
var ErrTargetNotEmpty = errors.New("the target database is not empty")

// copyFirst are the tables copied first, in this order (schema_fields refers to
// schemas); copyLast the bookkeeping tables the layout's triggers keep while
// instances and configuration are written, copied after them so the source's rows
// replace what the triggers wrote. Every other table of both engines' layouts and
// every owner's table comes in between, in name order.
var (
	copyFirst = []string{"registry", "configuration", "permissions", "schemas", "schema_fields", "instances", "revisions", "sessions"}
	copyLast  = []string{"schema_generation", "instance_counts", "instance_ids", "ipam_blocks"}
)

// copySkip are the tables Copy leaves out: nodes records the processes serving the
// source (their heartbeats and versions), which do not serve the target; copied, a
// recent heartbeat would make the target's first node wait for or refuse a node that
// is not there.
var copySkip = []string{"nodes"}

// copyRowOrder is the column an engine keeps a table's insertion order in where the
// table has no id (the task queue): not copied, as the target numbers the rows
// again in the order they are inserted, which is the source's order.
const copyRowOrder = "row_order"

// copyBatch bounds the rows of one INSERT (and the parameters: at most 32766).
const copyBatch = 500

// Copy copies the whole database src into dst: every table of the layout (registry,
// configuration, schemas and fields, permissions, instances with their ids,
// revisions, sessions, the bookkeeping tables) and every registered owner's table,
// rows streamed from one read snapshot of src (which is never written) and inserted
// in batches in one write transaction of dst. It refuses a dst holding any row of
// the tables a service writes (ErrTargetNotEmpty, naming them). Before committing,
// it reads every copied table of dst back and compares its row count and checksum
// with the source's; any failure rolls the whole copy back, leaving dst as empty as
// it was. Identity columns (PostgreSQL) are set past the copied ids. progress, when
// not nil, is called after each table.
func Copy(ctx context.Context, src, dst *DB, progress func(CopiedTable)) ([]CopiedTable, error) {
	if src.addr == dst.addr {
		return nil, fmt.Errorf("copy: source and target are the same database")
	}
	tables := copyTables()
	rtx, err := src.BeginRead(ctx)
	if err != nil {
		return nil, fmt.Errorf("copy: read the source: %w", err)
	}
	defer rtx.Rollback()
	wtx, err := dst.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("copy: write the target: %w", err)
	}
	defer wtx.Rollback()
	if err := checkEmptyTarget(ctx, wtx, tables); err != nil {
		return nil, err
	}
	var done []CopiedTable
	for _, table := range tables {
		ct, err := copyTable(ctx, rtx, wtx, table)
		if err != nil {
			return nil, fmt.Errorf("copy %s: %w", table, err)
		}
		done = append(done, ct)
	}
	if dst.dia.resetIdentities != nil {
		if err := dst.dia.resetIdentities(ctx, wtx); err != nil {
			return nil, fmt.Errorf("copy: set identity sequences: %w", err)
		}
	}
	// Verify what the target holds, in the same transaction: a mismatch rolls back.
	for _, want := range done {
		cols, err := copyColumns(ctx, rtx, wtx, want.Name)
		if err != nil {
			return nil, fmt.Errorf("verify %s: %w", want.Name, err)
		}
		got, err := tableSum(ctx, wtx, want.Name, cols, "", nil)
		if err != nil {
			return nil, fmt.Errorf("verify %s: %w", want.Name, err)
		}
		if got.Rows != want.Rows || got.Sum != want.Sum {
			return nil, fmt.Errorf("verify %s: the source has %d rows (checksum %s), the target %d (checksum %s): nothing was copied",
				want.Name, want.Rows, want.Sum, got.Rows, got.Sum)
		}
		if progress != nil {
			progress(got)
		}
	}
	if err := wtx.Commit(); err != nil {
		return nil, fmt.Errorf("copy: commit: %w", err)
	}
	return done, nil
}

// copyTables are the tables Copy moves, in copy order: the tables both engines'
// layouts create (not the layout's own version tables, nor an engine's index
// tables), then every registered owner's.
func copyTables() []string {
	inAll := map[string]int{}
	for _, d := range dialects {
		seen := map[string]bool{}
		for _, step := range d.layout {
			for _, m := range createTable.FindAllStringSubmatch(step, -1) {
				if m[1] == "" && !seen[m[2]] {
					seen[m[2]] = true
					inAll[m[2]]++
				}
			}
		}
	}
	var middle []string
	for name, n := range inAll {
		if n == len(dialects) && name != "layout_version" && !slices.Contains(copySkip, name) && !slices.Contains(copyFirst, name) && !slices.Contains(copyLast, name) {
			middle = append(middle, name)
		}
	}
	owners, _ := ownedLayouts()
	for _, o := range owners {
		if !slices.Contains(middle, o) {
			middle = append(middle, o)
		}
	}
	sort.Strings(middle)
	return slices.Concat(copyFirst, middle, copyLast)
}

// copyEmptyExempt are the tables a new database's layout or first open fills itself
// (a row counter, the built-in permission the layout adds, the database's salt):
// they do not make a target non-empty, and Copy replaces their rows with the
// source's.
var copyEmptyExempt = []string{"permissions", "schema_generation", "instance_ids", "node_salt"}

// codeClassRows are the tables where a new layout writes rows of its own, the
// built-in classes the code adds (CodeClasses), by the column naming the class: those
// rows do not make a target non-empty either, and Copy replaces them too.
var codeClassRows = map[string]string{"schemas": "keyname", "schema_fields": "classname"}

// checkEmptyTarget refuses a target holding rows in any table Copy moves, besides
// the rows a new layout writes.
func checkEmptyTarget(ctx context.Context, tx *Tx, tables []string) error {
	var full []string
	for _, t := range tables {
		if slices.Contains(copyEmptyExempt, t) {
			continue
		}
		q := "SELECT count(*) FROM " + t
		if col, ok := codeClassRows[t]; ok {
			q += " WHERE " + col + " NOT IN ('" + strings.Join(CodeClasses(), "', '") + "')"
		}
		var n int64
		if err := tx.queryRowContext(ctx, q).Scan(&n); err != nil {
			return fmt.Errorf("copy: count the target's %s: %w", t, err)
		}
		if n > 0 {
			full = append(full, fmt.Sprintf("%s: %d rows", t, n))
		}
	}
	if len(full) > 0 {
		return fmt.Errorf("copy refused: %w (%s): copy into a new, empty database", ErrTargetNotEmpty, strings.Join(full, ", "))
	}
	return nil
}

// copyColumns are the columns of table copied: the source's, each of which the
// target must have; the engine's insertion-order column is left out (the target
// numbers its rows itself).
func copyColumns(ctx context.Context, src, dst *Tx, table string) ([]string, error) {
	have, err := tableColumns(ctx, src, table)
	if err != nil {
		return nil, fmt.Errorf("read the source's columns: %w", err)
	}
	want, err := tableColumns(ctx, dst, table)
	if err != nil {
		return nil, fmt.Errorf("read the target's columns: %w", err)
	}
	var cols []string
	for _, c := range have {
		if c == copyRowOrder {
			continue
		}
		if !slices.Contains(want, c) {
			return nil, fmt.Errorf("the target has no column %s (is its layout older than the source's?)", c)
		}
		cols = append(cols, c)
	}
	return cols, nil
}

// tableColumns are the column names of table, as a query returns them.
func tableColumns(ctx context.Context, tx *Tx, table string) ([]string, error) {
	rows, err := tx.queryContext(ctx, "SELECT * FROM "+table+" WHERE 1 = 0")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	for i := range cols {
		cols[i] = strings.ToLower(cols[i])
	}
	return cols, rows.Err()
}

// copyTable streams table's rows from src into dst, replacing what dst held (the
// rows a new layout or its triggers wrote), and returns the source's count and
// checksum.
func copyTable(ctx context.Context, src, dst *Tx, table string) (CopiedTable, error) {
	cols, err := copyColumns(ctx, src, dst, table)
	if err != nil {
		return CopiedTable{}, err
	}
	if _, err := dst.execContext(ctx, "DELETE FROM "+table); err != nil {
		return CopiedTable{}, fmt.Errorf("clear the target's rows: %w", err)
	}
	if deltas, ok := dst.db.dia.countDeltas[table]; ok {
		// What the triggers noted while the instances were copied: the source's
		// counts replace it.
		if _, err := dst.execContext(ctx, "DELETE FROM "+deltas); err != nil {
			return CopiedTable{}, fmt.Errorf("clear the target's rows: %w", err)
		}
	}
	// Ids in order, so an engine numbering new rows past the last id keeps doing so;
	// a table without one in the source's insertion order (the queue's order).
	order := ""
	srcCols, _ := tableColumns(ctx, src, table)
	dstCols, _ := tableColumns(ctx, dst, table)
	switch {
	case slices.Contains(cols, "id"):
		order = "id"
	case slices.Contains(srcCols, copyRowOrder) || slices.Contains(dstCols, copyRowOrder):
		order = src.db.dia.rowOrder
	}
	rebuild := func() error { return nil }
	if dst.db.dia.deferIndexes != nil {
		if rebuild, err = dst.db.dia.deferIndexes(ctx, dst, table); err != nil {
			return CopiedTable{}, err
		}
	}
	b := &copyBatcher{ctx: ctx, tx: dst, table: table, cols: cols}
	ct, err := tableSum(ctx, src, table, cols, order, b.add)
	if err != nil {
		return CopiedTable{}, err
	}
	if err := b.flush(); err != nil {
		return CopiedTable{}, err
	}
	return ct, rebuild()
}

// copyBatcher collects rows and inserts them a batch at a time.
type copyBatcher struct {
	ctx   context.Context
	tx    *Tx
	table string
	cols  []string
	args  []any
	n     int
}

func (b *copyBatcher) add(row []any) error {
	b.args = append(b.args, row...)
	b.n++
	if b.n >= copyBatch {
		return b.flush()
	}
	return nil
}

func (b *copyBatcher) flush() error {
	if b.n == 0 {
		return nil
	}
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(b.cols)), ", ") + ")"
	q := "INSERT INTO " + b.table + "(" + strings.Join(b.cols, ", ") + ") VALUES " +
		strings.TrimSuffix(strings.Repeat(one+", ", b.n), ", ")
	if _, err := b.tx.execContext(b.ctx, q, b.args...); err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	b.args, b.n = b.args[:0], 0
	return nil
}

// tableSum reads table's columns cols (in order, when order is not empty; a
// maintained table's rows as the engine's fold gives them) and returns the row count
// and the checksum of the rows, passing each row (its values as the target takes
// them) to each when not nil. The checksum is the sum, lane by
// lane modulo 2^64, of a SHA-256 of every row's values in a form both engines read
// alike (integers as decimal text, text as text, NULL distinct from every text):
// it does not depend on the order the rows come in, which an engine's collation
// decides for text keys.
func tableSum(ctx context.Context, tx *Tx, table string, cols []string, order string, each func([]any) error) (CopiedTable, error) {
	// A maintained table's counts as the next commit's fold would leave them.
	from := table
	if q, ok := tx.db.dia.foldedRead[table]; ok {
		from = "(" + q + ") AS " + table
	}
	q := "SELECT " + strings.Join(cols, ", ") + " FROM " + from
	if order != "" {
		q += " ORDER BY " + order
	}
	rows, err := tx.queryContext(ctx, q)
	if err != nil {
		return CopiedTable{}, fmt.Errorf("read: %w", err)
	}
	defer rows.Close()
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var lanes [4]uint64
	var n int64
	var buf []byte
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return CopiedTable{}, fmt.Errorf("read: %w", err)
		}
		buf = buf[:0]
		row := make([]any, len(cols))
		for i, v := range vals {
			var enc string
			row[i], enc, err = copyValue(v)
			if err != nil {
				return CopiedTable{}, fmt.Errorf("column %s: %w", cols[i], err)
			}
			buf = binary.AppendUvarint(buf, uint64(len(enc)))
			buf = append(buf, enc...)
		}
		h := sha256.Sum256(buf)
		for i := range lanes {
			lanes[i] += binary.BigEndian.Uint64(h[i*8:])
		}
		n++
		if each != nil {
			if err := each(row); err != nil {
				return CopiedTable{}, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return CopiedTable{}, fmt.Errorf("read: %w", err)
	}
	var sum []byte
	for _, l := range lanes {
		sum = binary.BigEndian.AppendUint64(sum, l)
	}
	return CopiedTable{Name: table, Rows: n, Sum: hex.EncodeToString(sum[:16])}, nil
}

// copyValue is a value as read, as the target takes it (text as a string, even
// where a driver gives bytes) and in the checksum's form: "n" for NULL, "i" and the
// decimal digits for an integer, "s" and the text for text.
func copyValue(v any) (any, string, error) {
	switch x := v.(type) {
	case nil:
		return nil, "n", nil
	case int64:
		return x, "i" + strconv.FormatInt(x, 10), nil
	case int32:
		return int64(x), "i" + strconv.FormatInt(int64(x), 10), nil
	case bool:
		if x {
			return int64(1), "i1", nil
		}
		return int64(0), "i0", nil
	case float64:
		return x, "f" + strconv.FormatFloat(x, 'g', -1, 64), nil
	case string:
		return x, "s" + x, nil
	case []byte:
		return string(x), "s" + string(x), nil
	default:
		return nil, "", fmt.Errorf("a value of type %T, which no table of the layout holds", v)
	}
}
