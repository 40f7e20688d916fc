package codec_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"dataservice/store"
	"dataservice/store/codec"
	"dataservice/store/model"
)

// entryText renders the fields of an entry in key order with their Go types.
func entryText(e *model.Entry) string {
	var parts []string
	for _, k := range e.Order {
		parts = append(parts, k+"="+fmtValue(e.Fields[k]))
	}
	return strings.Join(parts, " ")
}

func TestParseDocument(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string // entryText of each entry
	}{
		{
			name: "list of objects keeps key order and types",
			doc:  "- {classname: a, keyname: k, n: 1, f: 1.5, b: true, z: null, l: [1, x]}\n",
			want: []string{"classname=string(a) keyname=string(k) n=int64(1) f=float64(1.5) b=bool(true) z=<nil>(<nil>) l=[]interface {}([1 x])"},
		},
		{
			name: "leading --- is accepted",
			doc:  "---\n- {classname: a, keyname: k}\n",
			want: []string{"classname=string(a) keyname=string(k)"},
		},
		{
			name: "several documents are concatenated",
			doc:  "---\n- {classname: a, keyname: k1}\n---\n- {classname: a, keyname: k2}\n- {classname: a, keyname: k3}\n",
			want: []string{"classname=string(a) keyname=string(k1)", "classname=string(a) keyname=string(k2)", "classname=string(a) keyname=string(k3)"},
		},
		{
			name: "single object is a list of one",
			doc:  "classname: a\nkeyname: k\nport: 80\n",
			want: []string{"classname=string(a) keyname=string(k) port=int64(80)"},
		},
		{
			name: "JSON list is read",
			doc:  `[{"classname": "a", "keyname": "k", "n": 12, "f": 2.25, "s": "12", "m": {"x": [true]}}]`,
			want: []string{"classname=string(a) keyname=string(k) n=int64(12) f=float64(2.25) s=string(12) m=map[string]interface {}(map[x:[true]])"},
		},
		{
			name: "JSON object is a list of one",
			doc:  `{"classname": "a", "keyname": "k"}`,
			want: []string{"classname=string(a) keyname=string(k)"},
		},
		{
			name: ".nan and .inf stay text",
			doc:  "- {classname: a, x: .nan, y: -.inf, z: .NaN}\n",
			want: []string{"classname=string(a) x=string(.nan) y=string(-.inf) z=string(.NaN)"},
		},
		{
			name: "quoted values stay text",
			doc:  `- {classname: a, n: "1", b: "true", d: "2026-01-01"}` + "\n",
			want: []string{"classname=string(a) n=string(1) b=string(true) d=string(2026-01-01)"},
		},
		{
			name: "YAML 1.1 words stay text",
			doc:  "- {classname: a, y: yes, o: on, n: no}\n",
			want: []string{"classname=string(a) y=string(yes) o=string(on) n=string(no)"},
		},
		{
			name: "duplicate keys keep the last value in the first position",
			doc:  "- {classname: a, x: 1, y: 2, x: 3}\n",
			want: []string{"classname=string(a) x=int64(3) y=int64(2)"},
		},
		{
			name: "merge keys copy an anchored mapping and explicit keys win",
			doc:  "- &base {classname: site, keyname: s1, city: Paris}\n- {<<: *base, keyname: s2}\n",
			want: []string{"classname=string(site) keyname=string(s1) city=string(Paris)", "classname=string(site) keyname=string(s2) city=string(Paris)"},
		},
		{
			name: "non-mapping item is an empty entry",
			doc:  "- {classname: a}\n- just text\n",
			want: []string{"classname=string(a)", ""},
		},
		{
			name: "empty document has no entries",
			doc:  " \n\n",
			want: nil,
		},
		{
			name: "null document has no entries",
			doc:  "---\n~\n",
			want: nil,
		},
		{
			name: "comment-only document has no entries",
			doc:  "# nothing here\n",
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries, err := codec.ParseDocument("doc.yml", []byte(tt.doc))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if got, want := len(entries), len(tt.want); got != want {
				t.Fatalf("entries: got %d, want %d", got, want)
			}
			for i, e := range entries {
				if got, want := entryText(e), tt.want[i]; got != want {
					t.Fatalf("entry %d: got %s, want %s", i+1, got, want)
				}
				if got, want := e.Index, i+1; got != want {
					t.Fatalf("entry %d index: got %d, want %d", i+1, got, want)
				}
				if got, want := e.File, "doc.yml"; got != want {
					t.Fatalf("entry %d file: got %q, want %q", i+1, got, want)
				}
			}
		})
	}
}

