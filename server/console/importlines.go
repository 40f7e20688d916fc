package console

import (
	"bytes"
	"encoding/csv"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"dataservice/store"
)

// docLine is one line of a document the import tool shows: its number and text, Bad
// when an error names it; Gap stands for the lines left out before it.
type docLine struct {
	N    int
	Text string
	Bad  bool
	Gap  bool
}

// Around a marked line the import tool shows linesAround lines before and after it;
// it shows a document of at most linesWhole lines whole, and at most linesShown lines.
const (
	linesAround = 3
	linesWhole  = 40
	linesShown  = 400
)

// lineRE finds the line number a parser's message names: "line 3: ..." (YAML), "on
// line 3, column 5" and "record on line 3" (CSV).
var lineRE = regexp.MustCompile(`\bline (\d+)\b`)

// yamlParserRE matches the YAML library's parser errors (not its scanner's): those
// count lines from 0, so "line 2" is the document's third line (where the collection
// that is not closed starts, or where the unexpected token is).
var yamlParserRE = regexp.MustCompile(`yaml: line \d+: (did not find expected ([',<-]|key|node content)|found (duplicate|incompatible|undefined))`)

// errorLine is the line (from 1) the refusal msg names, or 0.
func errorLine(msg string) int {
	m := lineRE.FindStringSubmatch(msg)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return 0
	}
	if yamlParserRE.MatchString(msg) {
		n++
	}
	return n
}

// markedLines lists the lines of body (when it is text) that the refusal msg names, or
// where the failed entries of a load start, with a few lines around each; nil when no
// line is named or body is no text the page can show.
func markedLines(body []byte, format, delimiter, msg string, failed []store.EntryError) []docLine {
	text, ok := documentText(body)
	if !ok || text == "" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	bad := map[int]bool{}
	if n := errorLine(msg); n >= 1 && n <= len(lines) {
		bad[n] = true
	}
	if len(failed) > 0 {
		starts := entryLines(body, format, delimiter)
		for _, e := range failed {
			if n, ok := starts[e.Index]; ok && n <= len(lines) {
				bad[n] = true
			}
		}
	}
	if len(bad) == 0 {
		return nil
	}
	var out []docLine
	last := 0 // the last line shown
	for i, t := range lines {
		n := i + 1
		near := len(lines) <= linesWhole
		for d := -linesAround; d <= linesAround && !near; d++ {
			near = bad[n+d]
		}
		if !near {
			continue
		}
		if len(out) >= linesShown {
			break
		}
		out = append(out, docLine{N: n, Text: t, Bad: bad[n], Gap: last != 0 && n != last+1 || last == 0 && n != 1})
		last = n
	}
	return out
}

// entryLines maps a document's entries (numbered from 1, as a load report counts
// them) to the lines they start on: the items of a YAML or JSON list (or the one
// object), the records of a CSV file after its header.
func entryLines(body []byte, format, delimiter string) map[int]int {
	out := map[int]int{}
	if format == "csv" {
		cr := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))))
		if d, _ := utf8.DecodeRuneInString(delimiter); d != utf8.RuneError {
			cr.Comma = d
		}
		cr.FieldsPerRecord = -1
		for i := 0; ; i++ {
			_, err := cr.Read()
			if errors.Is(err, io.EOF) || (err != nil && !errors.Is(err, csv.ErrFieldCount)) {
				return out
			}
			if i > 0 {
				line, _ := cr.FieldPos(0)
				out[i] = line
			}
		}
	}
	var root yaml.Node
	if yaml.Unmarshal(body, &root) != nil || len(root.Content) == 0 {
		return out
	}
	doc := root.Content[0]
	switch doc.Kind {
	case yaml.SequenceNode:
		for i, item := range doc.Content {
			out[i+1] = item.Line
		}
	case yaml.MappingNode:
		out[1] = doc.Line
	}
	return out
}
