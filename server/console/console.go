// Package console is the web console: server-rendered pages for signing in, the
// dashboard, and browsing and editing data. It authenticates with its own sessions
// (never API credentials), and uses the store's permission checks and write path.
package console

import (
	"bytes"
	"context"
	"crypto/subtle"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"dataservice/internal/clientaddr"
	"dataservice/server/httperror"
	"dataservice/store"
	"dataservice/store/model"
	"dataservice/tasks"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// CookieName is the session cookie.
const CookieName = "ds_session"

// Options are the console's dependencies.
type Options struct {
	DB     *store.DB
	Logger *slog.Logger
	// BaseURL is the service's public URL: https makes the cookie Secure, and its
	// origin is the one state-changing requests must come from (empty: the request's Host).
	BaseURL string
	// Ready reports whether the start-up sequence is done (nil: always ready).
	Ready func() bool
	// Runner runs pipelines as tasks (the pipeline and task pages); nil: those pages
	// answer 503.
	Runner *tasks.Runner
	// MaxBody and MaxEntries are the API's bounds on a load's body and entries; the
	// tools that take documents (import, code editor) use them (default 32 MiB, 100000).
	MaxBody    int64
	MaxEntries int
	// TrustedProxies tell the client address behind a reverse proxy (the API's setting).
	TrustedProxies clientaddr.Trusted
}

// Console serves the pages.
type Console struct {
	db      *store.DB
	log     *slog.Logger
	secure  bool
	origin  string
	ready   func() bool
	pages   map[string]*template.Template
	runner  *tasks.Runner
	maxBody int64
	maxEnt  int
	proxies clientaddr.Trusted
	// spool keeps the import tool's uploads between Check and Import.
	spool *importSpool
	// sidebars are the rendered sidebars (sidebarFor).
	sidebars sidebarCache
}

// New builds the console.
func New(o Options) *Console {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Ready == nil {
		o.Ready = func() bool { return true }
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 32 << 20
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = 100000
	}
	c := &Console{db: o.DB, log: o.Logger, ready: o.Ready, pages: map[string]*template.Template{},
		runner: o.Runner, maxBody: o.MaxBody, maxEnt: o.MaxEntries, proxies: o.TrustedProxies,
		spool: newImportSpool(o.MaxBody, o.Logger)}
	if u, err := url.Parse(o.BaseURL); err == nil && u.Scheme != "" && u.Host != "" {
		c.secure = u.Scheme == "https"
		c.origin = u.Scheme + "://" + u.Host
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	// Files named _*.html are partials every page may use.
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" || strings.HasPrefix(base, "_") {
			continue
		}
		c.pages[base] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/_*.html", n))
	}
	return c
}

// Router is where the console registers its routes (an httprouter.Router or a wrapper).
type Router interface {
	GET(path string, h httprouter.Handle)
	POST(path string, h httprouter.Handle)
}

// Register adds the console's routes: "/data/private/..." are pages, /login and
// /logout sign in and out, /static/ holds the CSS and JS. "/" is Dashboard, which the
// server mounts itself (it shares the path with the API index).
func (c *Console) Register(r Router) {
	static, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix("/static/", http.FileServer(http.FS(static)))
	r.GET("/static/*file", func(w http.ResponseWriter, req *http.Request, _ httprouter.Params) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, req)
	})
	r.GET("/login", c.plain(c.loginForm))
	r.POST("/login", c.plain(c.loginPost))
	r.POST("/logout", c.page(c.logout))
	r.GET("/data/private/*rest", c.page(c.data))
	r.POST("/data/private/*rest", c.page(c.data))
}

// Dashboard is the handler of the dashboard page, "/".
func (c *Console) Dashboard() httprouter.Handle { return c.page(c.dashboard) }

// req is what every page handler gets: the session, the user and their permissions.
type req struct {
	sess *store.Session
	user *store.Instance
	auth *model.Auth
	// ps are the path's named segments: the router's ("rest" below /data/private/),
	// then, on a tool's or schema's page, those of its route (pick).
	ps httprouter.Params
}

type pageHandler func(w http.ResponseWriter, r *http.Request, q *req)

// plain wraps the pages that need no session (sign-in): security headers and readiness.
func (c *Console) plain(h httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		headers(w)
		if !c.ready() {
			http.Error(w, "starting up", http.StatusServiceUnavailable)
			return
		}
		limit, documents := c.bodyLimit(r)
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		// Read a small form here so a body over the limit is named as such (not seen
		// later as a form without its CSRF token). A tool's larger body is read only
		// once the session is known (page).
		if r.Method == http.MethodPost && !documents && !c.readForm(w, r, nil, limit) {
			return
		}
		h(w, r, ps)
	}
}

