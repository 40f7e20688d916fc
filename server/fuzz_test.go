package server_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"dataservice/server"
)

// FuzzParseKeyCredential: never panics; ok means a non-empty, trimmed, valid UTF-8
// key and secret that were split at the first separator.
func FuzzParseKeyCredential(f *testing.F) {
	for _, s := range []string{"key:secret", " key : secret ", "key secret", "key  secret with spaces", ":", " ", "",
		"key:", ":secret", "key\xff:secret", "k:s:t", "\tkey\tsecret\t", strings.Repeat("k", 300) + ":s"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, v string, bearer bool) {
		sep := " "
		if bearer {
			sep = ":"
		}
		key, secret, ok := server.ParseKeyCredential(v, sep)
		if !ok {
			return
		}
		if key == "" || secret == "" {
			t.Fatalf("ParseKeyCredential(%q, %q) = %q, %q, true: empty part", v, sep, key, secret)
		}
		if key != strings.TrimSpace(key) || secret != strings.TrimSpace(secret) {
			t.Fatalf("ParseKeyCredential(%q, %q) = %q, %q: untrimmed", v, sep, key, secret)
		}
		if !utf8.ValidString(key) || !utf8.ValidString(secret) {
			t.Fatalf("ParseKeyCredential(%q, %q) = %q, %q: invalid UTF-8", v, sep, key, secret)
		}
		if strings.Contains(key, sep) || !strings.Contains(v, sep) {
			t.Fatalf("ParseKeyCredential(%q, %q) = %q, %q: not split at the first separator", v, sep, key, secret)
		}
	})
}

// FuzzSchemaDryRun: the schema list has no empty or untrimmed items and never more
// items than comma-separated parts; dryrun is true only for true, 1 or yes.
func FuzzSchemaDryRun(f *testing.F) {
	for _, s := range []string{"server", " server , ipam_ip ,", ",,,", " ", "", "%20", "a,,b", "\tx\n,y", " TRUE ", "1", "yes",
		"no", "2", "Yes\t", "tru", "\xff,\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		items := server.ParseSchemaParam(v)
		if len(items) > strings.Count(v, ",")+1 {
			t.Fatalf("ParseSchemaParam(%q) = %q: more items than parts", v, items)
		}
		for _, it := range items {
			if it == "" || it != strings.TrimSpace(it) || strings.Contains(it, ",") {
				t.Fatalf("ParseSchemaParam(%q) = %q: bad item %q", v, items, it)
			}
		}
		if strings.TrimSpace(strings.ReplaceAll(v, ",", " ")) != "" && len(items) == 0 {
			t.Fatalf("ParseSchemaParam(%q) dropped every item", v)
		}
		trimmed := strings.TrimSpace(v)
		matches := false
		for _, w := range []string{"true", "1", "yes"} {
			matches = matches || strings.EqualFold(trimmed, w)
		}
		got := server.ParseDryRun(v)
		if got && !matches {
			t.Fatalf("ParseDryRun(%q) = true for a value other than true, 1, yes", v)
		}
		isASCII := true
		for i := 0; i < len(trimmed); i++ {
			isASCII = isASCII && trimmed[i] < utf8.RuneSelf
		}
		if matches && isASCII && !got {
			t.Fatalf("ParseDryRun(%q) = false, want true", v)
		}
	})
}

// FuzzParseCSV: never panics; every entry it returns has the schema's classname and
// a keyname, and only valid UTF-8 text.
func FuzzParseCSV(f *testing.F) {
	for _, s := range []string{"keyname;hostname\nsrv1;a\n", "keyname\n", "", "\xef\xbb\xbfkeyname;x\r\na;b\r\n",
		"keyname;x\na;b;c\n", "keyname;\"q;q\"\n\"a\nb\";c\n", "keyname;keyname\n", "name;x\n1;2\n", "keyname;x\ncaf\xe9;\xff\n",
		"\"unterminated\n", ";\n;\n"} {
		f.Add([]byte(s), ';', false)
		f.Add([]byte(s), ',', true)
	}
	f.Fuzz(func(t *testing.T, body []byte, delim rune, latin1 bool) {
		entries, err := server.ParseCSV(body, "server", "keyname", delim, latin1)
		if err != nil {
			return
		}
		for _, e := range entries {
			if got := e.Fields["classname"]; got != "server" {
				t.Fatalf("classname = %v, want server", got)
			}
			if _, ok := e.Fields["keyname"].(string); !ok {
				t.Fatalf("entry without a keyname: %v", e.Fields)
			}
			for k, v := range e.Fields {
				s, _ := v.(string)
				if !utf8.ValidString(k) || !utf8.ValidString(s) {
					t.Fatalf("invalid UTF-8 in %q: %q", k, s)
				}
			}
		}
	})
}
