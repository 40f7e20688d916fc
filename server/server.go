// Package server is the HTTP API: authentication, the seed's pipeline endpoints, tasks,
// data reads, loads and configuration, on julienschmidt/httprouter.
package server

import (
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"dataservice/internal/clientaddr"
	"dataservice/store"
	"dataservice/tasks"
)

// Options are the server's dependencies.
type Options struct {
	DB     *store.DB
	Runner *tasks.Runner
	Logger *slog.Logger
	// BaseURL prefixes returned URLs (task_url); empty means "http://" + the request's Host.
	BaseURL     string
	Version     string
	VersionDate string
	// Ready reports whether the start-up sequence is done (nil: always ready).
	Ready func() bool
	// MaxBody bounds request bodies (default 32 MiB).
	MaxBody int64
	// MaxEntries bounds the entries of one load or rawfile request (default 100000).
	MaxEntries int
	// AccessLog writes one info line per request (method, route, status, duration,
	// bytes, credential kind and name; never secrets).
	AccessLog bool
	// OnRequest, when set, is called once per finished request (metrics).
	OnRequest func(RequestInfo)
	// OnLoad, when set, is given the result of every load that was not a dry run.
	OnLoad func(*store.LoadResult)
	// TrustedProxies are the reverse proxies whose X-Forwarded-For gives the client
	// address (the credential throttle, API keys' IP filters, console sessions); empty:
	// the TCP peer is the client.
	TrustedProxies clientaddr.Trusted
	// OnRedeliver, when set, is called after an event was made pending again by
	// POST /api/events/<id>/redeliver/ (serve wakes its deliverer).
	OnRedeliver func()
}

type server struct {
	db      *store.DB
	runner  *tasks.Runner
	log     *slog.Logger
	baseURL string
	version string
	date    string
	ready   func() bool
	maxBody int64
	maxEnt  int

	lastUsedMu sync.Mutex
	lastUsed   map[string]time.Time // API key -> last time last_used was written
	inflight   atomic.Int64

	accessLog bool
	onRequest func(RequestInfo)
	onLoad    func(*store.LoadResult)
	proxies   clientaddr.Trusted
	router    *recRouter

	onRedeliver func()
}

// New returns the API handler.
func New(o Options) http.Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 32 << 20
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.Ready == nil {
		o.Ready = func() bool { return true }
	}
	s := &server{db: o.DB, runner: o.Runner, log: o.Logger, baseURL: o.BaseURL, version: o.Version,
		date: o.VersionDate, ready: o.Ready, maxBody: o.MaxBody, maxEnt: o.MaxEntries, lastUsed: map[string]time.Time{},
		accessLog: o.AccessLog, onRequest: o.OnRequest, onLoad: o.OnLoad, proxies: o.TrustedProxies,
		onRedeliver: o.OnRedeliver}
	return s.observe(s.routes())
}
