package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"dataservice/bootstrap"
	"dataservice/server"
	"dataservice/store"
	"dataservice/tasks"
)

func setupServe(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, true)
	fs.StringVar(&c.sf.listen, "listen", "", "HTTP listen address (SERVICE_LISTEN, default 127.0.0.1:8080)")
	fs.StringVar(&c.sf.baseURL, "base-url", "", "absolute URL prefix of returned URLs (SERVICE_BASE_URL)")
	fs.StringVar(&c.sf.workers, "workers", "", "concurrent task workers (SERVICE_WORKERS, default 2)")
	fs.StringVar(&c.sf.diskWarn, "disk-warn", "", "warn below this free space on the database's filesystem: a size or a percentage (SERVICE_DISK_WARN, default 1GiB)")
	fs.StringVar(&c.sf.trustedProxies, "trusted-proxies", "", "reverse proxies whose X-Forwarded-For gives the client address: comma-separated CIDRs or addresses (SERVICE_TRUSTED_PROXIES, default none)")
	return c.serve
}

func (c *cli) serve(ctx context.Context, _ []string) error {
	s, err := loadSettings(c.getenv, &c.sf)
	if err != nil {
		return err
	}
	log := c.logger(s)
	if err := checkDBPath(s.DB); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.Listen, err)
	}
	// The Migrator goes to the start-up sequence alone: the server, the console and
	// the task runner get the DB, which cannot migrate. A commit that recorded events
	// counts them and wakes the deliverer (both made after the open, hence the
	// pointers).
	var recorded atomic.Pointer[metrics]
	var deliverer atomic.Pointer[tasks.Deliverer]
	onEvents := func(n int) {
		recorded.Load().onEventsRecorded(n)
		if d := deliverer.Load(); d != nil && n > 0 {
			d.Wake()
		}
	}
	db, mg, err := store.OpenMigrator(ctx, s.DB, store.Options{Logger: log, SecretKeyFile: s.SecretKeyFile,
		OnEvents: onEvents})
	if err != nil {
		ln.Close()
		return err
	}
	defer db.Close()
	// The node records itself before the start-up sequence, which sets DB_VERSION:
	// beside a live node of another version it stops here, having written nothing but
	// the table layout. Its row is renewed while it runs and removed when it stops.
	leave, err := joinNodes(ctx, db, s, log)
	if err != nil {
		ln.Close()
		return err
	}
	defer leave()
	var ready atomic.Bool
	m, err := c.startMetrics(ctx, s, db, log)
	if err != nil {
		ln.Close()
		return err
	}
	go watchDisk(ctx, db, s.DiskWarn, diskCheckEvery, log)
	runner := tasks.New(db, tasks.Options{Logger: log, Workers: s.Workers, Lease: s.TaskLease,
		OnProcessed: m.processedHook(), AfterBatch: afterBatch})
	m.setRunner(runner)
	recorded.Store(m)
	dl := tasks.NewDeliverer(db, runner, m.deliveryOptions(tasks.DeliveryOptions{Logger: log}))
	deliverer.Store(dl)
	srv := &http.Server{
		Handler: server.New(server.Options{DB: db, Runner: runner, Logger: log, BaseURL: s.BaseURL,
			Version: s.Version, VersionDate: s.VersionDate, Ready: ready.Load, AccessLog: s.AccessLog,
			OnRequest: m.requestHook(), OnLoad: m.loadHook(), TrustedProxies: s.TrustedProxies, OnRedeliver: dl.Wake}),
		ReadHeaderTimeout: s.ReadHeaderTimeout,
		ReadTimeout:       2 * time.Minute,
		WriteTimeout:      5 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "db", store.RedactURL(s.DB), "version", s.Version)
	if exposedWithoutBaseURL(ln.Addr(), s.BaseURL) {
		log.Warn("listening on a non-loopback address without SERVICE_BASE_URL: task_url is built from each request's Host header; set SERVICE_BASE_URL to the address clients use",
			"addr", ln.Addr().String())
	}

	started, blocks := time.Now(), []string(nil)
	if err := startUpWith(ctx, mg, s, log, func(b string) { blocks = append(blocks, b) }); err != nil {
		srv.Close()
		return err
	}
	m.startedUp(time.Since(started), blocks)
	ready.Store(true)
	runCtx, stopRunner := context.WithCancel(context.WithoutCancel(ctx))
	go bootstrap.BackupLoop(runCtx, db, s.BackupDir, backupTick, log, m.backupHook())
	// The task runner, the event deliverer and the scheduler run on every node; the
	// queue's and the outbox's leases, and the schedules' conditional state updates,
	// share the work between nodes. So does the search index's catch-up on a SQLite
	// file (each batch passes the turnstile like any write; nodes of one file share the
	// list); on PostgreSQL it returns at once (the engine maintains its index).
	runnerDone := make(chan struct{})
	sched := tasks.NewScheduler(runner, tasks.SchedulerOptions{Logger: log, OnRun: m.scheduleHook()})
	go func() {
		defer close(runnerDone)
		var wg sync.WaitGroup
		wg.Add(3)
		go func() {
			defer wg.Done()
			db.RunSearchCatchUp(runCtx, log)
		}()
		go func() {
			defer wg.Done()
			dl.Run(runCtx)
		}()
		go func() {
			defer wg.Done()
			sched.Run(runCtx)
		}()
		runner.Run(runCtx)
		wg.Wait()
	}()
	log.Info("ready")
	consoleURL, signIn := consoleSignIn(ln.Addr(), s)
	log.Info("console", "url", consoleURL, "sign_in", signIn)

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		stopRunner()
		<-runnerDone
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("shutting down")
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		log.Warn("http shutdown", "error", err)
	}
	stopRunner()
	<-runnerDone
	log.Info("stopped")
	return nil
}

// exposedWithoutBaseURL reports whether the server listens on an address other
// machines can reach (not loopback) while SERVICE_BASE_URL is unset, so the URLs it
// returns come from a header clients control.
func exposedWithoutBaseURL(addr net.Addr, baseURL string) bool {
	if baseURL != "" {
		return false
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return true
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// consoleSignIn is the web console's URL and how to sign in to it, for the log of
// serve's start: SERVICE_BASE_URL when set, else the listen address (localhost for a
// wildcard one); it says where the admin password comes from, never what it is.
func consoleSignIn(addr net.Addr, s *settings) (consoleURL, signIn string) {
	consoleURL = strings.TrimSuffix(s.BaseURL, "/") + "/"
	if s.BaseURL == "" {
		host, port, err := net.SplitHostPort(addr.String())
		if ip := net.ParseIP(host); err == nil && ip != nil && ip.IsUnspecified() {
			host = "localhost"
		}
		consoleURL = "http://" + net.JoinHostPort(host, port) + "/"
	}
	if s.AdminPassword != "" {
		return consoleURL, "sign in as admin with the password SERVICE_ADMIN_PASSWORD holds, or as a user with a password (dataservice user add LOGIN)"
	}
	return consoleURL, "the admin account is locked (SERVICE_ADMIN_PASSWORD is not set): sign in as a user with a password (dataservice user add LOGIN, or user passwd LOGIN), or set SERVICE_ADMIN_PASSWORD and restart"
}

// backupTick is how often serve checks whether a scheduled backup is due.
const backupTick = time.Minute
