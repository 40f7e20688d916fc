package store

import (
	"context"
	"fmt"
	"strings"
)

func init() {
	postgresDialect.resetIdentities = postgresResetIdentities
	postgresDialect.deferIndexes = postgresDeferIndexes
}

// postgresDeferIndexes disables the triggers of table and drops its indexes that back no constraint (the
// trigram search index above all, whose GIN entries cost far more inserted row by
// row than built at once) and returns the function re-creating them from their
// definitions as the catalog holds them, once Copy filled the table: same names,
// same definitions, in the same transaction.
func postgresDeferIndexes(ctx context.Context, tx *Tx, table string) (func() error, error) {
	rows, err := tx.queryContext(ctx, `SELECT i.indexname, i.indexdef FROM pg_indexes i
		WHERE i.schemaname = current_schema() AND i.tablename = ?
		AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = to_regclass(quote_ident(i.indexname)))
		ORDER BY 1`, table)
	if err != nil {
		return nil, err
	}
	var names, defs []string
	for rows.Next() {
		var n, d string
		if err := rows.Scan(&n, &d); err != nil {
			rows.Close()
			return nil, err
		}
		names, defs = append(names, n), append(defs, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// The bookkeeping triggers too: Copy replaces what they would write with the
	// source's rows, and one row updated per inserted row in one transaction (the
	// count of a class) leaves a chain of row versions each update walks again.
	if _, err := tx.execContext(ctx, "ALTER TABLE "+quoteIdent(table)+" DISABLE TRIGGER USER"); err != nil {
		return nil, fmt.Errorf("disable triggers: %w", err)
	}
	for _, n := range names {
		if _, err := tx.execContext(ctx, "DROP INDEX "+quoteIdent(n)); err != nil {
			return nil, fmt.Errorf("drop index %s: %w", n, err)
		}
	}
	return func() error {
		for i, d := range defs {
			if _, err := tx.execContext(ctx, d); err != nil {
				return fmt.Errorf("re-create index %s: %w", names[i], err)
			}
		}
		if _, err := tx.execContext(ctx, "ALTER TABLE "+quoteIdent(table)+" ENABLE TRIGGER USER"); err != nil {
			return fmt.Errorf("enable triggers: %w", err)
		}
		return nil
	}, nil
}

// postgresResetIdentities sets the sequence of every identity column of the
// service's schema so the next row numbered by default takes an id past every id
// the table holds: rows Copy inserted with their own ids did not advance it.
func postgresResetIdentities(ctx context.Context, tx *Tx) error {
	rows, err := tx.queryContext(ctx, `SELECT c.relname, a.attname FROM pg_attribute a
		JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND c.relkind = 'r' AND a.attidentity <> '' AND NOT a.attisdropped
		ORDER BY 1, 2`)
	if err != nil {
		return err
	}
	var cols [][2]string
	for rows.Next() {
		var t, c string
		if err := rows.Scan(&t, &c); err != nil {
			rows.Close()
			return err
		}
		cols = append(cols, [2]string{t, c})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, tc := range cols {
		// setval(seq, max + 1, false): the next value is max + 1 (1 on an empty table).
		q := fmt.Sprintf(`SELECT setval(pg_get_serial_sequence(quote_ident(?), ?),
			coalesce((SELECT max(%s) FROM %s), 0) + 1, false)`, quoteIdent(tc[1]), quoteIdent(tc[0]))
		var n int64
		if err := tx.queryRowContext(ctx, q, tc[0], tc[1]).Scan(&n); err != nil {
			return fmt.Errorf("%s.%s: %w", tc[0], tc[1], err)
		}
	}
	return nil
}

// quoteIdent is a name as a PostgreSQL quoted identifier.
func quoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}
