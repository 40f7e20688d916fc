package console

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

var funcs = template.FuncMap{
	"link":  link,
	"num":   num,
	"words": words,
}

// num is thousands for a template's integer of any type (counts are int, task
// progress int64, address counts uint64); anything else is printed as it is.
func num(v any) string {
	switch n := v.(type) {
	case int:
		return thousands(int64(n))
	case int64:
		return thousands(n)
	case uint64:
		return groupDigits(strconv.FormatUint(n, 10))
	}
	return fmt.Sprint(v)
}

// thousands writes n with a comma between groups of three digits (12,400), as the
// console shows every count.
func thousands[T int | int64](n T) string {
	if n < 0 {
		return "-" + groupDigits(strconv.FormatUint(uint64(-int64(n)), 10))
	}
	return groupDigits(strconv.FormatInt(int64(n), 10))
}

// groupDigits puts a comma between the groups of three of the digits s.
func groupDigits(s string) string {
	out := make([]byte, 0, len(s)+len(s)/3)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// tokenMin is the length (in characters) from which a word of a value is kept on one
// line: shorter ones fit in any column.
const tokenMin = 16

// words is the HTML of a value whose long words (hostnames, paths, identifiers) are
// never broken across lines: a browser breaks a line after a hyphen or a slash, which
// cuts "rack-0a12…" mid-token. Such a word is wrapped in <span class="tok"> (no break
// inside); lines still break at the spaces between words, and the text a user copies
// is unchanged.
func words(s string) template.HTML {
	var b strings.Builder
	writeWords(&b, s)
	return template.HTML(b.String())
}

// writeWords writes words(s) to b (pages that render many values in Go write them
// into one builder).
func writeWords(b *strings.Builder, s string) {
	for s != "" {
		i := strings.IndexFunc(s, unicode.IsSpace)
		if i < 0 {
			i = len(s)
		}
		if tok := s[:i]; utf8.RuneCountInString(tok) >= tokenMin && strings.ContainsFunc(tok, breaksLine) {
			b.WriteString(`<span class="tok">`)
			writeEscaped(b, tok)
			b.WriteString(`</span>`)
		} else {
			writeEscaped(b, tok)
		}
		s = s[i:]
		j := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsSpace(r) })
		if j < 0 {
			j = len(s)
		}
		writeEscaped(b, s[:j])
		s = s[j:]
	}
}

// writeEscaped writes s to b escaped for HTML text or a quoted attribute exactly as
// html/template escapes a string there ({{.}} in text or in title="{{.}}"): the
// characters HTML gives a meaning, and + (which html/template escapes too, so a
// value is the same bytes whichever renders it), as character references; a NUL as
// U+FFFD. No copy is made when s needs no escaping.
func writeEscaped(b *strings.Builder, s string) {
	if !strings.ContainsAny(s, "<>&'\"+\x00") {
		b.WriteString(s)
		return
	}
	htmlEscaper.WriteString(b, s)
}

// htmlEscaper is writeEscaped's replacement of each character it escapes.
var htmlEscaper = strings.NewReplacer("<", "&lt;", ">", "&gt;", "&", "&amp;", "'", "&#39;", `"`, "&#34;",
	"+", "&#43;", "\x00", "\uFFFD")

// breaksLine: a browser may break a line after r inside a word (punctuation and
// symbols: hyphens, slashes, question marks, closing brackets, ...).
func breaksLine(r rune) bool {
	return unicode.IsPunct(r) || unicode.IsSymbol(r)
}
