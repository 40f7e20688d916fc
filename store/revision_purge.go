package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// PurgeRevisionsBatch deletes at most limit revisions older than cutoff whose id is
// above after, oldest first, in one transaction, and returns how many it deleted and
// the cursor of the next batch (the highest id it looked at; 0 when nothing was left).
//
// An object's latest revision (the newest row of its class and keyname) is never
// deleted, however old: it is what the console's history and restore show of an
// instance nobody changed since. A revision row holds the whole before and after of its
// change, so no kept row depends on a deleted one.
func (db *DB) PurgeRevisionsBatch(ctx context.Context, cutoff time.Time, after int64, limit int) (deleted, next int64, err error) {
	if limit < 1 {
		return 0, 0, fmt.Errorf("purge revisions: batch size %d", limit)
	}
	before := cutoff.UTC().Format(time.RFC3339)
	err = db.WithTx(ctx, func(tx *Tx) error {
		// The batch is a range of ids: the deletable rows above the cursor, oldest
		// first, at most limit of them (the newer-row test reads revisions_object).
		var last sql.NullInt64
		if err := tx.queryRowContext(ctx, `SELECT max(id) FROM (SELECT r.id FROM revisions r
			WHERE r.id > ? AND r.created_at < ? AND EXISTS (SELECT 1 FROM revisions n
				WHERE n.classname = r.classname AND n.keyname = r.keyname AND n.id > r.id)
			ORDER BY r.id LIMIT ?) batch`, after, before, limit).Scan(&last); err != nil {
			return fmt.Errorf("purge revisions: %w", err)
		}
		if !last.Valid {
			return nil
		}
		res, err := tx.exec(ctx, `DELETE FROM revisions WHERE id > ? AND id <= ? AND created_at < ?
			AND EXISTS (SELECT 1 FROM revisions n WHERE n.classname = revisions.classname
				AND n.keyname = revisions.keyname AND n.id > revisions.id)`, after, last.Int64, before)
		if err != nil {
			return fmt.Errorf("purge revisions: %w", err)
		}
		deleted, _ = res.RowsAffected()
		next = last.Int64
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	return deleted, next, nil
}
