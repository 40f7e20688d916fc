package console

import (
	"context"
	"maps"

	"dataservice/store"
	"dataservice/store/model"
)

// apply makes one write with the user's rights through the store's one apply path
// (store.DB.Apply): every console write goes through here, so the store's rules
// (permissions, validation, built-in protections, cascading renames, revisions with
// the user as author) are the only ones. old is the stored instance (nil for a
// create); next is the wanted state for create and update (ignored otherwise).
func (c *Console) apply(ctx context.Context, auth *model.Auth, sch *model.Schema, old, next *store.Instance, action model.Action) (store.Outcome, error) {
	return c.db.Apply(ctx, store.Write{Schema: sch, Old: old, New: next, Action: action}, store.ApplyOptions{Auth: auth})
}

// wanted is the state a form asks for: old's (a copy; nil for a new instance) with the
// posted values laid over it. An empty value removes the field; a secret left empty
// keeps the stored one (posted leaves it out).
func wanted(sch *model.Schema, old *store.Instance, key, displayname string, enabled bool, vals map[string]any) *store.Instance {
	next := &store.Instance{Classname: sch.Keyname, Keyname: key, Displayname: displayname, IsEnabled: enabled,
		Data: map[string]any{}}
	if old != nil {
		next.ID, next.CreatedAt, next.UpdatedAt = old.ID, old.CreatedAt, old.UpdatedAt
		next.Data = maps.Clone(old.Data)
	}
	for k, v := range vals {
		switch x := v.(type) {
		case string:
			if x == "" {
				delete(next.Data, k)
				continue
			}
		case []any:
			if len(x) == 0 {
				delete(next.Data, k)
				continue
			}
		}
		next.Data[k] = v
	}
	return next
}
