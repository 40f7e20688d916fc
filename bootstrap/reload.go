package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"

	"dataservice/store"
	"dataservice/store/codec"
	"dataservice/store/model"
)

// ErrReloadEntries marks a reload whose named entries were missing from the file or
// failed to load: logged, and start-up goes on (seed: reloading built-ins, rule 2).
// Any other reload error (an unreadable file, a database failure) fails the block.
var ErrReloadEntries = errors.New("reload failed")

// Reload loads the entries named by items ("classname:keyname", or the single item
// "*" for all) from one built-in file, with every permission and without revisions,
// inside tx. action is model.ActionCreate (the default) or model.ActionUpdate. Items
// missing from the file and entries that fail are logged and make Reload return an
// error; the caller logs it and start-up goes on.
func Reload(ctx context.Context, tx *store.Tx, fsys fs.FS, file string, items []string, action model.Action, log *slog.Logger) error {
	if action == "" {
		action = model.ActionCreate
	}
	if action != model.ActionCreate && action != model.ActionUpdate {
		return fmt.Errorf("reload %s: action %q is not create or update", file, action)
	}
	return loadBuiltins(ctx, tx, fsys, file, items, action, log)
}

// loadBuiltins is Reload with any load action; the blocks' "add" steps use init
// (create when missing, leave an existing object as it is). When fields are given,
// only those fields of each entry are loaded (with its classname and keyname), so an
// update touches nothing else.
func loadBuiltins(ctx context.Context, tx *store.Tx, fsys fs.FS, file string, items []string, action model.Action, log *slog.Logger, fields ...string) error {
	data, err := fs.ReadFile(fsys, file)
	if err != nil {
		return fmt.Errorf("reload %s: %w", file, err)
	}
	entries, err := codec.ParseDocument(file, data)
	if err != nil {
		return fmt.Errorf("reload %s: %w", file, err)
	}
	all := len(items) == 1 && items[0] == "*"
	want := map[string]bool{}
	for _, it := range items {
		want[it] = true
	}
	var pick []*model.Entry
	for _, e := range entries {
		cls, key := e.Key()
		if all || want[cls+":"+key] {
			if len(fields) > 0 {
				m := map[string]any{"classname": cls, "keyname": key}
				for _, f := range fields {
					if v, ok := e.Fields[f]; ok {
						m[f] = v
					}
				}
				e = model.NewEntry(m)
			}
			pick = append(pick, e)
			delete(want, cls+":"+key)
		}
	}
	var missing []string
	for it := range want {
		if it != "*" {
			missing = append(missing, it)
		}
	}
	res, err := tx.Load(ctx, pick, store.LoadOptions{Action: action, System: true, NoRevisions: true})
	if err != nil {
		return fmt.Errorf("reload %s: %w", file, err)
	}
	var problems []string
	for _, m := range missing {
		log.Error("reload: entry not found in built-in file", "file", file, "entry", m)
		problems = append(problems, m+" not found")
	}
	for _, m := range res.Messages {
		log.Error("reload: entry failed", "file", file, "entry", m.Classname+":"+m.Keyname, "error", m.Message)
		problems = append(problems, m.Classname+":"+m.Keyname+": "+m.Message)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s: %s", ErrReloadEntries, file, strings.Join(problems, "; "))
	}
	return nil
}
