package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"dataservice/internal/clip"
	"dataservice/store/model"
)

// SearchCountSlack bounds the counting of a search's matches: without ListQuery.ExactCount
// a search counts at most offset + limit + SearchCountSlack matches.
const SearchCountSlack = 1000

// ListQuery selects a page of a schema's instances, in id order.
type ListQuery struct {
	// Search keeps the instances whose keyname, displayname or data (not searched in
	// schemas with secret fields) contains it, case-insensitive for ASCII.
	Search string
	// After is a keyset cursor: only instances with an id above it (0: from the start).
	After int64
	// Offset skips that many matches (page numbers), Limit is the page size.
	Offset, Limit int
	// ExactCount counts every match of a search, however many.
	ExactCount bool
	// Sort orders the page by a column instead of id: keyname, displayname, is_enabled,
	// created_at, updated_at or a field of the schema, "-" first for descending (ties
	// in id order). After is ignored when sorting. A field sort reads every match.
	Sort string
	// Holds keeps the instances whose field holds a text value (the field's value, or
	// an item of its list): the instances that refer to one instance through a
	// reference field. Counted like a search.
	Holds *FieldValue
}

// FieldValue is a field and a text value it holds (ListQuery.Holds).
type FieldValue struct {
	Field, Value string
}

// sortColumn is the ORDER BY expression of ListQuery.Sort, or "" for id order.
func sortColumn(dia *dialect, s *model.Schema, sort string) (string, error) {
	col, desc := strings.CutPrefix(sort, "-")
	var keys []string
	switch col {
	case "", "id":
		if desc {
			return "", model.Errorf(model.EInvalid, "cannot sort by %s", clip.Quote(sort))
		}
		return "", nil
	case "keyname", "displayname", "is_enabled", "created_at", "updated_at":
		keys = []string{"i." + col}
	default:
		f := s.Field(col)
		if f == nil || f.Dataformat == "secret" || !model.ValidFieldName(col) {
			return "", model.Errorf(model.EInvalid, "cannot sort by %s", clip.Quote(col))
		}
		keys = dia.jsonSort("i.data", "'$."+col+"'")
	}
	if desc {
		for i := range keys {
			keys[i] += " DESC"
		}
	}
	expr := strings.Join(keys, ", ")
	if col == "keyname" {
		return expr, nil // unique in its class: the index gives the order, no tie to break
	}
	return expr + ", i.id", nil
}

// ListResult is a page of instances.
type ListResult struct {
	Instances []*Instance
	// Count is the number of instances of the schema, or of a search's matches (see
	// ListQuery.ExactCount); CountExact is false when the count stopped at its bound.
	Count      int
	CountExact bool
	// Next is the cursor (ListQuery.After) of the following page, 0 when this is the last
	// or the page is sorted.
	Next int64
}

const instanceColsI = "i.id, i.classname, i.keyname, i.displayname, i.is_enabled, i.data, i.created_at, i.updated_at"