func TestParseDocumentErrors(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"scalar document is refused", "hello\n", "not a list of objects"},
		{"number document is refused", "42\n", "not a list of objects"},
		{"invalid YAML is refused", "- {classname: a\n", "invalid YAML/JSON"},
		{"invalid JSON is refused", `[{"classname": "a",}`, "invalid YAML/JSON"},
		{"unknown alias is refused", "- {classname: *nope}\n", "invalid YAML/JSON"},
		{"mapping key that is a list is refused", "- {[a, b]: 1}\n", "keys must be scalars"},
		{"merge of a scalar is refused", "- {<<: 5, classname: a}\n", "merge key"},
		{"second document that is a scalar is refused", "- {classname: a}\n---\nhello\n", "not a list of objects"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries, err := codec.ParseDocument("doc.yml", []byte(tt.doc))
			if err == nil {
				t.Fatalf("parse: got %d entries, want an error", len(entries))
			}
			if got, want := store.ErrorCode(err), model.EInvalid; got != want {
				t.Fatalf("error code: got %q, want %q", got, want)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "doc.yml") {
				t.Fatalf("error %q does not contain %q and the file name", err, tt.want)
			}
		})
	}
}

// billionLaughs is the classic alias bomb: 10 levels of 10 aliases expand to 10^10
// values.
func billionLaughs() string {
	var b strings.Builder
	b.WriteString("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [", i, i)
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	b.WriteString("classname: bomb\n")
	return b.String()
}

// mergeBomb nests merge keys of empty mappings: 2^60 merges and no value to count.
func mergeBomb() string {
	var b strings.Builder
	b.WriteString("- a0: &a0 {}\n")
	for i := 1; i <= 60; i++ {
		fmt.Fprintf(&b, "  a%d: &a%d {<<: *a%d, <<: *a%d}\n", i, i, i-1, i-1)
	}
	b.WriteString("- {classname: bomb, <<: *a60}\n")
	return b.String()
}

func TestParseDocumentRefusesAliasBombs(t *testing.T) {
	for name, doc := range map[string]string{"billion laughs": billionLaughs(), "nested merge keys": mergeBomb()} {
		t.Run(name+" is refused", func(t *testing.T) {
			entries, err := codec.ParseDocument("bomb.yml", []byte(doc))
			if err == nil {
				t.Fatalf("parse: got %d entries, want an error", len(entries))
			}
			if !strings.Contains(err.Error(), "alias bomb") {
				t.Fatalf("error %q does not mention the alias bomb", err)
			}
		})
	}
	t.Run("large document without aliases is accepted", func(t *testing.T) {
		var b strings.Builder
		for i := 0; i < 40000; i++ {
			fmt.Fprintf(&b, "- {classname: x, keyname: k%d, a: 1, b: [2, 3]}\n", i)
		}
		entries, err := codec.ParseDocument("big.yml", []byte(b.String()))
		if err != nil {
			t.Fatalf("parse 240k plain values: %v", err)
		}
		if got, want := len(entries), 40000; got != want {
			t.Fatalf("entries: got %d, want %d", got, want)
		}
	})
	t.Run("moderate aliasing is accepted", func(t *testing.T) {
		doc := "- &a {classname: x, keyname: k, tags: &t [a, b, c]}\n- {classname: x, keyname: k2, tags: *t}\n"
		entries, err := codec.ParseDocument("ok.yml", []byte(doc))
		if err != nil {
			t.Fatalf("parse: %v", err)
		}
		if got, want := fmtValue(entries[1].Fields["tags"]), "[]interface {}([a b c])"; got != want {
			t.Fatalf("aliased tags: got %s, want %s", got, want)
		}
	})
}

