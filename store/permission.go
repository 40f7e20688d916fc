package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"

	"dataservice/internal/clip"
	"dataservice/store/model"
)

// Permission is a named right.
type Permission struct {
	ID          int64  `json:"id" yaml:"id"`
	Keyname     string `json:"keyname" yaml:"keyname"`
	Displayname string `json:"displayname" yaml:"displayname"`
	Description string `json:"description" yaml:"description"`
	IsBuiltin   bool   `json:"is_builtin" yaml:"is_builtin"`
}

var permNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$`)

// Permissions lists every permission by keyname.
func (db *DB) Permissions(ctx context.Context) ([]Permission, error) {
	rows, err := db.reader().queryContext(ctx, "SELECT id, keyname, displayname, description, is_builtin FROM permissions ORDER BY keyname")
	if err != nil {
		return nil, fmt.Errorf("list permissions: %w", err)
	}
	defer rows.Close()
	var out []Permission
	for rows.Next() {
		var p Permission
		if err := rows.Scan(&p.ID, &p.Keyname, &p.Displayname, &p.Description, &p.IsBuiltin); err != nil {
			return nil, fmt.Errorf("list permissions: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

func (tx *Tx) permission(ctx context.Context, key string) (*Permission, error) {
	p := &Permission{}
	err := tx.queryRow(ctx, "SELECT id, keyname, displayname, description, is_builtin FROM permissions WHERE keyname = ?", key).
		Scan(&p.ID, &p.Keyname, &p.Displayname, &p.Description, &p.IsBuiltin)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, model.Errorf(model.ENotFound, "permission %s not found", clip.Quote(key))
	}
	if err != nil {
		return nil, fmt.Errorf("read permission %s: %w", key, err)
	}
	return p, nil
}

// deletePermission removes a permission, built-in or not. Only start-up migrations
// reach it (Migration.DeletePermission); the normal delete refuses built-ins.
func (tx *Tx) deletePermission(ctx context.Context, key string) error {
	if _, err := tx.execContext(ctx, "DELETE FROM permissions WHERE keyname = ?", key); err != nil {
		return fmt.Errorf("delete permission %s: %w", key, err)
	}
	return nil
}

// putPermission applies a `_permission` entry.
func (tx *Tx) putPermission(ctx context.Context, e *model.Entry, system bool) (string, error) {
	if !permNameRE.MatchString(e.Keyname) {
		return "", model.Errorf(model.EInvalid, "permission keyname %s is not valid", clip.Quote(e.Keyname))
	}
	old, err := tx.permission(ctx, e.Keyname)
	if err != nil && !IsNotFound(err) {
		return "", err
	}
	exists := old != nil
	switch e.Action {
	case model.ActionNoop:
		return OutSkipped, nil
	case model.ActionEnable, model.ActionDisable:
		return "", model.Errorf(model.EInvalid, "permissions cannot be enabled or disabled")
	case model.ActionDelete:
		if !exists {
			return OutUnchanged, nil
		}
		if old.IsBuiltin {
			return "", model.Errorf(model.EForbidden, "permission %s is built-in and cannot be deleted", clip.Quote(e.Keyname))
		}
		if _, err := tx.exec(ctx, "DELETE FROM permissions WHERE id = ?", old.ID); err != nil {
			return "", fmt.Errorf("delete permission %s: %w", e.Keyname, err)
		}
		return OutDeleted, tx.revision(ctx, "_permission", e.Keyname, model.ActionDelete, model.MustJSON(old), "")
	case model.ActionInit:
		if exists && system && !old.IsBuiltin {
			// A permission the built-in definitions add already exists as a user's: it
			// becomes built-in (so the normal delete refuses it), its texts stay.
			next := *old
			next.IsBuiltin = true
			if _, err := tx.exec(ctx, "UPDATE permissions SET is_builtin = 1 WHERE id = ?", old.ID); err != nil {
				return "", fmt.Errorf("write permission %s: %w", e.Keyname, err)
			}
			return OutUpdated, tx.revision(ctx, "_permission", e.Keyname, model.ActionUpdate, model.MustJSON(old), model.MustJSON(next))
		}
		if exists {
			return OutUnchanged, nil
		}
	case model.ActionUpdate:
		if !exists {
			return "", model.Errorf(model.ENotFound, "permission %s not found", clip.Quote(e.Keyname))
		}
	}
	next := Permission{Keyname: e.Keyname, IsBuiltin: system}
	if exists {
		next = *old
		next.IsBuiltin = old.IsBuiltin || system
	}
	if e.HasDisplayname {
		next.Displayname = e.Displayname
	}
	if d, ok := e.Fields["description"]; ok {
		next.Description, _ = model.ScalarText(d)
	}
	if exists && next == *old {
		return OutUnchanged, nil
	}
	if exists {
		_, err = tx.exec(ctx, "UPDATE permissions SET displayname = ?, description = ?, is_builtin = ? WHERE id = ?",
			next.Displayname, next.Description, next.IsBuiltin, old.ID)
	} else {
		next.ID, _, err = tx.db.dia.insertID(ctx, counted{tx}, "INSERT INTO permissions(keyname, displayname, description, is_builtin) VALUES(?, ?, ?, ?)",
			next.Keyname, next.Displayname, next.Description, next.IsBuiltin)
	}
	if err != nil {
		return "", fmt.Errorf("write permission %s: %w", e.Keyname, err)
	}
	if exists {
		return OutUpdated, tx.revision(ctx, "_permission", e.Keyname, model.ActionUpdate, model.MustJSON(old), model.MustJSON(next))
	}
	return OutCreated, tx.revision(ctx, "_permission", e.Keyname, model.ActionCreate, "", model.MustJSON(next))
}

// codePermissions are built-in permissions the code defines beyond the seed's
// data-version blocks (whose table is fixed). A store layout change adds them to every
// file, new or existing, as built-in (layout.go, step 7).
var codePermissions = []Permission{
	{Keyname: "p_pipeline_admin", Displayname: "Pipeline admin", Description: "Create, update, enable, disable and delete pipelines (_pipeline)"},
	{Keyname: "p_event_admin", Displayname: "Event admin", Description: "Create, update, enable, disable and delete event rules (_eventrule)"},
}

// CodePermissions lists the built-in permissions the code adds beyond the seed's blocks.
func CodePermissions() []Permission { return append([]Permission(nil), codePermissions...) }
