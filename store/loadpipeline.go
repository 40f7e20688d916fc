package store

import (
	"context"
	"strings"

	"dataservice/rules"
	"dataservice/store/model"
)

// LoadTransform is the load-time pipeline named name, as auth may use it: a pipeline
// whose run_permission auth lacks is refused (model.EForbidden, naming the permission), a
// disabled one or one whose content does not parse is model.EInvalid, an unknown one
// model.ENotFound. The API's load endpoints and the console's import tool share it.
func (db *DB) LoadTransform(ctx context.Context, auth *model.Auth, name string) (rules.Transform, error) {
	pl, err := db.PipelineByName(ctx, strings.TrimSpace(name))
	if err != nil {
		return nil, err
	}
	if pl.RunPermission != nil && !auth.Has(*pl.RunPermission) {
		return nil, model.Errorf(model.EForbidden, "permission denied: pipeline %s needs %s", pl.Keyname, *pl.RunPermission)
	}
	if !pl.IsEnabled {
		// Refused at load time as it is for runs.
		return nil, model.Errorf(model.EInvalid, "pipeline %s is disabled", pl.Keyname)
	}
	tf, err := rules.LoadTransform(pl.Content, db.Now)
	if err != nil {
		return nil, RulesError("pipeline "+pl.Keyname+": invalid content: ", err)
	}
	return tf, nil
}