// readForm parses a posted form (once; later calls find it parsed), answering 413 itself
// when the body is over limit. A multipart form (an upload) is held in memory up to
// the limit, as the API holds a load's body.
func (c *Console) readForm(w http.ResponseWriter, r *http.Request, q *req, limit int64) bool {
	var err error
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
		err = r.ParseMultipartForm(limit)
	} else {
		err = r.ParseForm()
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		c.errorPage(w, r, q, http.StatusRequestEntityTooLarge, "The form is larger than "+sizeText(limit)+".")
		return false
	}
	return true
}

func headers(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// page wraps a page: the session (else the sign-in page), the user still enabled (else
// every session of theirs ends), their current permissions, and for POST the CSRF
// token and the Origin check.
func (c *Console) page(h pageHandler) httprouter.Handle {
	return c.plain(func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		// The page's cached reads (schemas, configuration) check the schema generation
		// counter once, not at each read, as an API request does.
		ctx := c.db.RequestScope(r.Context())
		if cls, key, ok := shownInstance(r, ps); ok {
			// The session's statement reads the instance the page shows too.
			c.db.Prefetch(ctx, cls, key)
		}
		r = r.WithContext(ctx)
		q, ok := c.session(ctx, w, r)
		if !ok {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			c.errorPage(w, r, nil, http.StatusUnauthorized, "Your session has ended. Sign in again.")
			return
		}
		q.ps = ps
		if limit, _ := c.bodyLimit(r); r.Method == http.MethodPost && !c.readForm(w, r, q, limit) {
			return
		}
		if r.Method == http.MethodPost {
			if why := c.csrfProblem(r, q.sess); why != "" {
				c.errorPage(w, r, q, http.StatusForbidden, "The form was refused (CSRF protection): "+why+". Reload the page and try again.")
				return
			}
		}
		h(w, r, q)
	})
}

// shownInstance names the instance a GET of /data/private/<schema>/<key>/ shows
// (data and instancePage split the path the same way); ok is false for other pages.
// A tool's page of the same shape names no instance, and reading one ahead costs
// nothing more than one missing row.
func shownInstance(r *http.Request, ps httprouter.Params) (cls, key string, ok bool) {
	rest := ps.ByName("rest")
	if r.Method != http.MethodGet || !strings.HasSuffix(rest, "/") {
		return "", "", false
	}
	cls, key, _ = strings.Cut(strings.TrimSuffix(strings.TrimPrefix(rest, "/"), "/"), "/")
	if cls == "" || key == "" || toolNamed(cls) != nil {
		return "", "", false
	}
	return cls, key, true
}

// session reads the cookie's session and its user; it clears the cookie when the
// session is gone, expired, or belongs to a disabled or deleted user.
func (c *Console) session(ctx context.Context, w http.ResponseWriter, r *http.Request) (*req, bool) {
	ck, err := r.Cookie(CookieName)
	if err != nil {
		return nil, false
	}
	// One statement reads the session, its user and the schema generation.
	sess, user, err := c.db.SessionUser(ctx, ck.Value)
	if err != nil {
		if !store.IsNotFound(err) && ctx.Err() == nil { // a client that went away is no internal error
			c.log.Error("read session", "error", err)
		}
		c.clearCookie(w)
		return nil, false
	}
	if user == nil || !user.IsEnabled {
		if err := c.db.DeleteUserSessions(ctx, sess.UserID); err != nil {
			c.log.Error("end sessions", "error", err)
		}
		c.clearCookie(w)
		return nil, false
	}
	auth, err := c.db.UserAuthOf(ctx, user)
	if err != nil {
		c.log.Error("user permissions", "user", user.Keyname, "error", err)
		return nil, false
	}
	return &req{sess: sess, user: user, auth: auth}, true
}

func (c *Console) setCookie(w http.ResponseWriter, token string, lim store.SessionLimits) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: token, Path: "/", HttpOnly: true, Secure: c.secure,
		SameSite: http.SameSiteLaxMode, MaxAge: int(lim.Absolute / time.Second)})
}

func (c *Console) clearCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", HttpOnly: true, Secure: c.secure,
		SameSite: http.SameSiteLaxMode, MaxAge: -1})
}

