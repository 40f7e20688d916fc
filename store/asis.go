package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrLayoutPending means the file's table layout is older than this program's and
// Options.AsIs forbade applying the missing steps (only the start-up sequence of
// serve and migrate applies them).
var ErrLayoutPending = errors.New("table layout steps pending")

// requireLayout is Open's layout step under Options.AsIs: it reads the layout
// versions and writes nothing, refusing a file that is newer than this program or
// has steps pending.
func (db *DB) requireLayout(ctx context.Context) error {
	if err := db.checkFile(ctx); err != nil {
		return err
	}
	var pending []string
	have, err := db.dia.readLayoutVersion(ctx, db.writer())
	if err != nil {
		return fmt.Errorf("read layout version: %w", err)
	}
	if layout := db.dia.layout; have < len(layout) {
		pending = append(pending, fmt.Sprintf("store %d of %d", have, len(layout)))
	}
	owners, steps := ownedLayouts()
	for _, owner := range owners {
		// A file before store's layout 1 has no layout_versions table: every
		// owner's steps are pending, and store's are already reported.
		if have == 0 {
			break
		}
		n, err := ownedVersionIfAny(ctx, db, owner)
		if err != nil {
			return err
		}
		switch {
		case n > len(steps[owner]):
			return fmt.Errorf("table layout version %d of %s is newer than this program knows (%d)", n, owner, len(steps[owner]))
		case n < len(steps[owner]):
			pending = append(pending, fmt.Sprintf("%s %d of %d", owner, n, len(steps[owner])))
		}
	}
	if len(pending) > 0 {
		return fmt.Errorf("%w (layout versions: %s)", ErrLayoutPending, strings.Join(pending, ", "))
	}
	return nil
}

// ownedVersionIfAny is ownedVersion on a file that may not have the layout_versions
// table yet (no owner step has run): 0 then.
func ownedVersionIfAny(ctx context.Context, db *DB, owner string) (int, error) {
	var exists bool
	if err := db.writer().queryRowContext(ctx, db.dia.hasLayoutVersions).Scan(&exists); err != nil {
		return 0, fmt.Errorf("read layout version of %s: %w", owner, err)
	}
	if !exists {
		return 0, nil
	}
	return ownedVersion(ctx, db.writer(), owner)
}
