package store

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
)

// RestorePostgres replaces the contents of the PostgreSQL database at addr with the
// pg_dump archive file, reading only its data: nothing in the archive is sent to the
// server as SQL (archive_postgres.go). The layout (tables, indexes, functions,
// triggers) is this program's own, at the version the archive records: in one
// transaction the service's current objects are dropped, the layout steps up to the
// archive's version are run, the archive's rows are loaded with COPY (the layout's
// triggers off meanwhile) and its identity sequences set, the heartbeat rows of the
// archive's nodes deleted, and the result checked as every open checks it. It runs
// under the start-up lock and refuses while any other session is connected to the
// database, checked before it starts and again before it commits (stop every node
// first). The current contents are first dumped to keep (a path that must not exist),
// which is removed again when the restore is refused, as nothing was changed.
func RestorePostgres(ctx context.Context, addr, file, keep string) error {
	for _, tool := range []string{"pg_dump", "pg_restore"} {
		if _, err := postgresTool(tool); err != nil {
			return err
		}
	}
	v := &archiveVersions{owners: map[string]int{}}
	if err := readArchive(ctx, file, v, "layout_version", "layout_versions"); err != nil {
		return fmt.Errorf("restore refused (nothing was changed): %w", err)
	}
	if err := v.check(); err != nil {
		return fmt.Errorf("restore refused (nothing was changed): %w", err)
	}
	if err := checkArchiveEntries(ctx, file, layoutSteps()); err != nil {
		return fmt.Errorf("restore refused (nothing was changed): %w", err)
	}
	pool, err := openPostgresPool(postgresDSN(addr, false))
	if err != nil {
		return fmt.Errorf("open database %s: %w", RedactURL(addr), err)
	}
	defer pool.Close()
	c, err := pool.Conn(ctx)
	if err != nil {
		return fmt.Errorf("open database %s: %w", RedactURL(addr), redactErr(err, addr))
	}
	defer c.Close()
	// The start-up lock, on this session, for the whole restore: a node starting
	// meanwhile waits for it (and is seen connected before the commit).
	var got bool
	if err := c.QueryRowContext(ctx, "SELECT pg_try_advisory_lock("+startupLockKey+")").Scan(&got); err != nil {
		return fmt.Errorf("open database %s: %w", RedactURL(addr), redactErr(err, addr))
	}
	if !got {
		return fmt.Errorf("refused: a node is running its start-up sequence on the database %s: stop every node first", RedactURL(addr))
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.ExecContext(uctx, "SELECT pg_advisory_unlock("+startupLockKey+")")
	}()
	if err := noOtherSessions(ctx, c, addr); err != nil {
		return err
	}
	if err := dumpPostgres(ctx, addr, keep); err != nil {
		return fmt.Errorf("keep the current database: %w", err)
	}
	if err := restoreArchive(ctx, c, addr, file, v); err != nil {
		os.Remove(keep)
		return fmt.Errorf("restore refused (nothing was changed): %w", redactErr(err, addr))
	}
	return nil
}

// noOtherSessions refuses while a session other than c's is connected to the
// database.
func noOtherSessions(ctx context.Context, c *sql.Conn, addr string) error {
	var others int
	err := c.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&others)
	if err != nil {
		return fmt.Errorf("open database %s: %w", RedactURL(addr), redactErr(err, addr))
	}
	if others > 0 {
		return fmt.Errorf("refused: %d other sessions are connected to the database %s: stop every node first", others, RedactURL(addr))
	}
	return nil
}

// check refuses versions this program cannot make: none recorded (not the service's
// archive), store's or an owner's newer than the program knows, or an owner the
// program does not have.
func (v *archiveVersions) check() error {
	if !v.seen || v.store == 0 {
		return fmt.Errorf("the archive holds no layout_version row: not a dataservice database")
	}
	if v.store > len(postgresLayout) {
		return fmt.Errorf("the archive's table layout version %d is newer than this program knows (%d): restore it with that release", v.store, len(postgresLayout))
	}
	_, steps := ownedLayouts()
	for owner, n := range v.owners {
		s, ok := steps[owner]
		if !ok {
			return fmt.Errorf("the archive records the tables of %s, which this program does not have", clipLine(owner))
		}
		if n > len(s) {
			return fmt.Errorf("the archive's table layout version %d of %s is newer than this program knows (%d)", n, owner, len(s))
		}
	}
	return nil
}

