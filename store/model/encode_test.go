package model_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"dataservice/store/model"
)

// trickyStrings are strings YAML and JSON must quote or escape.
var trickyStrings = []string{"", "true", "False", "yes", "null", "~", "123", "0x1F", "1e3", "-.inf", ".nan",
	"2026-11-22", "a: b", "- x", "#c", " lead", "trail ", "multi\nline", "multi\nline\n", "tab\there", "quote\"s",
	"back\\slash", "<b>&amp;</b>", "\u2028\u2029", "bell\a\b\f\x00\x1f", "bad\xffutf8", "é日本", "'single'", "{x}", "[1]",
	"*alias", "&anchor", "!tag", "%dir", "@at", "`tick", "|", ">", "1:2", "0o17", "+1", ".5", "1_000", "="}

func randValue(r *rand.Rand, depth int) any {
	switch k := r.IntN(9); {
	case k == 0:
		return nil
	case k == 1:
		return r.IntN(2) == 0
	case k == 2:
		return int64(r.Int64N(1<<40)) - 1<<39
	case k == 3:
		return []float64{0.5, -1.25e-7, 3e21, 1e300, 2, math.Inf(1), math.NaN()}[r.IntN(7)]
	case k == 4 && depth < 2:
		l := make([]any, r.IntN(4))
		for i := range l {
			l[i] = randValue(r, depth+1)
		}
		return l
	case k == 5 && depth < 2:
		m := map[string]any{}
		for range r.IntN(3) {
			m[trickyStrings[r.IntN(len(trickyStrings))]] = randValue(r, depth+1)
		}
		return m
	case k == 6:
		var b strings.Builder
		for range r.IntN(6) {
			b.WriteString(trickyStrings[r.IntN(len(trickyStrings))])
		}
		return b.String()
	}
	return trickyStrings[r.IntN(len(trickyStrings))]
}

// model.Doc's JSON and YAML encodings, built directly, are byte for byte what encoding/json
// and yaml.v3 write for the same keys and values.
func TestDocEncodingsMatchLibraries(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 4))
	for i := range 3000 {
		d := &model.Doc{}
		var ref yaml.Node
		ref.Kind = yaml.MappingNode
		var wantJSON strings.Builder
		wantJSON.WriteByte('{')
		for j := range 1 + r.IntN(6) {
			k := fmt.Sprintf("%s%d", trickyStrings[r.IntN(len(trickyStrings))], j)
			v := randValue(r, 0)
			d.Set(k, v)
			var kn, vn yaml.Node
			if err := kn.Encode(k); err != nil {
				t.Fatal(err)
			}
			if err := vn.Encode(v); err != nil {
				t.Fatal(err)
			}
			ref.Content = append(ref.Content, &kn, &vn)
			if j > 0 {
				wantJSON.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			wantJSON.Write(kb)
			wantJSON.WriteByte(':')
			if vb, err := json.Marshal(v); err == nil {
				wantJSON.Write(vb)
			} else {
				wantJSON.WriteString("<unsupported>")
			}
		}
		wantJSON.WriteByte('}')
		gotJSON, err := d.MarshalJSON()
		if strings.Contains(wantJSON.String(), "<unsupported>") {
			if err == nil {
				t.Fatalf("doc %d: MarshalJSON accepted what encoding/json refuses: %s", i, gotJSON)
			}
		} else if err != nil || string(gotJSON) != wantJSON.String() {
			t.Fatalf("doc %d: MarshalJSON\n got %s (%v)\nwant %s", i, gotJSON, err, wantJSON.String())
		}
		gotYAML, err := yaml.Marshal([]any{d})
		if err != nil {
			t.Fatal(err)
		}
		wantYAML, err := yaml.Marshal([]any{&ref})
		if err != nil {
			t.Fatal(err)
		}
		// The reference went through Node.Encode, which re-parses its output and so turns
		// U+2028/U+2029 next to newlines into plain line breaks: compared for JSON only.
		lineSep := strings.ContainsAny(string(wantJSON.String()), "\u2028\u2029") || strings.Contains(wantJSON.String(), `\u202`)
		if !lineSep && string(gotYAML) != string(wantYAML) {
			t.Fatalf("doc %d: YAML\n got %q\nwant %q", i, gotYAML, wantYAML)
		}
	}
}

// A "<<" value is written as the plain string it is (encoding it through yaml.Node.Encode
// tagged it !!merge), and reads back as that string.
func TestDocYAMLMergeKeyLookalike(t *testing.T) {
	d := &model.Doc{}
	d.Set("a", "<<")
	b, err := yaml.Marshal([]any{d})
	if err != nil {
		t.Fatal(err)
	}
	var back []map[string]any
	if err := yaml.Unmarshal(b, &back); err != nil || len(back) != 1 || back[0]["a"] != "<<" {
		t.Fatalf("%q read back as %v (%v)", b, back, err)
	}
}
