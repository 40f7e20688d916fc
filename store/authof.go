package store

import (
	"context"
	"strings"

	"dataservice/store/model"
)

// AuthOf re-reads the authorisation context of an author string ("system",
// "user:LOGIN", "apikey:NAME", as model.Auth.Author writes it): an error when the
// principal is gone or disabled. Whatever acts later for an authored instance (a
// schedule's runs, an event rule's pipeline) acts with the rights its author holds
// when it acts, not those it held when it wrote.
func (db *DB) AuthOf(ctx context.Context, author string) (*model.Auth, error) {
	kind, name, _ := strings.Cut(author, ":")
	switch {
	case author == "system":
		return model.SystemAuth(), nil
	case kind == model.AuthUser && name != "":
		return db.Refresh(ctx, &model.Auth{Kind: model.AuthUser, Name: name})
	case kind == model.AuthAPIKey && name != "":
		a, _, err := db.KeyAuth(ctx, name)
		if err != nil {
			return nil, model.Errorf(model.EForbidden, "API key %s is no longer valid", name)
		}
		return a, nil
	}
	return nil, model.Errorf(model.EForbidden, "unknown author %q", author)
}
