package server

import (
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"
)

// endpoint is one line of the API index.
type endpoint struct {
	Method string `json:"method" yaml:"method"`
	Path   string `json:"path" yaml:"path"`
	Doc    string `json:"doc" yaml:"doc"`
}

// apiEndpoints is what GET / and GET /api/ point at. It names no version and needs no
// credentials: it says only what the documentation says.
var apiEndpoints = []endpoint{
	{"GET", "/api/ping/", "liveness, no authentication"},
	{"GET", "/api/version/", "version, db_version, instance_uuid"},
	{"GET", "/api/schemas/", "schemas; /api/schemas/NAME/ one schema with its fields"},
	{"GET", "/api/instances/SCHEMA/?page=&size=&search=", "instances; /api/instances/SCHEMA/KEYNAME/ one instance, with its ETag"},
	{"POST", "/api/instances/SCHEMA/?dryrun=", "create one instance; PUT, PATCH (merge patch) and DELETE /api/instances/SCHEMA/KEYNAME/ replace, change and delete one (If-Match)"},
	{"POST", "/api/load/?pipeline=&action=&dryrun=", "load a YAML or JSON document"},
	{"POST", "/api/rawfile/?schema=&keyfield=&delimiter=&encoding=&pipeline=&dryrun=", "load a raw CSV body (not multipart)"},
	{"GET", "/api/pipelines/", "pipelines; POST /api/pipelines/NAME/?schema=&dryrun= runs one as a task"},
	{"GET", "/api/tasks/?status=&limit=", "your tasks; /api/tasks/HANDLE/ one task, POST .../cancel/ cancels it"},
	{"GET", "/api/events/?status=&rule=&limit=", "event rules' events and dead letters; POST /api/events/ID/redeliver/ delivers a dead one again"},
	{"GET", "/api/conf/", "configuration entries; POST /api/conf/ changes them"},
	{"GET", "/healthz", "200 while alive; /readyz 200 once start-up is done"},
	{"GET", "/api/openapi.json", "OpenAPI 3.1 description of every route; /api/docs/ renders it"},
}

const apiDocs = "docs/api.md in the source tree (also docs/pipelines.md, docs/loading.md, docs/users.md, docs/configuration.md)"

// index: GET / — the web console's dashboard for browsers (a request accepting HTML),
// else the API index as JSON (or YAML).
func (s *server) index(dashboard httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if strings.Contains(r.Header.Get("Accept"), "text/html") {
			dashboard(w, r, ps)
			return
		}
		s.apiIndex(w, r, nil)
	}
}

// apiIndex: GET /api/ — the endpoints and where the documentation is, as JSON (or YAML).
func (s *server) apiIndex(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	s.reply(w, r, http.StatusOK, map[string]any{
		"service":        "dataservice",
		"endpoints":      apiEndpoints,
		"docs":           apiDocs,
		"authentication": "Authorization: Bearer KEYNAME:SECRET, X-Service-Key: KEYNAME SECRET, or Basic (user login)",
	})
}
