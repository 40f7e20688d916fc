package store

import (
	"context"
	"fmt"

	"dataservice/internal/clip"
	"dataservice/store/model"
)

// FieldValueCount is the number of instances of cls that hold a value for the field
// named field: the instances a deletion of the field clears, and those a change of its
// definition leaves holding a value written under the old one. One statement over the
// class's rows (the same condition the deletion's own statement uses), so a preview of
// a schema change costs what a count costs.
func (db *DB) FieldValueCount(ctx context.Context, cls, field string) (int, error) {
	if !model.ValidFieldName(field) {
		return 0, model.Errorf(model.EInvalid, "%s is not a valid field name", clip.Quote(field))
	}
	path := `$."` + field + `"`
	var n int
	err := db.reader().queryRowContext(ctx, `SELECT count(*) FROM instances WHERE classname = ?1 AND `+
		db.dia.jsonType("data", "?2")+` IS NOT NULL`, cls, path).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count values of %s.%s: %w", cls, field, err)
	}
	return n, nil
}
