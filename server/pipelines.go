package server

import (
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/julienschmidt/httprouter"

	"dataservice/store"
	"dataservice/tasks"
)

// pipelines: /api/pipelines/ (list) and /api/pipelines/<name or id>/ (run), any method.
func (s *server) pipelines(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	rest := ps.ByName("rest")
	if rest == "/" {
		s.pipelineList(w, r)
		return
	}
	if !strings.HasSuffix(rest, "/") {
		s.writeError(w, r, http.StatusNotFound, "not found")
		return
	}
	s.pipelineRun(w, r, strings.TrimSuffix(strings.TrimPrefix(rest, "/"), "/"))
}

type pipelineListReply struct {
	Count     int               `json:"count" yaml:"count"`
	Pipelines []*store.Pipeline `json:"pipelines" yaml:"pipelines"`
}

// pipelineList: GET /api/pipelines/ — seed rules 1–3.
func (s *server) pipelineList(w http.ResponseWriter, r *http.Request) {
	if s.denied(w, r, "p_data_access") {
		return
	}
	if r.Method != http.MethodGet {
		s.writeError(w, r, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	list, err := s.db.Pipelines(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if list == nil {
		list = []*store.Pipeline{}
	}
	s.reply(w, r, http.StatusOK, pipelineListReply{Count: len(list), Pipelines: list})
}

// ParseSchemaParam applies the seed's rules to the `schema` parameter: the whole value
// and each comma-separated item are trimmed, empty items dropped.
func ParseSchemaParam(v string) []string {
	var out []string
	for _, it := range strings.Split(strings.TrimSpace(v), ",") {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}

// ParseDryRun applies the seed's rule: trimmed, case-insensitive true, 1 or yes.
func ParseDryRun(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "1", "yes":
		return true
	}
	return false
}

type runReply struct {
	Pipeline string `json:"pipeline" yaml:"pipeline"`
	DryRun   bool   `json:"dryrun" yaml:"dryrun"`
	Handle   string `json:"handle" yaml:"handle"`
	TaskURL  string `json:"task_url" yaml:"task_url"`
}

// pipelineRun: POST /api/pipelines/<name>/ and /api/pipelines/<id>/ — the seed's
// order of checks, first failure wins.
func (s *server) pipelineRun(w http.ResponseWriter, r *http.Request, ident string) {
	// 1. p_pipeline_run.
	if s.denied(w, r, "p_pipeline_run") {
		return
	}
	// 2. Method.
	if r.Method != http.MethodPost {
		s.writeError(w, r, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	p := principalOf(r)
	// 3. Read-only key.
	if p.readOnly() {
		s.writeError(w, r, http.StatusForbidden, "API key is read-only")
		return
	}
	// 4. schema.
	q := r.URL.Query()
	schemas := ParseSchemaParam(q.Get("schema"))
	if len(schemas) == 0 {
		s.writeError(w, r, http.StatusBadRequest, "missing required parameter: schema")
		return
	}
	// 5. Identifier.
	ident = strings.TrimSpace(ident)
	if ident == "" {
		s.writeError(w, r, http.StatusBadRequest, "missing pipeline identifier")
		return
	}
	// 6. Lookup: digits are an id first, then a keyname.
	pl, err := s.findPipeline(r, ident)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// 7. Submit.
	dryrun := ParseDryRun(q.Get("dryrun"))
	handle, err := s.runner.Submit(r.Context(), tasks.Params{Pipeline: pl.Keyname, Schemas: schemas, DryRun: dryrun,
		Auth: p.auth, OwnerType: "api", OwnerID: p.ownerID()})
	if err != nil {
		msg := "failed to submit task" // the seed's text when the submission gives none
		if store.ErrorCode(err) != store.EInternal {
			if m := store.ErrorMessage(err); m != "" {
				msg = m
			}
		} else {
			s.log.Error("submit task", "pipeline", pl.Keyname, "error", err)
		}
		s.writeError(w, r, http.StatusBadRequest, msg)
		return
	}
	s.reply(w, r, http.StatusAccepted, runReply{Pipeline: pl.Keyname, DryRun: dryrun, Handle: handle,
		TaskURL: s.absURL(r, "/api/tasks/"+handle+"/")})
}

func (s *server) findPipeline(r *http.Request, ident string) (*store.Pipeline, error) {
	notFound := store.Errorf(store.ENotFound, "pipeline not found")
	if len(ident) > 256 {
		return nil, notFound
	}
	if id, err := strconv.ParseInt(ident, 10, 64); err == nil && strings.Trim(ident, "0123456789") == "" {
		pl, err := s.db.PipelineByID(r.Context(), id)
		if err == nil || !store.IsNotFound(err) {
			return pl, err
		}
	}
	pl, err := s.db.PipelineByName(r.Context(), ident)
	if store.IsNotFound(err) {
		return nil, notFound
	}
	return pl, err
}

// absURL makes an absolute URL from SERVICE_BASE_URL, else from the request's Host,
// else (an HTTP/1.0 request without Host) from the address the request arrived on.
func (s *server) absURL(r *http.Request, path string) string {
	if s.baseURL != "" {
		return s.baseURL + path
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	host := r.Host
	if host == "" {
		if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && a != nil {
			host = a.String()
		} else {
			host = "localhost"
		}
	}
	return scheme + "://" + host + path
}
