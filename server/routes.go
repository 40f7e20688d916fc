package server

import (
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"dataservice/server/console"
)

var allMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodOptions}

// routes lists every route. The seed's pipeline paths take every method: the
// permission check comes before the method check (seed: order of checks).
func (s *server) routes() http.Handler {
	r := s.newRouter()
	r.RedirectFixedPath = false
	r.HandleMethodNotAllowed = true
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.writeError(w, req, http.StatusNotFound, "not found")
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// Methods outside allMethods (TRACE, extension methods) on the seed's pipeline
		// paths still get the permission check before the method check.
		if rest, ok := strings.CutPrefix(req.URL.Path, "/api/pipelines"); ok && strings.HasPrefix(rest, "/") {
			s.api(s.pipelines)(w, req, httprouter.Params{{Key: "rest", Value: rest}})
			return
		}
		s.writeError(w, req, http.StatusMethodNotAllowed, "method not allowed")
	})
	r.PanicHandler = func(w http.ResponseWriter, req *http.Request, v any) {
		s.log.Error("handler panic", "method", req.Method, "path", req.URL.Path, "panic", v)
		s.writeError(w, req, http.StatusInternalServerError, "internal error")
	}

	// The web console: "/" (browsers; other clients get the API index), "/data/private/...",
	// /login, /logout and /static/. It has its own sessions; a session cookie never
	// authenticates /api/, and the console never accepts API credentials.
	con := console.New(console.Options{DB: s.db, Logger: s.log, BaseURL: s.baseURL, Ready: s.ready, Runner: s.runner,
		MaxBody: s.maxBody, MaxEntries: s.maxEnt, TrustedProxies: s.proxies})
	con.Register(r)
	r.GET("/", s.index(con.Dashboard()))
	r.GET("/api/", s.apiIndex)
	r.GET("/healthz", s.healthz)
	r.GET("/readyz", s.readyz)
	r.GET("/api/ping/", s.ping)
	r.GET("/api/openapi.json", s.openAPI)
	r.GET("/api/docs/*file", s.apiDocs)
	r.GET("/api/version/", s.api(s.versionInfo))
	for _, m := range allMethods {
		r.Handle(m, "/api/pipelines/*rest", s.api(s.pipelines))
	}
	r.GET("/api/tasks/", s.api(s.taskList))
	r.GET("/api/tasks/:handle/", s.api(s.taskDetail))
	r.POST("/api/tasks/:handle/cancel/", s.api(s.taskCancel))
	r.GET("/api/schedules/", s.api(s.scheduleList))
	r.GET("/api/schemas/", s.api(s.schemaList))
	r.GET("/api/schemas/:name/", s.api(s.schemaDetail))
	r.GET("/api/instances/:schema/*rest", s.apiWanting(s.instances, wantedInstance))
	for _, m := range instanceWriteMethods {
		r.Handle(m, "/api/instances/:schema/*rest", s.api(s.instanceWrite))
	}
	r.POST("/api/load/", s.api(s.load))
	r.POST("/api/rawfile/", s.api(s.rawfile))
	r.GET("/api/events/", s.api(s.eventList))
	r.POST("/api/events/:id/redeliver/", s.api(s.eventRedeliver))
	r.GET("/api/conf/", s.api(s.confGet))
	r.POST("/api/conf/", s.api(s.confPost))
	return r
}

// api wraps an /api/ handler: 503 until start-up is done, the body limit, the
// request's read scope, then the authorisation step.
func (s *server) api(h httprouter.Handle) httprouter.Handle { return s.apiWanting(h, nil) }

// apiWanting is api for a handler that reads the one instance its path names once it
// has checked the caller (wants names it): the read of the caller's credentials reads
// that instance in the same statement (store.DB.Prefetch), one statement fewer.
func (s *server) apiWanting(h httprouter.Handle, wants func(ps httprouter.Params) (cls, key string, ok bool)) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if !s.ready() {
			s.writeError(w, r, http.StatusServiceUnavailable, "starting up")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.maxBody)
		// The request's cached reads (schemas, configuration) check the schema
		// generation counter once, with its first instance read (the API key).
		ctx := s.db.RequestScope(r.Context())
		if wants != nil {
			if cls, key, ok := wants(ps); ok {
				s.db.Prefetch(ctx, cls, key)
			}
		}
		s.authenticate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h(w, r, ps)
		})).ServeHTTP(w, r.WithContext(ctx))
	}
}

// wantedInstance names the instance GET /api/instances/:schema/<key>/ reads.
func wantedInstance(ps httprouter.Params) (cls, key string, ok bool) {
	rest := ps.ByName("rest")
	if rest == "/" || !strings.HasSuffix(rest, "/") {
		return "", "", false
	}
	return ps.ByName("schema"), instanceKey(rest), true
}

// healthz: GET /healthz — 200 while the process is alive.
func (s *server) healthz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	s.reply(w, r, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz: GET /readyz — 200 once the start-up sequence is done, else 503. A full disk
// does not make it 503: reads still work, and taking the only node out of rotation
// would turn a write outage into a whole one (docs/operations.md). It says so in
// "disk": "full" while the last write failed for lack of space, else "ok".
func (s *server) readyz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if !s.ready() {
		s.writeError(w, r, http.StatusServiceUnavailable, "starting up")
		return
	}
	disk := "ok"
	if s.db.DiskFull() {
		disk = "full"
	}
	s.reply(w, r, http.StatusOK, map[string]string{"status": "ready", "disk": disk})
}

// ping: GET /api/ping/ — no authentication.
func (s *server) ping(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	s.reply(w, r, http.StatusOK, map[string]string{"status": "ok"})
}
