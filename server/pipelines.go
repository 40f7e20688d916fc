package server

import (
	"net"
	"net/http"
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
	// 3.–7. Read-only key, schema, identifier, lookup, submission: the same checks
	// and submission as the console's run form.
	p := principalOf(r)
	dryrun := ParseDryRun(r.URL.Query().Get("dryrun"))
	pl, handle, err := s.runner.Start(r.Context(), tasks.RunRequest{Pipeline: ident,
		Schemas: ParseSchemaParam(r.URL.Query().Get("schema")), DryRun: dryrun, Auth: p.auth, OwnerType: tasks.OwnerAPI})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.reply(w, r, http.StatusAccepted, runReply{Pipeline: pl.Keyname, DryRun: dryrun, Handle: handle,
		TaskURL: s.absURL(r, "/api/tasks/"+handle+"/")})
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