func TestEntryKeyAndSet(t *testing.T) {
	entries, err := codec.ParseDocument("x", []byte("- {classname: ' _user ', login: jdoe}\n- {classname: a, keyname: 7}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cls, key := entries[0].Key(); cls+"/"+key != "_user/jdoe" {
		t.Fatalf("Key: got %s/%s, want _user/jdoe", cls, key)
	}
	if cls, key := entries[1].Key(); cls+"/"+key != "a/7" {
		t.Fatalf("Key: got %s/%s, want a/7", cls, key)
	}
	e := model.NewEntry(map[string]any{"keyname": "k", "classname": "c"})
	e.Set("x", int64(1))
	e.Set("keyname", "k2")
	if got, want := entryText(e), "classname=string(c) keyname=string(k2) x=int64(1)"; got != want {
		t.Fatalf("entry: got %s, want %s", got, want)
	}
}

func FuzzParseDocument(f *testing.F) {
	seeds := []string{
		"",
		"---\n- {classname: a, keyname: k}\n",
		"classname: a\nkeyname: k\n",
		`[{"classname": "a", "keyname": "k", "n": 1.5e300}]`,
		"- {classname: a, x: .nan, y: .inf, z: 0x1F, w: 1e999}\n",
		"- &a {classname: x}\n- {<<: *a, keyname: y}\n",
		"- {a: &x [1, 2], b: *x, c: {<<: {d: 1}}}\n",
		"- {? [a]: 1}\n",
		"--- 1\n--- [2]\n",
		"- !!binary aGVsbG8=\n- {t: !!timestamp 2001-12-14}\n",
		"- {k: !custom v, j: !!str 1, i: !!int '3'}\n",
		billionLaughs(),
		mergeBomb(),
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := codec.ParseDocument("fuzz", data)
		if err != nil {
			if got, want := store.ErrorCode(err), model.EInvalid; got != want {
				t.Fatalf("error code: got %q, want %q (%v)", got, want, err)
			}
			return
		}
		for i, e := range entries {
			if e.Fields == nil {
				t.Fatalf("entry %d: nil fields", i+1)
			}
			if got, want := e.Index, i+1; got != want {
				t.Fatalf("entry %d: index %d", want, got)
			}
			seen := map[string]bool{}
			for _, k := range e.Order {
				if _, ok := e.Fields[k]; !ok || seen[k] {
					t.Fatalf("entry %d: order key %q missing from fields or repeated", i+1, k)
				}
				seen[k] = true
			}
			if got, want := len(seen), len(e.Fields); got != want {
				t.Fatalf("entry %d: %d ordered keys for %d fields", i+1, got, want)
			}
			// Every parsed value is stored as JSON: it must always encode.
			if _, err := json.Marshal(e.Fields); err != nil {
				t.Fatalf("entry %d: fields do not encode as JSON: %v", i+1, err)
			}
			e.Key()
		}
	})
}

// TestParseDocumentBudgetSpansDocuments: many small documents share one expansion
// budget; each alone is within it.
func TestParseDocumentBudgetSpansDocuments(t *testing.T) {
	// One document: 4 levels of 10 aliases under a 10-value list = 10^5 values minus a bit.
	doc := "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\na1: &a1 [*a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0]\n" +
		"a2: &a2 [*a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1]\na3: [*a2, *a2, *a2, *a2, *a2]\nclassname: x\n"
	if _, err := codec.ParseDocument("one.yml", []byte(doc)); err != nil {
		t.Fatalf("one document within the budget: %v", err)
	}
	many := strings.Repeat("---\n"+doc, 30)
	_, err := codec.ParseDocument("many.yml", []byte(many))
	if err == nil || !strings.Contains(err.Error(), "alias bomb") {
		t.Fatalf("30 documents each within the budget: got %v, want the alias bomb error", err)
	}
}

// TestParseBodyJSONMatchesYAML: the streamed JSON decoding gives the entries the YAML
// parser gives for the same JSON text.
func TestParseBodyJSONMatchesYAML(t *testing.T) {
	body := `[{"classname":"srv","keyname":"a","n":1,"f":1.5,"b":true,"z":null,"l":[1,"x",{"k":2}],"m":{"q":"r"},"n":2},{"keyname":"b","classname":"srv"}]`
	got, _, err := codec.ParseBody("b", []byte(body), 0)
	if err != nil {
		t.Fatalf("ParseBody: %v", err)
	}
	want, err := codec.ParseDocument("b", []byte(body))
	if err != nil {
		t.Fatalf("ParseDocument: %v", err)
	}
	if g, w := fmt.Sprintf("%#v", entryShapes(got)), fmt.Sprintf("%#v", entryShapes(want)); g != w {
		t.Fatalf("streamed JSON:\n%s\nYAML parser:\n%s", g, w)
	}
	if _, _, err := codec.ParseBody("b", []byte(body), 1); store.ErrorCode(err) != model.ETooLarge {
		t.Fatalf("two entries over a bound of one: got %v, want %s", err, model.ETooLarge)
	}
}

func entryShapes(es []*model.Entry) []string {
	var out []string
	for _, e := range es {
		s := fmt.Sprintf("%s %d %v:", e.File, e.Index, e.Order)
		for _, k := range e.Order {
			s += fmt.Sprintf(" %s=%#v", k, e.Fields[k])
		}
		out = append(out, s)
	}
	return out
}
