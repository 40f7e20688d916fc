package store

import (
	"bytes"
	"context"
	"strings"

	"gopkg.in/yaml.v3"

	"dataservice/tasks/rules"
)

// CheckPipeline reports whether content is a valid rule list.
func CheckPipeline(content string) error {
	_, err := rules.Parse(content)
	return err
}

// NormalizePipelineContent converts pipeline content to the flat rule list:
// content that parses as a list is returned byte for byte; a mapping with `tasks:`
// becomes that list (the deprecated keys csv_delimiter, encoding, keyfield and
// classname are dropped with the wrapper); anything else becomes "[]". changed
// reports whether the text differs from content.
func NormalizePipelineContent(content string) (out string, changed bool) {
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(content), &root); err == nil && len(root.Content) == 1 {
		n := root.Content[0]
		if n.Kind == yaml.SequenceNode {
			return content, false
		}
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value != "tasks" || n.Content[i+1].Kind != yaml.SequenceNode {
					continue
				}
				var buf bytes.Buffer
				enc := yaml.NewEncoder(&buf)
				enc.SetIndent(2)
				seq := *n.Content[i+1]
				seq.Style = 0
				if err := enc.Encode(&seq); err == nil && enc.Close() == nil {
					s := buf.String()
					if strings.TrimSpace(s) == "" || len(seq.Content) == 0 {
						s = "[]"
					}
					return s, s != content
				}
			}
		}
	}
	return "[]", content != "[]"
}

// Pipeline is a stored `_pipeline` instance.
type Pipeline struct {
	ID            int64   `json:"id" yaml:"id"`
	Keyname       string  `json:"keyname" yaml:"keyname"`
	RunPermission *string `json:"run_permission" yaml:"run_permission"`
	Content       string  `json:"-" yaml:"-"`
	IsEnabled     bool    `json:"-" yaml:"-"`
}

func pipelineOf(in *Instance) *Pipeline {
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
		out = append(out, pipelineOf(in))
		return nil
	})
	return out, err
}

// PipelineByName finds a pipeline by keyname.
func (db *DB) PipelineByName(ctx context.Context, name string) (*Pipeline, error) {
	in, err := db.Instance(ctx, "_pipeline", name)
	if err != nil {
		if IsNotFound(err) {
			return nil, Errorf(ENotFound, "pipeline not found")
		}
		return nil, err
	}
	return pipelineOf(in), nil
}

// PipelineByID finds a pipeline by id.
func (db *DB) PipelineByID(ctx context.Context, id int64) (*Pipeline, error) {
	in, err := db.InstanceByID(ctx, "_pipeline", id)
	if err != nil {
		if IsNotFound(err) {
			return nil, Errorf(ENotFound, "pipeline not found")
		}
		return nil, err
	}
	return pipelineOf(in), nil
}
