package store

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// ErrNotStreamable says a document cannot be read item by item and must be parsed
// whole (ParseDocumentLenient): YAML whose top level is not a block sequence, a flow
// sequence, several documents, an alias naming an anchor of another item, text that
// needs the lenient repairs, or anything that does not parse item by item.
var ErrNotStreamable = errors.New("document must be parsed whole")

// StreamDocument reads a load document from r and calls fn with each entry in order,
// holding one item at a time: JSON (starting with '[' or '{') through a token decoder,
// YAML whose top level is a block sequence split at its items (a "-" at column 0).
// It returns ErrNotStreamable, possibly after calling fn for earlier entries, when
// the document must be parsed whole; an error of fn is returned as is.
func StreamDocument(name string, r io.Reader, fn func(*Entry) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
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
			err := eachJSON(name, br, func(e *Entry) error {
				fnErr = fn(e)
				return fnErr
			})
			if err != nil && fnErr == nil {
				return ErrNotStreamable // not JSON after all: the YAML parser decides
			}
			return err
		}
		return eachYAMLItem(name, br, fn)
	}
}

// eachYAMLItem splits a YAML block sequence at the lines that start with "-" at column
// 0 and parses each item alone. Only comments, blank lines and the items' indented
// lines may appear at column 0 (a leading "---" is allowed).
func eachYAMLItem(name string, br *bufio.Reader, fn func(*Entry) error) error {
	var item bytes.Buffer
	n, started := 0, false
	emit := func() error {
		if item.Len() == 0 {
			return nil
		}
		entries, err := ParseDocument(name, item.Bytes())
		item.Reset()
		if err != nil || len(entries) != 1 {
			return ErrNotStreamable
		}
		n++
		e := entries[0]
		e.Index = n
		return fn(e)
	}
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: gather it whole.
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if len(line) > 0 {
			switch c := line[0]; {
			case c == '-' && (len(line) == 1 || line[1] == ' ' || line[1] == '\t' || line[1] == '\n' || line[1] == '\r'):
				if e := emit(); e != nil {
					return e
				}
				started = true
				item.Write(line)
			case c == ' ' || c == '\t':
				if !started && len(bytes.TrimSpace(line)) > 0 {
					return ErrNotStreamable
				}
				item.Write(line)
			case c == '#' || c == '\n' || c == '\r':
				if started {
					item.Write(line)
				}
			case !started && bytes.Equal(bytes.TrimRight(line, " \t\r\n"), []byte("---")):
				// The document start marker before the sequence.
			default:
				return ErrNotStreamable
			}
		}
		if errors.Is(err, io.EOF) {
			return emit()
		}
	}
}
