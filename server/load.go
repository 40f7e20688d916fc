package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"dataservice/store"
	"dataservice/store/codec"
	"dataservice/store/model"
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

// loadOptions reads pipeline, action, dryrun and strict (read as dryrun is); it answers a 400 itself.
func (s *server) loadOptions(w http.ResponseWriter, r *http.Request) (store.LoadOptions, bool) {
	q := r.URL.Query()
	p := principalOf(r)
	opts := store.LoadOptions{Auth: p.auth, DryRun: ParseDryRun(q.Get("dryrun")), Strict: ParseDryRun(q.Get("strict"))}
	if a := model.Action(strings.ToLower(strings.TrimSpace(q.Get("action")))); a != "" {
		switch a {
		case model.ActionCreate, model.ActionUpdate, model.ActionInit, model.ActionDelete, model.ActionEnable,
			model.ActionDisable, model.ActionNoop:
			opts.Action = a
		default:
			s.writeError(w, r, http.StatusBadRequest, "action must be create, update, init, delete, enable, disable or noop")
			return opts, false
		}
	}
	if name := strings.TrimSpace(q.Get("pipeline")); name != "" {
		tf, err := s.db.LoadTransform(r.Context(), p.auth, name)
		if err != nil {
			s.fail(w, r, err)
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
// The body is received into memory, or beyond 1 MiB a temporary file beside the
// database, decoded entry by entry on the way in (a body over a bound or that does not parse is refused before
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
	body, err := codec.SpoolBody("body", r.Body, s.db.TempDir(), s.maxEnt)
	var tooBig *http.MaxBytesError
	var readErr *codec.BodyReadError
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

func (s *server) runLoad(w http.ResponseWriter, r *http.Request, entries []*model.Entry, opts store.LoadOptions, warnings []string) {
	s.runLoadFrom(w, r, func(yield func(*model.Entry) error) error {
		for _, e := range entries {
			if err := yield(e); err != nil {
				return err
			}
		}
		return nil
	}, opts, warnings)
}

func (s *server) runLoadFrom(w http.ResponseWriter, r *http.Request, source func(yield func(*model.Entry) error) error,
	opts store.LoadOptions, warnings []string) {
	res, err := s.db.LoadStream(r.Context(), source, opts)
	if store.ErrorCode(err) == model.EDiskFull && res != nil && !res.DryRun {
		// Logged once per episode by the store; the client learns how to complete it.
		s.writeError(w, r, http.StatusInsufficientStorage, fmt.Sprintf("%s; %d entries of this load were committed "+
			"before it: sending the same body again completes the load", store.ErrorMessage(s.db.NoSpace(err)), res.Loaded()))
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if s.onLoad != nil && !res.DryRun {
		s.onLoad(res)
	}
	// The parser's repairs first, then the load's own warnings (IP collection).
	res.Warnings = append(warnings, res.Warnings...)
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
	co := codec.CSVOptions{Schema: q.Get("schema"), Keyfield: q.Get("keyfield"), Delimiter: q.Get("delimiter"),
		Encoding: q.Get("encoding"), MaxRows: s.maxEnt, MaxCells: codec.CSVMaxCells}
	if co.Delimiter == "" {
		co.Delimiter = s.db.ConfigValue(r.Context(), store.ConfigCSVDelimiter)
	}
	if err := co.Check(); err != nil {
		s.fail(w, r, err)
		return
	}
	opts, body, ok := s.loadRequest(w, r)
	if !ok {
		return
	}
	entries, err := codec.ParseCSV(body, co)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.runLoad(w, r, entries, opts, nil)
}

// ParseCSV turns a CSV body (header row first) into load entries of schema: the
// keyfield column is the keyname; other columns are fields (empty cells clear them).
func ParseCSV(body []byte, schema, keyfield string, delim rune, latin1 bool) ([]*model.Entry, error) {
	enc := "utf-8"
	if latin1 {
		enc = "iso-8859-1"
	}
	return codec.ParseCSV(body, codec.CSVOptions{Schema: schema, Keyfield: keyfield, Delimiter: string(delim), Encoding: enc})
}

// DefaultMaxEntries is the default bound on the entries of one load or rawfile request.
const DefaultMaxEntries = 100000