// csrfProblem checks the request's origin and the form's token against the session's;
// it returns why the form is refused, or "" when it passes.
func (c *Console) csrfProblem(r *http.Request, sess *store.Session) string {
	if why := c.originProblem(r); why != "" {
		return why
	}
	tok := r.PostFormValue("csrf")
	if tok == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(sess.CSRF)) != 1 {
		return "it did not carry this session's CSRF token (missing or wrong)"
	}
	return ""
}

// originProblem: a browser's Origin (or, without it, Referer) must be this service. A
// POST carrying neither is refused too: every browser sends Origin with a form's POST
// (and the console's Referrer-Policy keeps the Referer on its own pages), so a request
// without either did not come from a console page, and nothing could be checked. It
// returns why the request is refused, or "" when it passes.
func (c *Console) originProblem(r *http.Request) string {
	want := c.origin
	if want == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		want = scheme + "://" + r.Host
	}
	const foreign = "it did not come from this console (its Origin or Referer is another site)"
	if o := r.Header.Get("Origin"); o != "" {
		if o != want {
			return foreign
		}
		return ""
	}
	if ref := r.Header.Get("Referer"); ref != "" {
		if u, err := url.Parse(ref); err != nil || u.Scheme+"://"+u.Host != want {
			return foreign
		}
		return ""
	}
	return "it carried neither an Origin nor a Referer header, so its origin could not be checked"
}

// view is the data every page template gets.
type view struct {
	Title string
	App   string
	User  string
	CSRF  string
	// Sidebar is rendered in Go (sidebarHTML), as every page shows it.
	Sidebar template.HTML
	Flash   string
	Data    any
}

// render writes page name with data, buffered so a template error is a clean 500.
func (c *Console) render(w http.ResponseWriter, r *http.Request, q *req, status int, name, title string, data any) {
	v := view{Title: title, App: c.db.ConfigValue(r.Context(), "GLOBAL_APPNAME"), Data: data, Flash: flashText[r.URL.Query().Get("done")]}
	if q != nil {
		v.User, v.CSRF = q.user.Keyname, q.sess.CSRF
		v.Sidebar = c.sidebarFor(r.Context(), q.auth)
	}
	buf := pageBuffers.Get().(*bytes.Buffer)
	defer putPageBuffer(buf)
	if err := c.pages[name].Execute(buf, v); err != nil {
		c.log.Error("render page", "page", name, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// pageBuffers are render's buffers, reused: a page grown from empty copies itself
// several times over.
var pageBuffers = sync.Pool{New: func() any { return bytes.NewBuffer(make([]byte, 0, 16<<10)) }}

// putPageBuffer returns buf to the pool, unless a large page grew it: the pool keeps
// only buffers of ordinary pages.
func putPageBuffer(buf *bytes.Buffer) {
	if buf.Cap() <= 256<<10 {
		buf.Reset()
		pageBuffers.Put(buf)
	}
}

// flashText are the messages a redirect after a successful post may show.
var flashText = map[string]string{
	"created": "Created.", "updated": "Saved.", "enabled": "Enabled.", "disabled": "Disabled.",
	"deleted": "Deleted.", "renamed": "Renamed.", "password": "Password changed.", "unchanged": "Nothing changed.",
	"restored":    "Restored: the version was written back as a new revision.",
	"redelivered": "Redelivery queued: the event is pending again, from its first attempt.",
}

// errorPage renders an error (403 for what the user may not use, 404, ...).
func (c *Console) errorPage(w http.ResponseWriter, r *http.Request, q *req, status int, msg string) {
	c.render(w, r, q, status, "error", http.StatusText(status), map[string]any{"Status": status, "Message": msg})
}

// forbidden is the 403 page of a user lacking need, which it names (what the page
// needs, never what the user or anyone else holds).
func (c *Console) forbidden(w http.ResponseWriter, r *http.Request, q *req, need string) {
	c.errorPage(w, r, q, http.StatusForbidden, "You do not have the permission to use this page: it needs "+need+".")
}

// fail shows a store error with the API's status for its code (httperror.Status):
// internal errors are logged and shown only as "internal error".
func (c *Console) fail(w http.ResponseWriter, r *http.Request, q *req, err error) {
	status := httperror.Status(err)
	if store.ErrorCode(err) == model.EDiskFull {
		// Logged once per episode by the store; the page names the file.
		err = c.db.NoSpace(err)
	}
	if status == http.StatusInternalServerError {
		c.log.Error("console request failed", "method", r.Method, "path", r.URL.Path, "error", err)
		c.errorPage(w, r, q, http.StatusInternalServerError, "internal error")
		return
	}
	c.errorPage(w, r, q, status, store.ErrorText(err))
}
