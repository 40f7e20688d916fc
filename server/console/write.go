package console

import (
	"context"
	"strings"

	"dataservice/store"
)

// apply writes one entry with the user's rights through the store's load path: every
// console write goes through here, so the store's rules (permissions, grant
// containment, validation, revisions) are the only ones.
func (c *Console) apply(ctx context.Context, auth *store.Auth, e *store.Entry) (string, error) {
	res, err := c.db.Load(ctx, []*store.Entry{e}, store.LoadOptions{Auth: auth})
	if err != nil {
		return "", err
	}
	if res.Errors > 0 {
		msg := res.Messages[0].Message
		code := store.EInvalid
		switch {
		case strings.HasPrefix(msg, "permission denied"):
			code = store.EForbidden
		case strings.HasSuffix(msg, "not found"):
			code = store.ENotFound
		case strings.Contains(msg, "already exists"):
			code = store.EConflict
		}
		return "", &store.Error{Code: code, Message: msg}
	}
	for outcome, n := range map[string]int{store.OutCreated: res.Created, store.OutUpdated: res.Updated,
		store.OutDeleted: res.Deleted, store.OutEnabled: res.Enabled, store.OutDisabled: res.Disabled} {
		if n > 0 {
			return outcome, nil
		}
	}
	return store.OutUnchanged, nil
}

// rename changes an instance's keyname and every reference to it, in one transaction,
// with the user's name as the revisions' author. The caller checked p_keyname_rename
// and the update permission.
func (c *Console) rename(ctx context.Context, auth *store.Auth, cls, key, newKey string) (*store.RenameReport, error) {
	var rep *store.RenameReport
	err := c.db.WithTx(ctx, func(tx *store.Tx) error {
		tx.Author = auth.Author()
		s, err := tx.Schema(cls)
		if err != nil {
			return err
		}
		in, err := tx.Instance(cls, key)
		if err != nil {
			return err
		}
		rep, err = tx.Rename(s, in, newKey)
		return err
	})
	return rep, err
}
