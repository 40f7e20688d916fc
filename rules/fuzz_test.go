package rules

import "testing"

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
