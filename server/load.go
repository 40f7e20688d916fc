package server

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"dataservice/rules"
	"dataservice/store"
)

// readBody reads the whole (size-limited) body; it answers 413 or 400 itself.
func (s *server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		s.writeError(w, r, http.StatusRequestEntityTooLarge, "request body too large")
		return nil, false
	}
	if err != nil {
		s.writeError(w, r, http.StatusBadRequest, "could not read request body")
		return nil, false
	}
	return body, true
}

// loadOptions reads pipeline, action and dryrun; it answers a 400 itself.
func (s *server) loadOptions(w http.ResponseWriter, r *http.Request) (store.LoadOptions, bool) {
	q := r.URL.Query()
	p := principalOf(r)
	opts := store.LoadOptions{Auth: p.auth, DryRun: ParseDryRun(q.Get("dryrun"))}
	if a := strings.ToLower(strings.TrimSpace(q.Get("action"))); a != "" {
		switch a {
		case store.ActionCreate, store.ActionUpdate, store.ActionInit, store.ActionDelete, store.ActionEnable,
			store.ActionDisable, store.ActionNoop:
			opts.Action = a
		default:
			s.writeError(w, r, http.StatusBadRequest, "action must be create, update, init, delete, enable, disable or noop")
			return opts, false
		}
	}
	if name := strings.TrimSpace(q.Get("pipeline")); name != "" {
		pl, err := s.db.PipelineByName(r.Context(), name)
		if err != nil {
			s.fail(w, r, err)
			return opts, false
		}
		if pl.RunPermission != nil && !p.auth.Has(*pl.RunPermission) {
			s.writeError(w, r, http.StatusForbidden, "permission denied")
			return opts, false
		}
		if !pl.IsEnabled {
			// Refused at load time as it is for runs.
			s.writeError(w, r, http.StatusBadRequest, "pipeline "+pl.Keyname+" is disabled")
			return opts, false
		}
		tf, err := rules.LoadTransform(pl.Content, s.db.Now)
		if err != nil {
			s.writeError(w, r, http.StatusBadRequest, "pipeline "+pl.Keyname+": invalid content: "+err.Error())
			return opts, false
		}
		opts.Transform = tf
	}
	return opts, true
}

// loadRequest reads the load options and the body of a load request; it answers
// any 4xx itself.
func (s *server) loadRequest(w http.ResponseWriter, r *http.Request) (store.LoadOptions, []byte, bool) {
	opts, ok := s.loadOptions(w, r)
	if !ok {
		return opts, nil, false
	}
	body, ok := s.readBody(w, r)
	return opts, body, ok
}

// writeGate applies an endpoint's permissions, then refuses read-only keys.
func (s *server) writeGate(w http.ResponseWriter, r *http.Request, perms ...string) bool {
	if s.denied(w, r, perms...) {
		return false
	}
	if principalOf(r).readOnly() {
		s.writeError(w, r, http.StatusForbidden, "API key is read-only")
		return false
	}
	return true
}

// load: POST /api/load/?pipeline=&action=&dryrun= — a YAML or JSON load document.
// The body is received into a temporary file beside the database, decoded entry by
// entry on the way in (a body over a bound or that does not parse is refused before
// anything is written), then read back entry by entry by the load: memory holds one
// batch whatever the size of the body.
func (s *server) load(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if !s.writeGate(w, r, "p_api_load") {
		return
	}
	opts, ok := s.loadOptions(w, r)
	if !ok {
		return
	}
	body, err := store.SpoolBody("body", r.Body, filepath.Dir(s.db.Path()), s.maxEnt)
	var tooBig *http.MaxBytesError
	var readErr *store.BodyReadError
	switch {
	case errors.As(err, &tooBig):
		s.writeError(w, r, http.StatusRequestEntityTooLarge, "request body too large")
		return
	case errors.As(err, &readErr):
		s.writeError(w, r, http.StatusBadRequest, "could not read request body")
		return
	case err != nil:
		s.fail(w, r, err)
		return
	}
	defer body.Close()
	s.runLoadFrom(w, r, body.Each, opts, body.Warnings)
}

func (s *server) runLoad(w http.ResponseWriter, r *http.Request, entries []*store.Entry, opts store.LoadOptions, warnings []string) {
	s.runLoadFrom(w, r, func(yield func(*store.Entry) error) error {
		for _, e := range entries {
			if err := yield(e); err != nil {
				return err
			}
		}
		return nil
	}, opts, warnings)
}

