package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// checkPostgresSchema refuses a database whose schema holds tables the service's
// layout does not create: the database of another application.
func checkPostgresSchema(ctx context.Context, pool *sql.DB) error {
	rows, err := pool.QueryContext(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
		AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.deptype = 'e') ORDER BY 1`)
	if err != nil {
		return fmt.Errorf("read the database's tables: %w", err)
	}
	defer rows.Close()
	known := knownTables()
	var foreign []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return err
		}
		if !known[name] {
			foreign = append(foreign, name)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(foreign) > 0 {
		return fmt.Errorf("the database holds tables this service does not create (another application's?): %s",
			strings.Join(foreign, ", "))
	}
	return nil
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
