package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"gopkg.in/yaml.v3"

	"dataservice/server/httperror"
	"dataservice/store"
	"dataservice/store/model"
)

// wantsYAML reports whether the reply should be YAML: ?format=yaml, or an Accept
// header that names a YAML type before (or without) JSON.
func wantsYAML(r *http.Request) bool {
	switch strings.ToLower(r.URL.Query().Get("format")) {
	case "yaml":
		return true
	case "json":
		return false
	}
	accept := strings.ToLower(r.Header.Get("Accept"))
	y := strings.Index(accept, "yaml")
	if y < 0 {
		return false
	}
	j := strings.Index(accept, "json")
	return j < 0 || y < j
}

// reply writes v with status in the negotiated format.
func (s *server) reply(w http.ResponseWriter, r *http.Request, status int, v any) {
	if wantsYAML(r) {
		b, err := yaml.Marshal(v)
		if err != nil {
			s.log.Error("encode yaml reply", "error", err)
			status, b = http.StatusInternalServerError, []byte("error: internal error\n")
		}
		w.Header().Set("Content-Type", "application/yaml; charset=utf-8")
		w.WriteHeader(status)
		w.Write(b)
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		s.log.Error("encode json reply", "error", err)
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b)
	w.Write([]byte("\n"))
}

// writeError writes {"error": msg}.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if status == http.StatusUnauthorized {
		w.Header().Add("WWW-Authenticate", `Bearer realm="dataservice"`)
		w.Header().Add("WWW-Authenticate", `Basic realm="dataservice", charset="UTF-8"`)
	}
	s.reply(w, r, status, map[string]string{"error": msg})
}

// fail writes err: internal errors are logged and shown only as "internal error".
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := store.ErrorCode(err)
	if code == model.EInternal && (errors.Is(err, context.Canceled) || r.Context().Err() != nil) {
		// The client went away (or its deadline passed): nothing failed here, and
		// nobody reads the reply.
		s.log.Info("request canceled by the client", "method", r.Method, "path", r.URL.Path, "error", err)
		return
	}
	if code == model.EInternal {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	if code == model.EDiskFull {
		// Logged once per episode by the store, not once per request; this also names
		// the file when the error did not pass a write path yet.
		err = s.db.NoSpace(err)
	}
	s.writeError(w, r, httperror.Status(err), store.ErrorMessage(err))
}