// ListInstances returns a page of the instances of s. Without a search the count is
// the maintained per-schema count; a search reads the schema's rows in id order until
// the page is full, and counts its matches up to a bound (see ListQuery.ExactCount).
func (db *DB) ListInstances(ctx context.Context, s *model.Schema, q ListQuery) (*ListResult, error) {
	cls := s.Keyname
	if q.Limit < 0 || q.Offset < 0 {
		return nil, model.Errorf(model.EInvalid, "negative page size or offset")
	}
	order, err := sortColumn(db.dia, s, q.Sort)
	if err != nil {
		return nil, err
	}
	res := &ListResult{CountExact: true}
	from, where, idCol := "instances i", "i.classname = ?", "i.id"
	args := []any{cls}
	var rq querier = db.reader()
	var snapshot *sql.Tx // the read transaction of an indexed search (rq runs in it)
	// listed: the index lags behind some rows (listed, not indexed yet); the search
	// then reads the index's candidates that are not listed, every listed row of the
	// schema that is not staged and the staged index's candidates among the staged ones
	// (searchstage.go), LIKE deciding for all, merged in id order.
	listed := false
	match, indexed := db.dia.searchQuery(q.Search)
	if indexed {
		// The statements the snapshot ran unprepared are prepared once it has ended
		// (this defer runs after its Rollback): preparing needs a connection of the
		// read pool, and waiting for one while holding the snapshot's could wait forever.
		var unprepared []string
		defer func() {
			for _, q := range unprepared {
				db.rstmt(ctx, q) // an error leaves it unprepared: the next search tries again
			}
		}()
		// One read snapshot for the count of the listed rows and every query after it.
		rtx, err := db.r.BeginTx(ctx, db.dia.snapshot)
		if err != nil {
			return nil, fmt.Errorf("search %s: %w", cls, err)
		}
		defer rtx.Rollback()
		rq, snapshot = inSnapshot{db, rtx, &unprepared}, rtx
		var backlog int64
		if db.dia.searchBacklog != "" {
			seen := time.Now()
			if err := rq.queryRowContext(ctx, db.dia.searchBacklog, db.backlogLimit()+1).Scan(&backlog); err != nil {
				return nil, fmt.Errorf("search %s: %w", cls, err)
			}
			if backlog == 0 {
				db.sawSearchListEmpty(seen)
			}
		}
		if backlog > db.backlogLimit() {
			// Too many rows to check one by one: read the schema's rows as without an
			// index (the catch-up brings the backlog down).
			db.searchFellBack(backlog)
		} else {
			db.searchIndexUsable(backlog)
			// The index gives the candidate rows in id order, each joined to its row;
			// the LIKE below decides, as in a scan.
			from, idCol, where = db.dia.searchFrom, db.dia.searchID, db.dia.searchWhere
			args = []any{match, cls}
			if backlog > 0 {
				listed = true
				where += db.dia.searchUnlisted
			}
		}
	}
	if q.Search == "" && q.Holds == nil {
		n, err := db.CountInstances(ctx, cls)
		if err != nil {
			return nil, err
		}
		res.Count = n
	}
	// filter is what every row must pass beyond its schema (the search, the holds),
	// with its arguments: the same for every part of a search.
	filter, filterArgs := "", []any(nil)
	if q.Search != "" {
		pat := "%" + strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(q.Search) + "%"
		like := "(" + db.dia.like("i.keyname", "?") + " OR " + db.dia.like("i.displayname", "?")
		filterArgs = []any{pat, pat}
		if !s.HasSecrets() {
			like += " OR " + db.dia.like("i.data", "?")
			filterArgs = append(filterArgs, pat)
		}
		like += ")"
		filter += " AND " + like
	}
	if h := q.Holds; h != nil {
		if f := s.Field(h.Field); f == nil || f.Dataformat == "secret" || !model.ValidFieldName(h.Field) {
			return nil, model.Errorf(model.EInvalid, "%s has no field %s to filter by", cls, clip.Quote(h.Field))
		}
		// contains is a cheap filter before the exact test on the (scalar or list) value.
		filter += " AND " + db.dia.contains("i.data", "?") + " AND " + db.dia.jsonHolds("i.data", "?", "?")
		filterArgs = append(filterArgs, jsonString(h.Value), "$."+h.Field, h.Value)
	}
	where += filter
	args = append(args, filterArgs...)
	filtered := q.Search != "" || q.Holds != nil
	after := q.After
	if order != "" {
		after = 0 // a sorted page has no id cursor
	}
	listWhere, listArgs := where, args
	if after > 0 {
		listWhere += " AND " + idCol + " > ?"
		listArgs = append(append([]any{}, args...), after)
	}
	sorted := order != ""
	if order == "" {
		order = idCol
	}
	listQ := "SELECT " + instanceColsI + " FROM " + from + " WHERE " + listWhere + " ORDER BY " + order + " LIMIT ? OFFSET ?"
	countFrom := "SELECT 1 FROM " + from + " WHERE " + where
	if listed {
		// Three parts, each in id order: the index's candidates, the listed rows not
		// staged (each read from instances) and the staged index's candidates among the
		// staged rows (searchstage.go). SQLite merges them without sorting when the
		// compound is ordered by its first column, each part's own id column.
		cols := func(id string) string { return id + " AS id" + strings.TrimPrefix(instanceColsI, "i.id") }
		compound := "SELECT " + cols(idCol) + " FROM " + from + " WHERE " + listWhere
		listArgs = append([]any{}, listArgs...)
		args = append([]any{}, args...)
		for _, part := range []struct {
			from, where, id string
			args            []any
		}{
			{db.dia.searchListedFrom, db.dia.searchListedWhere, db.dia.searchListedID, []any{cls}},
			{db.dia.searchStagedFrom, db.dia.searchStagedWhere, db.dia.searchStagedID, []any{match, cls}},
		} {
			partFrom, partWhere, partID := part.from, part.where+filter, part.id
			partArgs := append(part.args, filterArgs...)
			countFrom += " UNION ALL SELECT 1 FROM " + partFrom + " WHERE " + partWhere
			args = append(args, partArgs...)
			if after > 0 {
				partWhere += " AND " + partID + " > ?"
				partArgs = append(partArgs, after)
			}
			compound += " UNION ALL SELECT " + cols(partID) + " FROM " + partFrom + " WHERE " + partWhere
			listArgs = append(listArgs, partArgs...)
		}
		if sorted {
			listQ = "SELECT * FROM (" + compound + ") AS i ORDER BY " + order + " LIMIT ? OFFSET ?"
		} else {
			listQ = compound + " ORDER BY 1 LIMIT ? OFFSET ?"
		}
	}
	var rows *sql.Rows
	switch {
	case snapshot != nil:
		if db.searchSeen != nil {
			db.searchSeen(listQ, append(listArgs, q.Limit+1, q.Offset))
		}
		if sorted {
			// A field's sort makes a text of its own: not kept prepared.
			rows, err = conn{snapshot, db.dia}.queryContext(ctx, listQ, append(listArgs, q.Limit+1, q.Offset)...)
		} else {
			rows, err = rq.queryContext(ctx, listQ, append(listArgs, q.Limit+1, q.Offset)...)
		}
	case order == idCol:
		// Pages in id order (a handful of query texts) use statements prepared once.
		rows, err = db.rquery(ctx, listQ, append(listArgs, q.Limit+1, q.Offset)...)
	default:
		rows, err = db.reader().queryContext(ctx, listQ, append(listArgs, q.Limit+1, q.Offset)...)
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", cls, err)
	}
	defer rows.Close()
	for rows.Next() {
		in, err := scanInstance(rows)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", cls, err)
		}
		res.Instances = append(res.Instances, in)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", cls, err)
	}
	rows.Close()
	full := q.Limit > 0 && len(res.Instances) > q.Limit
	if full {
		res.Instances = res.Instances[:q.Limit]
		if q.Sort == "" || q.Sort == "id" {
			res.Next = res.Instances[len(res.Instances)-1].ID
		}
	}
	if !filtered {
		return res, nil
	}
	if !full && q.Limit > 0 && after == 0 && (len(res.Instances) > 0 || q.Offset == 0) {
		// The last page of the matches: they number offset + this page (no second scan).
		res.Count = q.Offset + len(res.Instances)
		return res, nil
	}
	countQ, countArgs := "SELECT count(*) FROM ("+countFrom+") AS m", args
	bound := q.Offset + q.Limit + SearchCountSlack
	if !q.ExactCount {
		countQ = "SELECT count(*) FROM (" + countFrom + " LIMIT ?) AS m"
		countArgs = append(append([]any{}, args...), bound+1)
	}
	if err := rq.queryRowContext(ctx, countQ, countArgs...).Scan(&res.Count); err != nil {
		return nil, fmt.Errorf("search %s: %w", cls, err)
	}
	if !q.ExactCount && res.Count > bound {
		res.Count, res.CountExact = bound, false
	}
	return res, nil
}