// createFunction finds the functions a layout step creates.
var createFunction = regexp.MustCompile(`(?i)\bCREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+([A-Za-z_][A-Za-z0-9_]*)`)

// layoutNames are the tables (or functions, with re = createFunction) the steps
// create.
func layoutNames(re *regexp.Regexp, steps ...string) []string {
	var names []string
	for _, s := range steps {
		for _, m := range re.FindAllStringSubmatch(s, -1) {
			if n := strings.ToLower(m[len(m)-1]); !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	return names
}

// restoreBeforeCommit is called, when not nil, just before a restore checks for
// other sessions a last time and commits: the tests connect a session there.
var restoreBeforeCommit func()

// layoutSteps are all the layout steps this program knows, store's and every
// owner's, with the owners' version table.
func layoutSteps() []string {
	owners, steps := ownedLayouts()
	all := slices.Clone(postgresLayout)
	for _, o := range owners {
		all = append(all, steps[o]...)
	}
	return append(all, postgresDialect.layoutVersionsTable)
}

// restoreArchive is the restore's one transaction on c.
func restoreArchive(ctx context.Context, c *sql.Conn, addr, file string, v *archiveVersions) (err error) {
	if _, err := c.ExecContext(ctx, "BEGIN"); err != nil {
		return err
	}
	committed := false
	defer func() {
		if !committed {
			rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c.ExecContext(rctx, "ROLLBACK")
		}
	}()
	q := conn{c, postgresDialect}
	// A session that appeared meanwhile and holds a lock on a table: fail rather
	// than wait without end.
	if _, err := c.ExecContext(ctx, "SET LOCAL lock_timeout = '60s'"); err != nil {
		return err
	}
	all := layoutSteps()
	// The service's current objects, whatever its layout version: its tables (their
	// indexes and triggers go with them) and functions.
	for _, t := range layoutNames(createTable, all...) {
		if _, err := c.ExecContext(ctx, "DROP TABLE IF EXISTS "+quoteIdent(t)+" CASCADE"); err != nil {
			return fmt.Errorf("drop the current table %s: %w", t, err)
		}
	}
	for _, f := range layoutNames(createFunction, all...) {
		if _, err := c.ExecContext(ctx, "DROP FUNCTION IF EXISTS "+quoteIdent(f)+" CASCADE"); err != nil {
			return fmt.Errorf("drop the current function %s: %w", f, err)
		}
	}
	owners, steps := ownedLayouts()
	// The layout at the archive's versions, in the order a migration runs it:
	// owners first (store's first step alters the task queue's table).
	var made []string
	for _, o := range owners {
		n := v.owners[o]
		if n == 0 {
			continue
		}
		if _, err := q.execContext(ctx, postgresDialect.layoutVersionsTable); err != nil {
			return fmt.Errorf("layout of %s: %w", o, err)
		}
		for i, step := range steps[o][:n] {
			if _, err := q.execContext(ctx, step); err != nil {
				return fmt.Errorf("layout %d of %s: %w", i+1, o, err)
			}
		}
		if _, err := q.execContext(ctx, `INSERT INTO layout_versions(owner, version) VALUES(?, ?)`, o, n); err != nil {
			return fmt.Errorf("layout of %s: %w", o, err)
		}
		made = append(made, steps[o][:n]...)
		made = append(made, postgresDialect.layoutVersionsTable)
	}
	for i, step := range postgresLayout[:v.store] {
		if _, err := q.execContext(ctx, step); err != nil {
			return fmt.Errorf("layout %d: %w", i+1, err)
		}
	}
	if _, err := q.execContext(ctx, postgresDialect.setLayoutVersion(v.store)); err != nil {
		return fmt.Errorf("layout %d: %w", v.store, err)
	}
	made = append(made, postgresLayout[:v.store]...)
	l, err := newArchiveLoader(ctx, c, layoutNames(createTable, made...))
	if err != nil {
		return err
	}
	if err := readArchive(ctx, file, l); err != nil {
		return err
	}
	if err := l.finish(); err != nil {
		return err
	}
	// The heartbeat rows the archive holds name the nodes of the database it was
	// taken from: none serves this one.
	if slices.Contains(l.tables, "nodes") {
		if _, err := c.ExecContext(ctx, "DELETE FROM nodes"); err != nil {
			return fmt.Errorf("forget the nodes the backup records: %w", err)
		}
	}
	if err := v.same(ctx, q); err != nil {
		return err
	}
	// What the layout made, checked as every open checks a database.
	if err := checkPostgresSchema(ctx, c); err != nil {
		return fmt.Errorf("the restored database would be refused: %w", err)
	}
	if err := checkRestoredLayout(ctx, c); err != nil {
		return err
	}
	if restoreBeforeCommit != nil {
		restoreBeforeCommit()
	}
	if err := noOtherSessions(ctx, c, addr); err != nil {
		return err
	}
	if _, err := c.ExecContext(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	committed = true
	return nil
}

// same refuses a restored database whose layout versions (the archive's rows of
// its version tables, loaded) differ from those the restore made.
func (v *archiveVersions) same(ctx context.Context, q conn) error {
	have, err := postgresLayoutVersion(ctx, q)
	if err != nil {
		return fmt.Errorf("read the restored layout version: %w", err)
	}
	if have != v.store {
		return fmt.Errorf("%w: its layout_version rows changed between two reads (%d, then %d)", ErrArchiveRefused, v.store, have)
	}
	owners, _ := ownedLayouts()
	for _, o := range owners {
		n, err := ownedVersion(ctx, q, o)
		if err != nil {
			return err
		}
		if n != v.owners[o] {
			return fmt.Errorf("%w: its layout version rows of %s changed between two reads (%d, then %d)", ErrArchiveRefused, o, v.owners[o], n)
		}
	}
	return nil
}

// checkRestoredLayout refuses a restored database whose layout is newer than this
// program's.
func checkRestoredLayout(ctx context.Context, r sqlRunner) error {
	have, err := postgresLayoutVersion(ctx, conn{r, postgresDialect})
	if err != nil {
		return fmt.Errorf("read the restored layout version: %w", err)
	}
	if have > len(postgresLayout) {
		return fmt.Errorf("the restored table layout version %d is newer than this program knows (%d)", have, len(postgresLayout))
	}
	return nil
}

// archiveLoader loads an archive's rows into the tables the restore made, in its
// transaction on c: each table's rows replace the layout's (a new layout's own
// rows), with COPY statements the store builds from the layout's names.
type archiveLoader struct {
	ctx    context.Context
	c      *sql.Conn
	tables []string
	// cols are the columns of each table, seqs the oids of the identity columns'
	// sequences by name.
	cols   map[string][]string
	seqs   map[string]int64
	loaded map[string]bool
	// fks are the foreign keys, dropped while loading (the archive's tables come in
	// name order, a key's rows perhaps after the rows referring to them) and added
	// again after, which checks every row.
	fks [][3]string
}

func newArchiveLoader(ctx context.Context, c *sql.Conn, tables []string) (*archiveLoader, error) {
	l := &archiveLoader{ctx: ctx, c: c, tables: tables, cols: map[string][]string{}, seqs: map[string]int64{}, loaded: map[string]bool{}}
	err := l.each(`SELECT c.relname, a.attname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped ORDER BY c.relname, a.attnum`,
		func(r []string) {
			if slices.Contains(tables, r[0]) {
				l.cols[r[0]] = append(l.cols[r[0]], r[1])
			}
		})
	if err != nil {
		return nil, fmt.Errorf("read the layout's columns: %w", err)
	}
	err = l.each(`SELECT s.relname, CAST(s.oid AS bigint), t.relname FROM pg_class s
		JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = s.oid AND d.deptype = 'i'
		JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
		JOIN pg_class t ON t.oid = a.attrelid JOIN pg_namespace n ON n.oid = s.relnamespace
		WHERE n.nspname = current_schema() AND s.relkind = 'S' AND a.attidentity <> ''`,
		func(r []string) {
			var oid int64
			if _, err := fmt.Sscan(r[1], &oid); err == nil && slices.Contains(tables, r[2]) {
				l.seqs[r[0]] = oid
			}
		})
	if err != nil {
		return nil, fmt.Errorf("read the layout's sequences: %w", err)
	}
	err = l.each(`SELECT k.conname, t.relname, pg_get_constraintdef(k.oid) FROM pg_constraint k
		JOIN pg_class t ON t.oid = k.conrelid JOIN pg_namespace n ON n.oid = t.relnamespace
		WHERE n.nspname = current_schema() AND k.contype = 'f' ORDER BY 1`,
		func(r []string) {
			if slices.Contains(tables, r[1]) {
				l.fks = append(l.fks, [3]string{r[0], r[1], r[2]})
			}
		})
	if err != nil {
		return nil, fmt.Errorf("read the layout's foreign keys: %w", err)
	}
	for _, fk := range l.fks {
		if _, err := c.ExecContext(ctx, "ALTER TABLE "+quoteIdent(fk[1])+" DROP CONSTRAINT "+quoteIdent(fk[0])); err != nil {
			return nil, fmt.Errorf("load: %w", err)
		}
	}
	// The layout's triggers would count the rows again (the archive holds the
	// counts) and refuse instance ids below the recorded high-water mark.
	for _, t := range tables {
		if _, err := c.ExecContext(ctx, "ALTER TABLE "+quoteIdent(t)+" DISABLE TRIGGER USER"); err != nil {
			return nil, fmt.Errorf("load: %w", err)
		}
	}
	return l, nil
}

// each runs a catalog query on the restore's connection, passing each row's values
// as text.
func (l *archiveLoader) each(query string, f func([]string)) error {
	rows, err := l.c.QueryContext(l.ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	vals := make([]string, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		f(slices.Clone(vals))
	}
	return rows.Err()
}

func (l *archiveLoader) copyRows(table string, cols []string, data io.Reader) error {
	have, ok := l.cols[table]
	if !ok {
		return fmt.Errorf("%w: rows of the table %s, which the service's layout at the archive's version does not have", ErrArchiveRefused, clipLine(table))
	}
	if l.loaded[table] {
		return fmt.Errorf("%w: a second set of rows of the table %s", ErrArchiveRefused, table)
	}
	l.loaded[table] = true
	quoted := make([]string, len(cols))
	for i, col := range cols {
		if !slices.Contains(have, col) {
			return fmt.Errorf("%w: rows of the table %s for a column %s it does not have", ErrArchiveRefused, table, clipLine(col))
		}
		if slices.Contains(cols[:i], col) {
			return fmt.Errorf("%w: rows of the table %s naming the column %s twice", ErrArchiveRefused, table, col)
		}
		quoted[i] = quoteIdent(col)
	}
	if _, err := l.c.ExecContext(l.ctx, "DELETE FROM "+quoteIdent(table)); err != nil {
		return fmt.Errorf("clear the layout's rows: %w", err)
	}
	stmt := "COPY " + quoteIdent(table) + " (" + strings.Join(quoted, ", ") + ") FROM STDIN"
	return l.c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("not a pgx connection: %T", dc)
		}
		_, err := sc.Conn().PgConn().CopyFrom(l.ctx, data, stmt)
		return err
	})
}

func (l *archiveLoader) setSequence(seq string, value int64, called bool) error {
	oid, ok := l.seqs[seq]
	if !ok {
		return fmt.Errorf("%w: the value of the sequence %s, which is no identity column's of the service's layout", ErrArchiveRefused, clipLine(seq))
	}
	var n int64
	if err := l.c.QueryRowContext(l.ctx, "SELECT setval(CAST(CAST($1 AS bigint) AS oid), $2, $3)", oid, value, called).Scan(&n); err != nil {
		return err
	}
	return nil
}

// finish adds the foreign keys again (checking every loaded row) and turns the
// triggers back on.
func (l *archiveLoader) finish() error {
	for _, fk := range l.fks {
		if _, err := l.c.ExecContext(l.ctx, "ALTER TABLE "+quoteIdent(fk[1])+" ADD CONSTRAINT "+quoteIdent(fk[0])+" "+fk[2]); err != nil {
			return fmt.Errorf("%w: its rows of %s break the key %s: %w", ErrArchiveRefused, fk[1], fk[0], err)
		}
	}
	for _, t := range l.tables {
		if _, err := l.c.ExecContext(l.ctx, "ALTER TABLE "+quoteIdent(t)+" ENABLE TRIGGER USER"); err != nil {
			return fmt.Errorf("load: %w", err)
		}
	}
	return nil
}
