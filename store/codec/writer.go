package codec

import (
	"encoding/json"
	"fmt"
	"io"

	"gopkg.in/yaml.v3"

	"dataservice/internal/clip"
	"dataservice/store/model"
)

// Writer prints documents in the load format, as one YAML sequence or one JSON array,
// the way an export writes them.
type Writer struct {
	w      io.Writer
	format string
	first  bool
	// YAML items are written to out, each item either directly (appendYAMLItem: the
	// bytes yaml.v3 would write) or, when it has a value that needs yaml.v3's rules,
	// encoded by yaml.v3 in batches, each batch one block sequence: their
	// concatenation is the one sequence of the export.
	batch     yaml.Node
	out, item []byte
}

// NewWriter returns a Writer of format (yaml or json) to w; another format is an
// EInvalid error.
func NewWriter(w io.Writer, format string) (*Writer, error) {
	if format != "yaml" && format != "json" {
		return nil, model.Errorf(model.EInvalid, "unknown export format %s (yaml or json)", clip.Quote(format))
	}
	return &Writer{w: w, format: format, first: true}, nil
}

func (x *Writer) encodeBatch() error {
	if len(x.batch.Content) == 0 {
		return nil
	}
	b, err := yaml.Marshal(&x.batch)
	x.batch.Content = x.batch.Content[:0]
	if err != nil {
		return err
	}
	x.out = append(x.out, b...)
	return nil
}

func (x *Writer) flush() error {
	if err := x.encodeBatch(); err != nil {
		return err
	}
	if len(x.out) == 0 {
		return nil
	}
	_, err := x.w.Write(x.out)
	x.out = x.out[:0]
	return err
}

// Write prints d as the next item.
func (x *Writer) Write(d *model.Doc) error {
	if x.format == "json" {
		b, err := json.MarshalIndent(d, "  ", "  ")
		if err != nil {
			return err
		}
		sep := ",\n  "
		if x.first {
			sep = "[\n  "
		}
		x.first = false
		_, err = fmt.Fprintf(x.w, "%s%s", sep, b)
		return err
	}
	x.first = false
	var ok bool
	if x.item, ok = appendYAMLItem(x.item[:0], d); ok {
		// Items yaml.v3 holds go out first: the order is kept.
		if err := x.encodeBatch(); err != nil {
			return err
		}
		x.out = append(x.out, x.item...)
		if len(x.out) >= 64<<10 {
			return x.flush()
		}
		return nil
	}
	n, err := d.YAMLNode()
	if err != nil {
		return err
	}
	x.batch.Kind = yaml.SequenceNode
	x.batch.Content = append(x.batch.Content, n)
	if len(x.batch.Content) >= 256 {
		return x.flush()
	}
	return nil
}

// Close ends the sequence or array (an empty one when nothing was written); it does
// not close the underlying writer.
func (x *Writer) Close() error {
	if err := x.flush(); err != nil {
		return err
	}
	if x.format == "json" {
		if x.first {
			_, err := io.WriteString(x.w, "[]\n")
			return err
		}
		_, err := io.WriteString(x.w, "\n]\n")
		return err
	}
	if x.first {
		_, err := io.WriteString(x.w, "[]\n")
		return err
	}
	return nil
}