// inSnapshot runs the statements of an indexed search in its read snapshot, each
// prepared once on the read pool and reused on the snapshot's connection
// (Tx.StmtContext): planning a search's compound statement costs about what running
// it costs at a million instances. A statement not prepared yet runs unprepared in the
// snapshot and is added to unprepared, which the search prepares once its snapshot
// has ended. Its texts are a handful: the shapes of a search in id order and of its
// counts (a sorted page is not run through it).
type inSnapshot struct {
	db         *DB
	tx         *sql.Tx
	unprepared *[]string
}

// stmt is the snapshot's statement for query, or nil (noted as unprepared).
func (s inSnapshot) stmt(ctx context.Context, query string) *sql.Stmt {
	if st, ok := s.db.rstmts.Load(query); ok {
		return s.tx.StmtContext(ctx, st.(*sql.Stmt))
	}
	*s.unprepared = append(*s.unprepared, query)
	return nil
}

func (s inSnapshot) queryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := s.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return conn{s.tx, s.db.dia}.queryContext(ctx, query, args...)
}

func (s inSnapshot) queryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := s.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return conn{s.tx, s.db.dia}.queryRowContext(ctx, query, args...)
}

// SearchInstances returns a page of instances of s in id order whose keyname,
// displayname or data contains search (see ListInstances), and the number of matches.
func (db *DB) SearchInstances(ctx context.Context, s *model.Schema, search string, offset, limit int) ([]*Instance, int, error) {
	res, err := db.ListInstances(ctx, s, ListQuery{Search: search, Offset: offset, Limit: limit})
	if err != nil {
		return nil, 0, err
	}
	return res.Instances, res.Count, nil
}
