package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"dataservice/internal/clip"
	"dataservice/store/model"
)

// fieldCountChunk bounds the fields one counting statement covers (each adds a bound
// path and a column); a schema with more fields takes one more pass per chunk.
const fieldCountChunk = 100

// FieldValueCount is the number of instances of cls that hold a value for the field
// named field: the instances a deletion of the field clears, and those a change of its
// definition leaves holding a value written under the old one.
func (db *DB) FieldValueCount(ctx context.Context, cls, field string) (int, error) {
	n, err := db.FieldValueCounts(ctx, cls, []string{field})
	if err != nil {
		return 0, err
	}
	return n[field], nil
}

// FieldValueCounts is FieldValueCount for several fields of cls, counted in one pass
// over the class's rows (per fieldCountChunk fields), with the condition the deletion of
// a field uses to find the rows it changes: a schema's page counts every field at the
// cost of one count.
func (db *DB) FieldValueCounts(ctx context.Context, cls string, fields []string) (map[string]int, error) {
	out := make(map[string]int, len(fields))
	for start := 0; start < len(fields); start += fieldCountChunk {
		chunk := fields[start:min(start+fieldCountChunk, len(fields))]
		cols := make([]string, len(chunk))
		sums := make([]string, len(chunk))
		args := []any{cls}
		for i, f := range chunk {
			if !model.ValidFieldName(f) {
				return nil, model.Errorf(model.EInvalid, "%s is not a valid field name", clip.Quote(f))
			}
			// Numbered placeholders: the class is ?1, the paths follow.
			p := "?" + strconv.Itoa(i+2)
			cols[i] = "CASE WHEN " + db.dia.jsonType("data", p) + " IS NULL THEN 0 ELSE 1 END AS c" + strconv.Itoa(i)
			sums[i] = "coalesce(sum(c" + strconv.Itoa(i) + "), 0)"
			args = append(args, `$."`+f+`"`)
		}
		q := "SELECT " + strings.Join(sums, ", ") + " FROM (SELECT " + strings.Join(cols, ", ") +
			" FROM instances WHERE classname = ?1) t"
		counts := make([]int64, len(chunk))
		dest := make([]any, len(chunk))
		for i := range counts {
			dest[i] = &counts[i]
		}
		if err := db.reader().queryRowContext(ctx, q, args...).Scan(dest...); err != nil {
			return nil, fmt.Errorf("count field values of %s: %w", cls, err)
		}
		for i, f := range chunk {
			out[f] = int(counts[i])
		}
	}
	return out, nil
}
