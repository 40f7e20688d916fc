package codec

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"dataservice/store/model"
)

// ErrNotStreamable says a document cannot be read item by item and must be parsed
// whole (ParseDocumentLenient): YAML whose top level is not a block sequence, a flow
// sequence, several documents, an alias naming an anchor of another item, text that
// needs the lenient repairs, or anything that does not parse item by item.
var ErrNotStreamable = errors.New("document must be parsed whole")

// notStreamable is ErrNotStreamable with the reason (errors.Is matches it).
type notStreamable struct {
	reason string
	json   error // the JSON decoder's error, for a document that starts as JSON
}

func (e *notStreamable) Error() string        { return ErrNotStreamable.Error() + ": " + e.reason }
func (e *notStreamable) Is(target error) bool { return target == ErrNotStreamable }

// StreamDocument reads a load document from r and calls fn with each entry in order,
// holding one item at a time: JSON (starting with '[' or '{') through a token decoder,
// YAML whose top level is a block sequence split at its items (a "-" at column 0).
// It returns ErrNotStreamable, possibly after calling fn for earlier entries, when
// the document must be parsed whole; an error of fn is returned as is.
func StreamDocument(name string, r io.Reader, fn func(*model.Entry) error) error {
	return streamDocument(name, r, 0, fn)
}

// streamDocument is StreamDocument where a YAML item longer than maxItem bytes (0: no
// bound) makes the document not streamable: an item is parsed whole.
func streamDocument(name string, r io.Reader, maxItem int, fn func(*model.Entry) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	if b, _ := br.Peek(3); bytes.Equal(b, []byte("\xef\xbb\xbf")) {
		br.Discard(3) // a byte order mark
	}
	// Look at the first character that is not white space, consuming nothing (a YAML
	// document's indentation matters); a long white-space prefix is dropped.
	for {
		b, err := br.Peek(br.Size())
		k := bytes.IndexFunc(b, func(c rune) bool { return c != ' ' && c != '\t' && c != '\r' && c != '\n' })
		if k < 0 {
			if len(b) == 0 || errors.Is(err, io.EOF) {
				return nil // only white space: no entries
			}
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				return err
			}
			br.Discard(len(b))
			continue
		}
		if b[k] == '[' || b[k] == '{' {
			br.Discard(k)
			var fnErr error
			err := eachJSON(name, br, func(e *model.Entry) error {
				fnErr = fn(e)
				return fnErr
			})
			if err != nil && fnErr == nil {
				// Not JSON after all: the YAML parser decides.
				return &notStreamable{reason: "invalid JSON: " + err.Error(), json: err}
			}
			return err
		}
		return eachYAMLItem(name, br, maxItem, fn)
	}
}

