package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"dataservice/store/model"
)

// RevisionFilter selects revisions; empty fields select everything.
type RevisionFilter struct {
	Classname string
	// Keyname is an exact keyname.
	Keyname string
	// Author is an exact author ("user:alice", "apikey:k", "task:<handle>", "system").
	Author string
	Action string
	// Since and Until bound created_at (UTC RFC 3339 text): Since <= created_at < Until.
	Since, Until string
	// Before keeps the revisions whose id is below it (0: from the newest): the keyset
	// of the next page.
	Before int64
}

// FindRevisions returns at most limit revisions matching f, of the classes allowed
// accepts, newest first. It reads at most scan rows (at least limit), so a filter that
// matches little, or classes the caller may not read, cannot make one call unbounded
// work. next is the Before of the following page: 0 when no older revision matches,
// else the id of the last row read (when fewer than limit revisions came back with a
// non-zero next, the scan budget ended the call, not the history).
//
// A class filter reads the index on (classname, id), a class and keyname filter the
// one on (classname, keyname, id): the rows read are the matching ones. The other
// filters (author, action, dates, a keyname without a class) are tested on the rows in
// id order, a window of ids at a time, and one call reads at most revisionSpan ids,
// however few of them match: a filter that matches nothing recent never reads the
// whole history (next then says where to go on).
func (db *DB) FindRevisions(ctx context.Context, f RevisionFilter, limit, scan int, allowed func(cls string) bool) (out []Revision, next int64, err error) {
	if limit < 1 {
		limit = 1
	}
	if scan < limit {
		scan = limit
	}
	where := []string{"id < ?"}
	var args []any
	add := func(cond string, v string) {
		if v != "" {
			where = append(where, cond)
			args = append(args, v)
		}
	}
	add("classname = ?", f.Classname)
	add("keyname = ?", f.Keyname)
	add("author = ?", f.Author)
	add("action = ?", f.Action)
	add("created_at >= ?", f.Since)
	add("created_at < ?", f.Until)
	q := `SELECT id, classname, keyname, action, COALESCE(before, ''), COALESCE(after, ''), author, created_at, delta
		FROM revisions WHERE ` + strings.Join(where, " AND ") + ` ORDER BY id DESC LIMIT ?`
	// windowed: the filters are not all served by an index. Each query then reads the
	// ids [low, cursor) only, a window of revisionWindow ids, and one call reads at
	// most revisionSpan ids of the history, whatever the budget of matching rows.
	windowed := f.Author != "" || f.Action != "" || f.Since != "" || f.Until != "" || (f.Keyname != "" && f.Classname == "")
	if windowed {
		q = strings.Replace(q, "WHERE id < ?", "WHERE id < ? AND id >= ?", 1)
	}
	var cursor int64 // above the newest revision, or Before when it is lower
	if err := db.reader().queryRowContext(ctx, "SELECT coalesce(max(id), 0) + 1 FROM revisions").Scan(&cursor); err != nil {
		return nil, 0, fmt.Errorf("read revisions: %w", err)
	}
	if f.Before > 0 && f.Before < cursor {
		cursor = f.Before
	}
	top := cursor
	chunk := max(limit, 200)
	for scanned := 0; ; {
		want := min(chunk, scan-scanned)
		qargs := []any{cursor}
		low := cursor - revisionWindow
		if windowed {
			qargs = append(qargs, low)
		}
		rows, err := db.reader().queryContext(ctx, q, append(append(qargs, args...), want)...)
		if err != nil {
			return nil, 0, fmt.Errorf("read revisions: %w", err)
		}
		n := 0
		for rows.Next() {
			var r Revision
			if err := rows.Scan(&r.ID, &r.Classname, &r.Keyname, &r.Action, &r.Before, &r.After, &r.Author, &r.CreatedAt, &r.Delta); err != nil {
				rows.Close()
				return nil, 0, fmt.Errorf("read revisions: %w", err)
			}
			n++
			cursor = r.ID
			if allowed(r.Classname) {
				out = append(out, r)
				if len(out) == limit {
					break
				}
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("read revisions: %w", err)
		}
		scanned += n
		switch {
		case len(out) == limit:
			return out, cursor, nil
		case n < want && windowed && low > 1:
			cursor = low // this window is done; the history goes on below it
			if top-cursor >= revisionSpan {
				return out, cursor, nil
			}
		case n < want:
			return out, 0, nil // the history ends here
		case scanned >= scan:
			return out, cursor, nil
		}
	}
}

// revisionWindow and revisionSpan bound what FindRevisions reads for the filters no
// index serves: ids per query, and ids per call.
const (
	revisionWindow = 10_000
	revisionSpan   = 100_000
)

// RevisionByID returns one revision.
func (db *DB) RevisionByID(ctx context.Context, id int64) (Revision, error) {
	r := Revision{ID: id}
	err := db.reader().queryRowContext(ctx, `SELECT classname, keyname, action, COALESCE(before, ''), COALESCE(after, ''), author, created_at, delta
		FROM revisions WHERE id = ?`, id).Scan(&r.Classname, &r.Keyname, &r.Action, &r.Before, &r.After, &r.Author, &r.CreatedAt, &r.Delta)
	if errors.Is(err, sql.ErrNoRows) {
		return Revision{}, model.Errorf(model.ENotFound, "revision %d not found", id)
	}
	if err != nil {
		return Revision{}, fmt.Errorf("read revision %d: %w", id, err)
	}
	return r, nil
}

// ObjectReplacedSince reports the action of the first create, delete or rename
// revision of (cls, key) newer than id, or "" when there is none: the object stored
// under that keyname now is then not the one revision id describes (it was deleted,
// or another object was created or renamed into the keyname since).
func (db *DB) ObjectReplacedSince(ctx context.Context, cls, key string, id int64) (string, error) {
	var action string
	err := db.reader().queryRowContext(ctx, `SELECT action FROM revisions WHERE classname = ? AND keyname = ? AND id > ?
		AND action IN ('create', 'delete', 'rename') ORDER BY id LIMIT 1`, cls, key, id).Scan(&action)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read revisions of %s %s: %w", cls, key, err)
	}
	return action, nil
}
