package testkit

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"dataservice/bootstrap"
	"dataservice/builtin"
	"dataservice/store"
	"dataservice/tasks"
)

// Serve starts h on 127.0.0.1:0 with the limits `dataservice serve` sets (header
// size and read time); configure, when not nil, adjusts the server before it
// starts. It is closed when the test ends.
func Serve(tb testing.TB, h http.Handler, configure func(*http.Server)) *httptest.Server {
	tb.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.MaxHeaderBytes = 64 << 10
	srv.Config.ReadHeaderTimeout = 10 * time.Second
	if configure != nil {
		configure(srv.Config)
	}
	srv.Start()
	tb.Cleanup(srv.Close)
	return srv
}

// Loop runs a task runner in the background between Start and Stop.
type Loop struct {
	tb     testing.TB
	runner *tasks.Runner

	mu   sync.Mutex
	stop func()
}

// NewLoop returns a stopped loop for runner; it is stopped when the test ends, and
// its clean-up runs before those registered earlier (the server, the database).
func NewLoop(tb testing.TB, runner *tasks.Runner) *Loop {
	l := &Loop{tb: tb, runner: runner}
	tb.Cleanup(l.Stop)
	return l
}

// Start runs the task runner until Stop or the end of the test.
func (l *Loop) Start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stop != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.runner.Run(ctx) }()
	l.stop = func() {
		cancel()
		if err := <-done; err != nil {
			l.tb.Errorf("runner: %v", err)
		}
	}
}

// Stop stops the task runner and waits for it.
func (l *Loop) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stop != nil {
		l.stop()
		l.stop = nil
	}
}

// StackOptions tune NewStack.
type StackOptions struct {
	// Logger is the logger of the store, the start-up, the runner and the handler;
	// nil: warnings and errors to tb.Log.
	Logger *slog.Logger
	// AdminPassword is forced onto the admin account at start-up.
	AdminPassword string
	// Handler builds the HTTP handler over the database and the runner (server.New).
	Handler func(db *store.DB, runner *tasks.Runner) http.Handler
	// Configure adjusts the HTTP server before it starts (see Serve).
	Configure func(*http.Server)
	// NoRunner leaves the task runner stopped, so submitted tasks stay queued.
	NoRunner bool
	// Dir is the directory of the database file (default tb.TempDir()): full-disk
	// tests put it on a small filesystem (SmallFS).
	Dir string
}

// Stack is the real service in-process: a database in tb.TempDir() (or Dir) after one start
// (fixed clock), a task runner polling every 20 ms, the search index's catch-up, and the
// handler served on 127.0.0.1:0.
type Stack struct {
	DB     *store.DB
	Runner *tasks.Runner
	Server *httptest.Server
	Loop   *Loop
}

// NewStack starts a Stack; everything stops when the test ends, the runner first.
func NewStack(tb testing.TB, o StackOptions) *Stack {
	tb.Helper()
	if o.Dir == "" {
		o.Dir = tb.TempDir()
	}
	path := filepath.Join(o.Dir, "server.db")
	if Postgres() {
		path = newPostgresDatabase(tb, "")
	}
	var db *store.DB
	if o.Logger == nil {
		// The start's log would only go to tb.Log: copy a template that had the same
		// start (made once per test binary for each admin password).
		o.Logger = Logger(tb, slog.LevelWarn)
		path = copyStarted(tb, path, o.AdminPassword)
		db = Open(tb, path, Options{Logger: o.Logger})
	} else {
		// The test reads the start's log: the start runs here.
		db = Open(tb, path, Options{Logger: o.Logger})
		Bootstrap(tb, db, bootstrap.Options{AdminPassword: o.AdminPassword, Logger: o.Logger})
	}
	// The search index's catch-up runs for the stack's life, as serve runs it (it
	// returns at once on PostgreSQL); stopped before the database closes.
	catchUp, stopCatchUp := context.WithCancel(context.Background())
	caughtUp := make(chan struct{})
	go func() {
		defer close(caughtUp)
		db.RunSearchCatchUp(catchUp, o.Logger)
	}()
	tb.Cleanup(func() {
		stopCatchUp()
		<-caughtUp
	})
	runner := tasks.New(db, tasks.Options{Poll: 20 * time.Millisecond, Logger: o.Logger})
	s := &Stack{DB: db, Runner: runner, Server: Serve(tb, o.Handler(db, runner), o.Configure)}
	s.Loop = NewLoop(tb, runner)
	if !o.NoRunner {
		s.Loop.Start()
	}
	return s
}

// copyStarted writes at path the database file of a start with the test version and
// adminPassword on a new file with the fixed clock, as NewStack starts it, and the
// lock file that start leaves beside it; it returns path. On the PostgreSQL pass it
// returns a new database made from such a start instead.
func copyStarted(tb testing.TB, path, adminPassword string) string {
	tb.Helper()
	src, err := templateOf("started\x00"+adminPassword, func(db *store.DB) error {
		db.Now = FixedClock
		return bootstrap.Run(context.Background(), migratorOf(db), bootstrap.Options{Version: Version, VersionDate: VersionDate,
			Init: builtin.Init(), AdminPassword: adminPassword})
	})
	if err != nil {
		tb.Fatalf("bootstrap: %v", err)
	}
	if Postgres() {
		return newPostgresDatabase(tb, src)
	}
	copyTemplate(tb, src, path, 0o600)
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	lock.Close()
	return path
}
