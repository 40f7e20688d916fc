package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"dataservice/internal/clip"
	"dataservice/store/model"
)

// MaxRebuildRevisions bounds the work of rebuilding the object at a delta row: the
// newer revisions of the object it reads, at most.
const MaxRebuildRevisions = 10_000

// RevisionStates returns the whole object before and after rev, as a revision of the
// whole form records it (secrets masked; nil for no object: before a create, after a
// delete), or why it cannot be told (reason, with nil states and nil error).
//
// A row of the whole form holds both. The object at a delta row is rebuilt backward:
// from the object's state after its newer changes, undoing them newest first (a delta
// row's before holds the old values of what it changed). That state is the before of
// the first newer revision of the same class and keyname holding the whole object (a
// delete, or an update written before delta rows existed), else the stored instance.
// The rebuilt after is then overlaid with what rev itself wrote, and its before with
// what rev replaced, so the parts rev changed are always exactly its own. Values
// written with no revision at all (start-up migrations and the bootstrap) show as they
// are in the newer state. The object cannot be told when it left the keyname (a newer
// create or rename of the keyname, or no instance under it: it was renamed, and its
// history goes on under the new keyname), when the schema is gone, or when more than
// MaxRebuildRevisions newer revisions of the object would have to be undone. The
// retention clean-up deletes only revisions older than the ones it keeps of an object,
// never a newer one, so it cannot break a rebuild.
func (db *DB) RevisionStates(ctx context.Context, s *model.Schema, rev Revision) (before, after *RevisionDoc, reason string, err error) {
	if !rev.Delta {
		if before, err = ParseRevisionDoc(rev.Before); err == nil {
			after, err = ParseRevisionDoc(rev.After)
		}
		if err != nil {
			return nil, nil, "", fmt.Errorf("revision %d: unreadable record: %w", rev.ID, err)
		}
		return before, after, "", nil
	}
	if s == nil {
		return nil, nil, fmt.Sprintf("the schema %s no longer exists.", rev.Classname), nil
	}
	var state *RevisionDoc
	var undo []string // the befores of the newer delta rows, oldest first
	limit := cmp.Or(db.maxRebuild, MaxRebuildRevisions)
	err = db.WithRead(ctx, func(r Reader) error {
		rows, err := r.QueryContext(ctx, `SELECT action, delta, COALESCE(before, '') FROM revisions
			WHERE classname = ? AND keyname = ? AND id > ? ORDER BY id LIMIT ?`, rev.Classname, rev.Keyname, rev.ID, limit+1)
		if err != nil {
			return err
		}
		defer rows.Close()
		whole := "" // the before of the first newer row of the whole form
		found := false
		for rows.Next() {
			var action, doc string
			var delta bool
			if err := rows.Scan(&action, &delta, &doc); err != nil {
				return err
			}
			if delta {
				if len(undo) == limit {
					reason = fmt.Sprintf("%s %s changed more than %d times since this revision: too many changes to rebuild the version from.",
						rev.Classname, clip.Quote(rev.Keyname), limit)
					return nil
				}
				undo = append(undo, doc)
				continue
			}
			if action == string(model.ActionCreate) || action == string(model.ActionRename) || doc == "" {
				reason = fmt.Sprintf("%s %s is another object since this revision (the object left the keyname, and another took it).",
					rev.Classname, clip.Quote(rev.Keyname))
				return nil
			}
			whole, found = doc, true
			break
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if found {
			state, err = ParseRevisionDoc(whole)
			return err
		}
		cur, err := scanInstance(r.QueryRowContext(ctx, "SELECT "+instanceCols+
			" FROM instances WHERE classname = ? AND keyname = ?", rev.Classname, rev.Keyname))
		if errors.Is(err, sql.ErrNoRows) {
			reason = fmt.Sprintf("%s %s no longer exists under this keyname (renamed: its history goes on under the new keyname).",
				rev.Classname, clip.Quote(rev.Keyname))
			return nil
		}
		if err != nil {
			return err
		}
		state, err = ParseRevisionDoc(instanceDoc(s, cur, ""))
		return err
	})
	if err != nil {
		return nil, nil, "", fmt.Errorf("rebuild revision %d: %w", rev.ID, err)
	}
	if reason != "" {
		return nil, nil, reason, nil
	}
	for i := len(undo) - 1; i >= 0; i-- {
		d, err := ParseRevisionDoc(undo[i])
		if err != nil || d == nil {
			return nil, nil, "", fmt.Errorf("rebuild revision %d: unreadable newer record: %v", rev.ID, err)
		}
		d.overlay(state)
	}
	mine, err := ParseRevisionDoc(rev.After)
	var was *RevisionDoc
	if err == nil {
		was, err = ParseRevisionDoc(rev.Before)
	}
	if err != nil || mine == nil || was == nil {
		return nil, nil, "", fmt.Errorf("revision %d: unreadable record: %v", rev.ID, err)
	}
	mine.overlay(state)
	after = state
	before = state.clone()
	was.overlay(before)
	return before, after, "", nil
}
