package server

import (
	"context"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"
)

// RequestInfo describes one finished request, for the access log and the metrics hook.
type RequestInfo struct {
	Method string
	// Route is the router's pattern ("/api/tasks/:handle/"), "unmatched" when no route
	// matched: never the raw path, so label values stay bounded.
	Route    string
	Status   int
	Duration time.Duration
	Bytes    int64
	// CredKind is the kind of credentials presented: "apikey", "basic" or "" (none).
	CredKind string
	// CredName is the presented key name or login (never a secret), "" when none.
	CredName string
	// AuthFailed is true when credentials were presented and refused.
	AuthFailed bool
}

// reqInfoKey carries the *RequestInfo being filled through the request context.
type reqInfoKey struct{}

func infoOf(r *http.Request) *RequestInfo {
	ri, _ := r.Context().Value(reqInfoKey{}).(*RequestInfo)
	return ri
}

// statusWriter records the status and the bytes written.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// observe wraps the router: it times every request, then writes the access log line
// and calls the OnRequest hook.
func (s *server) observe(next http.Handler) http.Handler {
	if !s.accessLog && s.onRequest == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ri := &RequestInfo{Method: r.Method, Route: "unmatched"}
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			ri.Status, ri.Bytes, ri.Duration = sw.status, sw.bytes, time.Since(start)
			if ri.Status == 0 {
				ri.Status = http.StatusOK
			}
			if s.accessLog {
				s.log.LogAttrs(r.Context(), slog.LevelInfo, "request",
					slog.String("method", ri.Method), slog.String("route", ri.Route),
					slog.Int("status", ri.Status), slog.Duration("duration", ri.Duration),
					slog.Int64("bytes", ri.Bytes), slog.String("credential", ri.CredKind),
					slog.String("name", ri.CredName), slog.Bool("auth_failed", ri.AuthFailed))
			}
			if s.onRequest != nil {
				s.onRequest(*ri)
			}
		}()
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), reqInfoKey{}, ri)))
	})
}

// noteCredentials records what the authorisation step saw (kind and name only).
func noteCredentials(r *http.Request, p *principal) {
	ri := infoOf(r)
	if ri == nil {
		return
	}
	ri.CredKind = p.credKind
	ri.CredName = p.credName
	ri.AuthFailed = p.credKind != "" && !p.allowed && !p.busy
}

// Route is one registered method and pattern.
type Route struct{ Method, Path string }

// recRouter is httprouter with every registration recorded (for the route label and
// the route list the API description is checked against).
type recRouter struct {
	*httprouter.Router
	mu     sync.Mutex
	routes []Route
}

func (s *server) newRouter() *recRouter {
	rr := &recRouter{Router: httprouter.New()}
	s.router = rr
	return rr
}

// Handle registers h for method and path, setting the request's route first.
func (rr *recRouter) Handle(method, path string, h httprouter.Handle) {
	rr.mu.Lock()
	rr.routes = append(rr.routes, Route{method, path})
	rr.mu.Unlock()
	rr.Router.Handle(method, path, func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if ri := infoOf(r); ri != nil {
			ri.Route = path
		}
		h(w, r, ps)
	})
}

// Handler registers an http.Handler.
func (rr *recRouter) Handler(method, path string, h http.Handler) {
	rr.Handle(method, path, func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if len(ps) > 0 {
			r = r.WithContext(context.WithValue(r.Context(), httprouter.ParamsKey, ps))
		}
		h.ServeHTTP(w, r)
	})
}

// HandlerFunc registers an http.HandlerFunc.
func (rr *recRouter) HandlerFunc(method, path string, h http.HandlerFunc) {
	rr.Handler(method, path, h)
}

// GET and the other shortcuts go through Handle so they are recorded.
func (rr *recRouter) GET(path string, h httprouter.Handle)    { rr.Handle(http.MethodGet, path, h) }
func (rr *recRouter) HEAD(path string, h httprouter.Handle)   { rr.Handle(http.MethodHead, path, h) }
func (rr *recRouter) POST(path string, h httprouter.Handle)   { rr.Handle(http.MethodPost, path, h) }
func (rr *recRouter) PUT(path string, h httprouter.Handle)    { rr.Handle(http.MethodPut, path, h) }
func (rr *recRouter) PATCH(path string, h httprouter.Handle)  { rr.Handle(http.MethodPatch, path, h) }
func (rr *recRouter) DELETE(path string, h httprouter.Handle) { rr.Handle(http.MethodDelete, path, h) }
func (rr *recRouter) OPTIONS(path string, h httprouter.Handle) {
	rr.Handle(http.MethodOptions, path, h)
}

// Routes returns the registered routes, sorted by path then method.
func (rr *recRouter) Routes() []Route {
	rr.mu.Lock()
	out := append([]Route(nil), rr.routes...)
	rr.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Method < out[j].Method
	})
	return out
}

// RouteList returns every route the API handler registers (method and httprouter
// pattern), taken from the router itself.
func RouteList() []Route {
	s := &server{log: slog.New(slog.DiscardHandler), ready: func() bool { return true }}
	s.routes()
	return s.router.Routes()
}
