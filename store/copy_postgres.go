package store

import (
	"context"
	"fmt"
	"strings"
)

func init() { postgresDialect.resetIdentities = postgresResetIdentities }

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
