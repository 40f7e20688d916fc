package codec_test

import (
	"strings"
	"testing"

	"dataservice/internal/clip"
	"dataservice/store/codec"
)

// readerTemplates put a caller's text (X) where the YAML, JSON and CSV readers may
// quote it: a name the document is read under, keys, values, a CSV header.
var readerTemplates = []struct {
	name, body, keyfield string
	csv                  bool
}{
	{name: "f.yml", body: "- {classname: a, keyname: X}\n- [X\n"},
	{name: "f.yml", body: "- {X: 1, X: 2}\n"},
	{name: "f.yml", body: "- classname:X\n  keyname: k\n"},
	{name: "f.yml", body: "X: [1\n"},
	{name: "f.yml", body: "- !X {classname: a}\n"},
	{name: "f.yml", body: "- {a: *X}\n"},
	{name: "f.json", body: `[{"classname": "X", "keyname": X}]`},
	{name: "f.json", body: `{"X": [1, }`},
	{name: "f.csv", body: "X\nv\n", csv: true},
	{name: "f.csv", body: "keyname;X;X\nk;1;2\n", csv: true},
	{name: "f.csv", body: "keyname;a\nk;\"X\n", csv: true},
	{name: "f.csv", body: "keyname\nk\n", keyfield: "X", csv: true},
}

// FuzzReaderErrorsBounded: an error of the document and CSV readers quotes at most
// about clip.Max bytes of each input it names, however large the input.
func FuzzReaderErrorsBounded(f *testing.F) {
	for i := range readerTemplates {
		for _, s := range []string{"L", "é", "\x00", `"`, "a b", "\xff", "'"} {
			f.Add(uint8(i), s)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, s string) {
		if s == "" {
			return
		}
		tp := readerTemplates[int(which)%len(readerTemplates)]
		long := strings.Repeat(s, 100_000/len(s)+1)
		body := []byte(strings.ReplaceAll(tp.body, "X", long))
		var err error
		if tp.csv {
			_, err = codec.ParseCSV(body, codec.CSVOptions{Schema: "a", Delimiter: ";", Keyfield: strings.ReplaceAll(tp.keyfield, "X", long)})
		} else {
			_, err = codec.ParseDocument(strings.ReplaceAll(tp.name, "X", long), body)
		}
		if err != nil && len(err.Error()) > 2*(clip.Max+40)+200 {
			t.Fatalf("a %d-byte error: %.600s", len(err.Error()), err.Error())
		}
	})
}
