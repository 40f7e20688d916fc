package codec

import (
	"bytes"
	"encoding/csv"
	"errors"
	"io"
	"strings"
	"unicode/utf8"

	"dataservice/internal/clip"
	"dataservice/store/model"
)

// CSVOptions say how a CSV document becomes load entries: every row is an entry of
// Schema, the Keyfield column (default "keyname") its keyname, the other columns its
// fields. The API's raw-file endpoint and the console's import tool share them.
type CSVOptions struct {
	Schema string
	// Keyfield names the column holding the keyname (default "keyname").
	Keyfield string
	// Delimiter is one character, not a quote or a newline (the caller fills in the
	// configured default, CSV_DELIMITER, when the user gave none).
	Delimiter string
	// Encoding is utf-8 (default) or iso-8859-1 (latin1).
	Encoding string
	// MaxRows bounds the rows (0: none); more is an ETooLarge error.
	MaxRows int
	// MaxCells bounds the cells, rows × columns (0: none); more is an ETooLarge error.
	// A request's CSV needs it: a cell costs one delimiter in the body but a field of
	// an entry in memory.
	MaxCells int

	delim  rune
	latin1 bool
}

// CSVMaxCells is the MaxCells of the CSV a request may send (the API's raw file and
// the console's import): 100,000 rows of 20 columns.
const CSVMaxCells = 2_000_000

// Check validates and completes the options; its errors are model.EInvalid with a message
// naming the option.
func (o *CSVOptions) Check() error {
	o.Schema = strings.TrimSpace(o.Schema)
	if o.Schema == "" {
		return model.Errorf(model.EInvalid, "missing required parameter: schema")
	}
	o.Keyfield = strings.TrimSpace(o.Keyfield)
	if o.Keyfield == "" {
		o.Keyfield = "keyname"
	}
	dr, n := utf8.DecodeRuneInString(o.Delimiter)
	if n != len(o.Delimiter) || dr == utf8.RuneError || dr == '"' || dr == '\r' || dr == '\n' {
		return model.Errorf(model.EInvalid, "delimiter must be one character (not a quote or newline)")
	}
	o.delim = dr
	enc := strings.ToLower(strings.TrimSpace(o.Encoding))
	switch enc {
	case "", "utf-8", "utf8":
		o.Encoding, o.latin1 = "utf-8", false
	case "iso-8859-1", "latin1":
		o.Encoding, o.latin1 = "iso-8859-1", true
	default:
		return model.Errorf(model.EInvalid, "encoding must be utf-8 or iso-8859-1")
	}
	return nil
}

// ParseCSV turns a CSV body (header row first) into load entries as o says: the
// keyfield column is the keyname; other columns are fields (empty cells clear them).
// Errors are model.EInvalid naming what is wrong, or model.ETooLarge beyond o.MaxRows rows.
func ParseCSV(body []byte, o CSVOptions) ([]*model.Entry, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	if o.latin1 {
		var b strings.Builder
		for _, c := range body {
			b.WriteRune(rune(c))
		}
		body = []byte(b.String())
	} else if !utf8.Valid(body) {
		return nil, model.Errorf(model.EInvalid, "body is not valid UTF-8 (set encoding=iso-8859-1 for Latin-1 files)")
	}
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	cr := csv.NewReader(bytes.NewReader(body))
	cr.Comma = o.delim
	cr.ReuseRecord = false
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, model.Errorf(model.EInvalid, "empty CSV: a header row is required")
	}
	if err != nil {
		return nil, model.Errorf(model.EInvalid, "invalid CSV: %s", err.Error())
	}
	keyCol := -1
	seen := map[string]bool{}
	for i, h := range header {
		h = strings.TrimSpace(h)
		header[i] = h
		if h == "" {
			return nil, model.Errorf(model.EInvalid, "invalid CSV: empty column name in the header")
		}
		if seen[h] {
			return nil, model.Errorf(model.EInvalid, "invalid CSV: duplicate column %s", clip.Text(h))
		}
		seen[h] = true
		if h == o.Keyfield {
			keyCol = i
		}
	}
	if keyCol < 0 {
		found := header
		if len(found) > 20 {
			found = append(found[:20:20], "...")
		}
		return nil, model.Errorf(model.EInvalid, "invalid CSV: no column named %s (keyfield); the header has %s (split on %q: "+
			"set delimiter= or the configuration CSV_DELIMITER)", clip.Text(o.Keyfield), clip.Text(strings.Join(found, ", ")), string(o.delim))
	}
	tooManyCells := func() error {
		return model.Errorf(model.ETooLarge, "more than %d cells (rows × columns) in one request; split the file", o.MaxCells)
	}
	if o.MaxCells > 0 && len(header) > o.MaxCells {
		return nil, tooManyCells()
	}
	cells := 0
	var out []*model.Entry
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, model.Errorf(model.EInvalid, "invalid CSV: %s", err.Error())
		}
		if o.MaxRows > 0 && len(out) >= o.MaxRows {
			return nil, model.Errorf(model.ETooLarge, "more than %d rows in one request; split the file", o.MaxRows)
		}
		if cells += len(rec); o.MaxCells > 0 && cells > o.MaxCells {
			return nil, tooManyCells()
		}
		e := &model.Entry{File: "csv", Index: len(out) + 1, Fields: map[string]any{"classname": o.Schema}}
		e.Order = append(e.Order, "classname")
		for i, h := range header {
			name := h
			if i == keyCol {
				name = "keyname"
			} else if h == "keyname" || h == "classname" {
				continue
			}
			e.Set(name, rec[i])
		}
		out = append(out, e)
	}
	return out, nil
}
