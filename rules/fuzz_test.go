package rules

import (
	"strings"
	"testing"

	"dataservice/internal/clip"
)

// sampleEntry is the entry the fuzzer applies successfully parsed content to.
func sampleEntry() Entry {
	return Entry{
		"classname":   "Person",
		"keyname":     "p1",
		"displayname": "Ada Lovelace",
		"is_enabled":  true,
		"_action":     "update",
		"email":       " Ada@Example.COM ",
		"age":         "36",
		"score":       2.5,
		"count":       int64(7),
		"empty":       "",
		"nil":         nil,
		"tags":        []any{"a", int64(1), nil, true},
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"",
		"[]",
		"- field_lower: email\n- field_copy: [email, contact]\n- field_rename: ['', contact, mail]",
		"- set_condition: [c, field_match, email, '@example']\n- field_set: [c, x, 1]\n- field_set: ['!c', y, [a, 2]]",
		"- set_condition: [c, lt, age, count]\n- discard: !c\n- field_toint: [c, age]",
		"- field_regexp_sub: [email, '(\\w+)@', '$1 at ']\n- field_md5: ['', h, email, age]",
		"- field_merge: ['', email, age, m, '-']\n- field_join: ['', j, ',', tags, email]",
		"- field_datetime: ['', d, 'now() -3month +2day']\n- field_uuid: u\n- field_keep: [email]",
		"- field_set: [!c, classname, Org]\n- field_tofloat: score\n- field_tostring: tags",
		"- field_set: &a ['', x, y]\n- field_set: *a",
		"- set_condition: [t, is_true, is_enabled]\n- set_condition: [e, empty, nil]\n- field_nospace: [t, email]",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, content string) {
		p, err := Parse(content)
		if err != nil {
			if p != nil {
				t.Fatalf("Parse returned a pipeline with error %v", err)
			}
			return
		}
		e := sampleEntry()
		discard, err := p.Apply(e, testNow)
		if discard && err != nil {
			t.Fatalf("Apply returned discard with error %v", err)
		}
		// A pipeline is reusable: applying it again must not panic either.
		_, _ = p.Apply(sampleEntry(), testNow)
	})
}

// errorTemplates put a caller's text (X) where each kind of rule error quotes it.
var errorTemplates = []string{
	"- X: ['', a]",
	"- field_lower: [X, a]",
	"- field_lower: ['!X', a]",
	"- field_lower: [!X, a]",
	"- field_lower: ['', 'X']",
	"- field_set: ['', classname, 'X']",
	"- set_condition: [c, X, a]",
	"- set_condition: ['!X', exists, a]",
	"- field_regexp_sub: ['', a, '(X', b]",
	"- set_condition: [c, field_match, a, '[X']",
	"- field_datetime: ['', a, 'now() +1X']",
	"- field_datetime: ['', a, 'X']",
	"- field_set: ['', n, 'X']\n- field_toint: n",
	"- field_set: ['', n, 'X']\n- field_tofloat: n",
	"- field_set: ['', n, 'X']\n- field_merge: ['', n, n, m]\n- field_merge: ['', m, m, m]\n- field_merge: ['', m, m, m]\n- field_merge: ['', m, m, m]\n- field_merge: ['', m, m, m]\n- field_merge: ['', m, m, m]\n- field_merge: ['', m, m, m]",
	"- field_set: ['', 'X', 1]",
	"X",
}

// FuzzErrorsBounded: whatever the text a pipeline's content or a value holds, and
// however large, an error quotes at most about clip.Max bytes of each input it names.
func FuzzErrorsBounded(f *testing.F) {
	for i := range errorTemplates {
		for _, s := range []string{"L", "é", "\x00", `"`, "ab cd", "\xff"} {
			f.Add(uint8(i), s)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, s string) {
		if s == "" {
			return
		}
		// 100,000 bytes of s, escaped for a single-quoted YAML scalar.
		long := strings.Repeat(s, 100_000/len(s)+1)
		long = strings.ReplaceAll(long, "'", "''")
		content := strings.ReplaceAll(errorTemplates[int(which)%len(errorTemplates)], "X", long)
		p, err := Parse(content)
		if err == nil {
			_, err = p.Apply(sampleEntry(), testNow)
		}
		// Two quoted inputs at most, and the message's own words.
		if err != nil && len(err.Error()) > 2*(clip.Max+40)+200 {
			t.Fatalf("a %d-byte error: %.600s", len(err.Error()), err.Error())
		}
	})
}
