package codec_test

import (
	"strings"
	"testing"

	"dataservice/store/codec"
	"dataservice/store/model"
)

func TestWriter(t *testing.T) {
	doc := func(key string) *model.Doc {
		d := &model.Doc{}
		d.Set("classname", "server")
		d.Set("keyname", key)
		return d
	}
	cases := []struct {
		name, format string
		docs         []string
		want         string
	}{
		{"empty yaml is an empty sequence", "yaml", nil, "[]\n"},
		{"empty json is an empty array", "json", nil, "[]\n"},
		{"yaml items in order", "yaml", []string{"a", "b"}, "- classname: server\n  keyname: a\n- classname: server\n  keyname: b\n"},
		{"json items in order", "json", []string{"a", "b"},
			"[\n  {\n    \"classname\": \"server\",\n    \"keyname\": \"a\"\n  },\n  {\n    \"classname\": \"server\",\n    \"keyname\": \"b\"\n  }\n]\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			w, err := codec.NewWriter(&b, c.format)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range c.docs {
				if err := w.Write(doc(k)); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if got := b.String(); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
	t.Run("an unknown format is invalid", func(t *testing.T) {
		if _, err := codec.NewWriter(&strings.Builder{}, "csv"); !model.HasCode(err, model.EInvalid) {
			t.Fatalf("NewWriter(csv) err = %v, want an EInvalid error", err)
		}
	})
}