// eachYAMLItem splits a YAML block sequence at the lines that start with "-" at column
// 0 and parses each item alone. Only comments, blank lines and the items' indented
// lines may appear at column 0 (a leading "---" is allowed). A line longer than the
// reader's buffer is read in pieces: kept in the item, or dropped (a comment or blank
// line before the first item).
func eachYAMLItem(name string, br *bufio.Reader, maxItem int, fn func(*model.Entry) error) error {
	var item bytes.Buffer
	n, started := 0, false
	line, itemLine := 0, 0 // line numbers (1-based) of the current line and item
	// The items share one alias budget, as the parts of one document do.
	d := &decoder{budget: maxExpansion}
	emit := func() error {
		if item.Len() == 0 {
			return nil
		}
		if e, ok := fastItem(name, item.Bytes()); ok {
			item.Reset()
			n++
			e.Index = n
			return fn(e)
		}
		entries, err := parseDocument(name, item.Bytes(), d)
		item.Reset()
		if err != nil {
			// The message without the name, its line numbers counted in the document.
			msg := "internal error"
			if e := (*model.Error)(nil); errors.As(err, &e) {
				msg = e.Message
			}
			msg = strings.TrimPrefix(msg, name+": ")
			msg = yamlErrLine.ReplaceAllStringFunc(msg, func(m string) string {
				k, _ := strconv.Atoi(yamlErrLine.FindStringSubmatch(m)[1])
				return fmt.Sprintf("line %d:", k+itemLine-1)
			})
			return &notStreamable{reason: fmt.Sprintf("item %d: %s", n+1, msg)}
		}
		if len(entries) != 1 {
			return &notStreamable{reason: fmt.Sprintf("item %d (line %d) is not one object", n+1, itemLine)}
		}
		n++
		e := entries[0]
		e.Index = n
		return fn(e)
	}
	keep := func(p []byte) error {
		item.Write(p)
		if maxItem > 0 && item.Len() > maxItem {
			return &notStreamable{reason: fmt.Sprintf("item %d (line %d) is longer than %d bytes", n+1, itemLine, maxItem)}
		}
		return nil
	}
	// Dropped lines must still be text the YAML parser accepts.
	var text textCheck
	drop := func(p []byte) error {
		if !text.check(p) {
			return &notStreamable{reason: fmt.Sprintf("line %d: characters YAML does not allow", line)}
		}
		return nil
	}
	blankOnly := func(p []byte) error {
		if len(bytes.Trim(p, " \r\n")) > 0 || !text.check(p) {
			return &notStreamable{reason: fmt.Sprintf("line %d: indented text before the first item", line)}
		}
		return nil
	}
	for {
		piece, err := br.ReadSlice('\n')
		if len(piece) > 0 {
			line++
			var take func([]byte) error
			switch c := piece[0]; {
			case c == '-' && (len(piece) == 1 || piece[1] == ' ' || piece[1] == '\t' || piece[1] == '\n' || piece[1] == '\r'):
				if e := emit(); e != nil {
					return e
				}
				started, itemLine, take = true, line, keep
			case c == ' ' || c == '\t':
				take = blankOnly
				if started {
					take = keep
				}
			case c == '#' || c == '\n' || c == '\r':
				take = drop
				if started {
					take = keep
				}
			case !started && !errors.Is(err, bufio.ErrBufferFull) && bytes.Equal(bytes.TrimRight(piece, " \t\r\n"), []byte("---")):
				take = drop // the document start marker before the sequence
			default:
				return &notStreamable{reason: fmt.Sprintf("line %d: not an item of a block sequence at column 0", line)}
			}
			// A line longer than the buffer comes in several pieces.
			for {
				if e := take(piece); e != nil {
					return e
				}
				if !errors.Is(err, bufio.ErrBufferFull) {
					break
				}
				piece, err = br.ReadSlice('\n')
			}
			if !text.end() {
				return &notStreamable{reason: fmt.Sprintf("line %d: characters YAML does not allow", line)}
			}
		}
		if errors.Is(err, io.EOF) {
			return emit()
		}
		if err != nil {
			return err
		}
	}
}

// textCheck checks, piece by piece, that a line is UTF-8 of the characters YAML allows
// (tab, line ends and printable characters) and holds no carriage return but the one
// before its line feed (YAML reads a lone one as a line break); a character cut
// between two pieces is completed by the next.
type textCheck struct{ carry []byte }

func (c *textCheck) check(p []byte) bool {
	if len(c.carry) > 0 {
		p = append(c.carry, p...)
		c.carry = nil
	}
	for len(p) > 0 {
		r, size := utf8.DecodeRune(p)
		switch {
		case r == utf8.RuneError && size <= 1:
			if !utf8.FullRune(p) {
				c.carry = append([]byte(nil), p...)
				return true
			}
			return false
		case r == '\r':
			if len(p) == 1 {
				c.carry = []byte{'\r'}
				return true
			}
			if p[1] != '\n' {
				return false
			}
		case !(r == 0x09 || r == 0x0A || r >= 0x20 && r <= 0x7E || r == 0x85 || r >= 0xA0 && r <= 0xD7FF ||
			r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF):
			return false
		}
		p = p[size:]
	}
	return true
}

// end reports whether the line ended on a whole character, and resets the check.
func (c *textCheck) end() bool {
	ok := len(c.carry) == 0
	c.carry = nil
	return ok
}
