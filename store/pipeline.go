package store

import (
	"context"
	"errors"

	"dataservice/rules"
	"dataservice/store/model"
)

// Pipeline is a stored `_pipeline` instance.
type Pipeline struct {
	ID            int64   `json:"id" yaml:"id"`
	Keyname       string  `json:"keyname" yaml:"keyname"`
	RunPermission *string `json:"run_permission" yaml:"run_permission"`
	Content       string  `json:"-" yaml:"-"`
	IsEnabled     bool    `json:"-" yaml:"-"`
}

// PipelineOf reads a `_pipeline` instance as a Pipeline.
func PipelineOf(in *Instance) *Pipeline {
	p := &Pipeline{ID: in.ID, Keyname: in.Keyname, IsEnabled: in.IsEnabled}
	p.Content, _ = in.Data["content"].(string)
	if rp, ok := in.Data["run_permission"].(string); ok && rp != "" {
		p.RunPermission = &rp
	}
	return p
}

// Pipelines lists every pipeline in id order.
func (db *DB) Pipelines(ctx context.Context) ([]*Pipeline, error) {
	out := []*Pipeline{}
	err := db.EachInstance(ctx, "_pipeline", func(in *Instance) error {
		out = append(out, PipelineOf(in))
		return nil
	})
	return out, err
}

// PipelineByName finds a pipeline by keyname.
func (db *DB) PipelineByName(ctx context.Context, name string) (*Pipeline, error) {
	in, err := db.Instance(ctx, "_pipeline", name)
	if err != nil {
		if IsNotFound(err) {
			return nil, model.Errorf(model.ENotFound, "pipeline not found")
		}
		return nil, err
	}
	return PipelineOf(in), nil
}

// PipelineByID finds a pipeline by id.
func (db *DB) PipelineByID(ctx context.Context, id int64) (*Pipeline, error) {
	in, err := db.InstanceByID(ctx, "_pipeline", id)
	if err != nil {
		if IsNotFound(err) {
			return nil, model.Errorf(model.ENotFound, "pipeline not found")
		}
		return nil, err
	}
	return PipelineOf(in), nil
}

// PipelineContent is the stored form of a pipeline's content v: the flat rule list
// (the older `tasks:` wrapper is unwrapped), or an invalid error naming the failing
// rule's position ("content: rule 2: unknown rule ..."). Loads and updates of a
// `_pipeline` both check content through it.
func PipelineContent(v any) (string, error) {
	text, _ := model.ScalarText(v)
	norm, changed := rules.Normalize(text)
	if changed && norm == "[]" {
		// Normalize is the migration's rule, which turns unparsable content into an
		// empty list: a write is refused instead, naming what is wrong.
		if err := rules.Check(text); err != nil {
			return "", RulesError("content: ", err)
		}
	}
	if err := rules.Check(norm); err != nil {
		return "", RulesError("content: ", err)
	}
	return norm, nil
}

// RulesError is the invalid error of a rule list that does not compile, err from the
// rules package: one problem (field content) per bad rule, each message after prefix;
// its message is the first one's.
func RulesError(prefix string, err error) error {
	msgs := []string{err.Error()}
	var le *rules.ListError
	if errors.As(err, &le) {
		msgs = le.Messages()
	}
	list := make([]model.Problem, len(msgs))
	for i, m := range msgs {
		list[i] = model.Problem{Field: "content", Code: model.EInvalid, Message: prefix + m}
	}
	return model.ProblemsError(list)
}
