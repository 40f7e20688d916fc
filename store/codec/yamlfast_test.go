package codec

import (
	"math/rand/v2"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"dataservice/store/model"
)

// yamlV3Items is what yaml.v3 writes for docs as one block sequence (Export's other path).
func yamlV3Items(t *testing.T, docs ...*model.Doc) string {
	t.Helper()
	seq := &yaml.Node{Kind: yaml.SequenceNode}
	for _, d := range docs {
		n, err := d.YAMLNode()
		if err != nil {
			t.Fatal(err)
		}
		seq.Content = append(seq.Content, n)
	}
	b, err := yaml.Marshal(seq)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestYAMLItemMatchesYAMLv3 compares the direct writer with yaml.v3 over random
// documents built from tricky pieces: whenever the direct writer accepts a document,
// its bytes are yaml.v3's, and they read back as the same values.
func TestYAMLItemMatchesYAMLv3(t *testing.T) {
	pieces := []string{"a", "Z", "_", "x1", "host-01.example.org", "10.0.0.1", "1.2.3", "1.2", "12", "0x1F", "1e5",
		"1_000", "My server 1", "x y", "a  b ", strings.Repeat("word ", 30) + "end", "2026-11-22", "2026-11-22T10:00:00Z", "1:20", "true", "True", "FALSE", "null", "NULL", "~", "yes",
		"No", "on", "OFF", "y", "n", "", " ", "a b", "a: b", "a #b", "#x", "-x", "- x", "x-", ".5", ".inf", "-.inf",
		".nan", "a\nb", "a\tb", "\"q\"", "'s'", "[x]", "{x}", "a,b", "é", "ü-x", "*a", "&a", "!t", "|", ">", "%",
		"@x", "`x", "a/b", "/x", "x.", "1..2", "1.2.", "<<", "=", "?", "?x", ":x", "x:"}
	rng := rand.New(rand.NewPCG(16, 4))
	pick := func() string {
		if rng.IntN(10) < 8 { // mostly the first pieces, so that many documents are simple
			return pieces[rng.IntN(15)]
		}
		return pieces[rng.IntN(len(pieces))]
	}
	word := func() string {
		s := pick()
		if rng.IntN(3) == 0 {
			s += pick()
		}
		return s
	}
	value := func() any {
		switch rng.IntN(16) {
		case 0:
			return nil
		case 1:
			return rng.IntN(2) == 0
		case 2:
			return int64(rng.IntN(2000) - 1000)
		case 3:
			return rng.Float64() * 100
		case 4:
			l := []any{}
			for range rng.IntN(4) {
				if rng.IntN(5) == 0 {
					l = append(l, int64(rng.IntN(50)))
				} else {
					l = append(l, word())
				}
			}
			return l
		case 5:
			return []any{[]any{}, "x"}
		case 6:
			return map[string]any{"a": word()}
		case 7:
			return strings.Repeat("k", 90+rng.IntN(60))
		}
		return word()
	}
	direct := 0
	for i := 0; i < 20000; i++ {
		d := &model.Doc{}
		for range 1 + rng.IntN(5) {
			k := word()
			if rng.IntN(4) == 0 {
				k = strings.Repeat("f", 95+rng.IntN(40))
			}
			d.Set(k, value())
		}
		got, ok := appendYAMLItem([]byte("prefix"), d)
		if !ok {
			if string(got) != "prefix" {
				t.Fatalf("refused document left bytes behind: %q", got)
			}
			continue
		}
		direct++
		want := yamlV3Items(t, d)
		if string(got[len("prefix"):]) != want {
			t.Fatalf("document %v:\ndirect:\n%s\nyaml.v3:\n%s", d.Vals, got[len("prefix"):], want)
		}
		var back []map[string]any
		if err := yaml.Unmarshal(got[len("prefix"):], &back); err != nil || len(back) != 1 {
			t.Fatalf("%q does not read back: %v", got, err)
		}
	}
	if direct < 1000 {
		t.Fatalf("only %d of 20000 documents were written directly", direct)
	}
	t.Logf("%d of 20000 documents written directly", direct)
}

// TestYAMLItemsConcatenate: items written directly and items encoded by yaml.v3, in
// any order, make the same bytes as one yaml.v3 sequence of them all.
func TestYAMLItemsConcatenate(t *testing.T) {
	simple := &model.Doc{}
	simple.Set("classname", "host")
	simple.Set("keyname", "h1")
	simple.Set("ips", []any{"10.0.0.1", "10.0.0.2"})
	simple.Set("none", []any{})
	other := &model.Doc{}
	other.Set("classname", "host")
	other.Set("keyname", "h 2")
	other.Set("ratio", 0.5)
	var got []byte
	for _, d := range []*model.Doc{simple, other, simple} {
		if b, ok := appendYAMLItem(got, d); ok {
			got = b
		} else {
			got = append(got, yamlV3Items(t, d)...)
		}
	}
	if want := yamlV3Items(t, simple, other, simple); string(got) != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