func (s *server) runLoadFrom(w http.ResponseWriter, r *http.Request, source func(yield func(*store.Entry) error) error,
	opts store.LoadOptions, warnings []string) {
	res, err := s.db.LoadStream(r.Context(), source, opts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if s.onLoad != nil && !res.DryRun {
		s.onLoad(res)
	}
	res.Warnings = warnings
	if res.Messages == nil {
		res.Messages = []store.EntryError{}
	}
	s.reply(w, r, http.StatusOK, res)
}

// rawfile: POST /api/rawfile/?schema=&keyfield=&delimiter=&encoding=&pipeline=&dryrun= — CSV.
func (s *server) rawfile(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if !s.writeGate(w, r, "p_api_rawfile") {
		return
	}
	q := r.URL.Query()
	schema := strings.TrimSpace(q.Get("schema"))
	if schema == "" {
		s.writeError(w, r, http.StatusBadRequest, "missing required parameter: schema")
		return
	}
	keyfield := strings.TrimSpace(q.Get("keyfield"))
	if keyfield == "" {
		keyfield = "keyname"
	}
	delim := q.Get("delimiter")
	if delim == "" {
		delim = s.db.ConfigValue(r.Context(), store.ConfigCSVDelimiter)
	}
	dr, n := utf8.DecodeRuneInString(delim)
	if n != len(delim) || dr == utf8.RuneError || dr == '"' || dr == '\r' || dr == '\n' {
		s.writeError(w, r, http.StatusBadRequest, "delimiter must be one character (not a quote or newline)")
		return
	}
	encoding := strings.ToLower(strings.TrimSpace(q.Get("encoding")))
	if encoding == "" {
		encoding = "utf-8"
	}
	if encoding != "utf-8" && encoding != "utf8" && encoding != "iso-8859-1" && encoding != "latin1" {
		s.writeError(w, r, http.StatusBadRequest, "encoding must be utf-8 or iso-8859-1")
		return
	}
	opts, body, ok := s.loadRequest(w, r)
	if !ok {
		return
	}
	entries, err := parseCSV(body, schema, keyfield, dr, encoding == "iso-8859-1" || encoding == "latin1", s.maxEnt)
	if errors.Is(err, errTooManyRows) {
		s.writeError(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("more than %d rows in one request; split the file", s.maxEnt))
		return
	}
	if err != nil {
		s.writeError(w, r, http.StatusBadRequest, err.Error())
		return
	}
	s.runLoad(w, r, entries, opts, nil)
}

// ParseCSV turns a CSV body (header row first) into load entries of schema: the
// keyfield column is the keyname; other columns are fields (empty cells clear them).
func ParseCSV(body []byte, schema, keyfield string, delim rune, latin1 bool) ([]*store.Entry, error) {
	return parseCSV(body, schema, keyfield, delim, latin1, 0)
}

// DefaultMaxEntries is the default bound on the entries of one load or rawfile request.
const DefaultMaxEntries = 100000

var errTooManyRows = errors.New("too many rows")

// parseCSV is ParseCSV with a bound on the rows (0: none).
func parseCSV(body []byte, schema, keyfield string, delim rune, latin1 bool, maxRows int) ([]*store.Entry, error) {
	if latin1 {
		var b strings.Builder
		for _, c := range body {
			b.WriteRune(rune(c))
		}
		body = []byte(b.String())
	} else if !utf8.Valid(body) {
		return nil, errors.New("body is not valid UTF-8 (set encoding=iso-8859-1 for Latin-1 files)")
	}
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	cr := csv.NewReader(bytes.NewReader(body))
	cr.Comma = delim
	cr.ReuseRecord = false
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("empty CSV: a header row is required")
	}
	if err != nil {
		return nil, errors.New("invalid CSV: " + err.Error())
	}
	keyCol := -1
	seen := map[string]bool{}
	for i, h := range header {
		h = strings.TrimSpace(h)
		header[i] = h
		if h == "" {
			return nil, errors.New("invalid CSV: empty column name in the header")
		}
		if seen[h] {
			return nil, errors.New("invalid CSV: duplicate column " + h)
		}
		seen[h] = true
		if h == keyfield {
			keyCol = i
		}
	}
	if keyCol < 0 {
		found := header
		if len(found) > 20 {
			found = append(found[:20:20], "...")
		}
		return nil, fmt.Errorf("invalid CSV: no column named %s (keyfield); the header has %s (split on %q: "+
			"set delimiter= or the configuration CSV_DELIMITER)", keyfield, strings.Join(found, ", "), string(delim))
	}
	var out []*store.Entry
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, errors.New("invalid CSV: " + err.Error())
		}
		if maxRows > 0 && len(out) >= maxRows {
			return nil, errTooManyRows
		}
		e := &store.Entry{File: "csv", Index: len(out) + 1, Fields: map[string]any{"classname": schema}}
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
