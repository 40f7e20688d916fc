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
			status, b = http.StatusInternalServerError, []byte("error: internal error\nerrors:\n  - {field: \"\", code: internal, message: internal error}\n")
		}
		w.Header().Set("Content-Type", "application/yaml; charset=utf-8")
		w.WriteHeader(status)
		w.Write(b)
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		s.log.Error("encode json reply", "error", err)
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal error","errors":[{"field":"","code":"internal","message":"internal error"}]}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b)
	w.Write([]byte("\n"))
}

// errorReply is the body of every error reply: the first problem's message in error
// (what a client that reads one message reads), and every problem in errors.
type errorReply struct {
	Error  string          `json:"error" yaml:"error"`
	Errors []model.Problem `json:"errors" yaml:"errors"`
}

// statusCodes are the error codes of the statuses a reply made without a store error
// carries (writeError): the store's codes where one fits.
var statusCodes = map[int]string{
	http.StatusBadRequest:            model.EInvalid,
	http.StatusUnauthorized:          model.EUnauthorized,
	http.StatusForbidden:             model.EForbidden,
	http.StatusNotFound:              model.ENotFound,
	http.StatusMethodNotAllowed:      "method_not_allowed",
	http.StatusConflict:              model.EConflict,
	http.StatusPreconditionFailed:    "precondition_failed",
	http.StatusRequestEntityTooLarge: model.ETooLarge,
	http.StatusUnsupportedMediaType:  "unsupported_media_type",
	http.StatusTooManyRequests:       "too_many_requests",
	http.StatusInternalServerError:   model.EInternal,
	http.StatusServiceUnavailable:    "unavailable",
	http.StatusInsufficientStorage:   model.EDiskFull,
}

// writeError writes {"error": msg, "errors": [{"field": "", "code": ..., "message": msg}]}.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	code, ok := statusCodes[status]
	if !ok {
		code = strings.ReplaceAll(strings.ToLower(http.StatusText(status)), " ", "_")
	}
	s.writeProblems(w, r, status, []model.Problem{{Code: code, Message: msg}})
}

// writeProblems writes the error reply of problems (at least one): the first one's
// message in error, all of them in errors.
func (s *server) writeProblems(w http.ResponseWriter, r *http.Request, status int, problems []model.Problem) {
	if status == http.StatusUnauthorized {
		w.Header().Add("WWW-Authenticate", `Bearer realm="dataservice"`)
		w.Header().Add("WWW-Authenticate", `Basic realm="dataservice", charset="UTF-8"`)
	}
	s.reply(w, r, status, errorReply{Error: problems[0].Message, Errors: problems})
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
	problems := store.ErrorProblems(err)
	if code == model.EInternal || code == model.EDiskFull {
		// The message the store made safe (a full disk names the file), as error says.
		problems = []model.Problem{{Code: code, Message: store.ErrorMessage(err)}}
	}
	s.writeProblems(w, r, httperror.Status(err), problems)
}
