package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"dataservice/bootstrap"
	"dataservice/server"
	"dataservice/store"
	"dataservice/tasks"
)

// metrics are the Prometheus collectors of one serving process. The packages only
// expose hooks; this file turns them into metrics on a registry of its own.
type metrics struct {
	reg           *prometheus.Registry
	requests      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	authFailures  *prometheus.CounterVec
	processed     prometheus.Counter
	loadEntries   *prometheus.CounterVec
	startup       prometheus.Gauge
	startupBlocks *prometheus.GaugeVec
	backups       *prometheus.CounterVec
	scheduleRuns  *prometheus.CounterVec
	// The outbox: events recorded by committed writes, and what delivery made of them.
	eventsRecorded, eventsDelivered, eventsRetried, eventsDead prometheus.Counter
	deliverySeconds                                            prometheus.Histogram
	state                                                      *stateCollector
}

// setRunner gives the task counts their source.
func (m *metrics) setRunner(r *tasks.Runner) {
	if m != nil {
		m.state.runner.Store(r)
	}
}

// startMetrics listens on SERVICE_METRICS_LISTEN and serves /metrics until ctx ends;
// it returns nil (and does nothing) when the setting is empty.
func (c *cli) startMetrics(ctx context.Context, s *settings, db *store.DB, log *slog.Logger) (*metrics, error) {
	if s.MetricsListen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", s.MetricsListen)
	if err != nil {
		return nil, fmt.Errorf("listen %s (SERVICE_METRICS_LISTEN): %w", s.MetricsListen, err)
	}
	m := newMetrics(db, s.BackupDir, log)
	go m.serve(ctx, ln, log)
	log.Info("metrics listening", "addr", ln.Addr().String())
	return m, nil
}

func newMetrics(db *store.DB, backupDir string, log *slog.Logger) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.state = &stateCollector{db: db, backupDir: backupDir, log: log}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dataservice_http_requests_total",
		Help: "HTTP requests answered, by route pattern, method and status.",
	}, []string{"route", "method", "status"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "dataservice_http_request_duration_seconds",
		Help:    "Time from receiving a request to finishing its reply, by route pattern and method.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"route", "method"})
	m.authFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dataservice_auth_failures_total",
		Help: "Requests whose credentials were presented and refused, by credential kind (apikey, basic, other).",
	}, []string{"credential"})
	m.processed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dataservice_pipeline_instances_processed_total",
		Help: "Instances processed by pipeline tasks in committed batches.",
	})
	m.loadEntries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dataservice_load_entries_total",
		Help: "Entries of loads through the API (not dry runs), by outcome.",
	}, []string{"outcome"})
	m.startup = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "dataservice_startup_duration_seconds",
		Help: "Duration of this process's start-up sequence (bootstrap, configuration, migrations, keys).",
	})
	m.startupBlocks = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dataservice_startup_block_ran",
		Help: "1 for each step that changed the data version in this process's start-up (bootstrap, a migration block); block=\"none\" when none ran.",
	}, []string{"block"})
	m.backups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dataservice_scheduled_backups_total",
		Help: "Scheduled backups attempted, by result (ok, failed).",
	}, []string{"result"})
	m.scheduleRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dataservice_schedule_runs_total",
		Help: "Due runs of schedules, by result: submitted; skipped (the previous run still queued or running, or missed with missed: skip); failed (the submission was refused).",
	}, []string{"result"})
	for _, r := range []string{tasks.RunSubmitted, tasks.RunSkipped, tasks.RunFailed} {
		m.scheduleRuns.WithLabelValues(r)
	}
	m.eventsRecorded = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dataservice_events_recorded_total",
		Help: "Events recorded in the outbox by committed writes that an enabled event rule matched (this process's writes).",
	})
	m.eventsDelivered = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dataservice_events_delivered_total",
		Help: "Events acknowledged by this process: a webhook answered 2xx, or a pipeline action's task was queued.",
	})
	m.eventsRetried = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dataservice_events_retried_total",
		Help: "Failed delivery attempts that will be retried after a back-off.",
	})
	m.eventsDead = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dataservice_events_dead_total",
		Help: "Events that went to the dead letters (last attempt failed, or the rule, its author's permissions or the schema no longer allow delivery).",
	})
	m.deliverySeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "dataservice_event_delivery_seconds",
		Help:    "Time from an event's commit to its acknowledged delivery.",
		Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400},
	})
	for _, o := range []string{"created", "updated", "unchanged", "deleted", "enabled", "disabled", "skipped", "errors"} {
		m.loadEntries.WithLabelValues(o)
	}
	for _, r := range []string{"ok", "failed"} {
		m.backups.WithLabelValues(r)
	}
	for _, k := range []string{"apikey", "basic", "other"} {
		m.authFailures.WithLabelValues(k)
	}
	m.reg.MustRegister(m.requests, m.duration, m.authFailures, m.processed, m.loadEntries, m.startup,
		m.startupBlocks, m.backups, m.scheduleRuns, m.eventsRecorded, m.eventsDelivered, m.eventsRetried, m.eventsDead,
		m.deliverySeconds,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.state)
	return m
}

// onRequest is the server's OnRequest hook.
func (m *metrics) onRequest(ri server.RequestInfo) {
	m.requests.WithLabelValues(ri.Route, ri.Method, strconv.Itoa(ri.Status)).Inc()
	m.duration.WithLabelValues(ri.Route, ri.Method).Observe(ri.Duration.Seconds())
	if ri.AuthFailed {
		m.authFailures.WithLabelValues(ri.CredKind).Inc()
	}
}

// onLoad is the server's OnLoad hook.
func (m *metrics) onLoad(r *store.LoadResult) {
	for o, n := range map[string]int{"created": r.Created, "updated": r.Updated, "unchanged": r.Unchanged,
		"deleted": r.Deleted, "enabled": r.Enabled, "disabled": r.Disabled, "skipped": r.Skipped, "errors": r.Errors} {
		if n > 0 {
			m.loadEntries.WithLabelValues(o).Add(float64(n))
		}
	}
}

// onProcessed is the task runner's OnProcessed hook.
func (m *metrics) onProcessed(n int) { m.processed.Add(float64(n)) }

// onBackup is the backup loop's result hook.
func (m *metrics) onBackup(_ string, err error) {
	if err != nil {
		m.backups.WithLabelValues("failed").Inc()
		return
	}
	m.backups.WithLabelValues("ok").Inc()
}

// deliveryOptions are the deliverer's metric hooks (none when metrics are off).
func (m *metrics) deliveryOptions(o tasks.DeliveryOptions) tasks.DeliveryOptions {
	if m == nil {
		return o
	}
	o.OnDelivered = func(d time.Duration) {
		m.eventsDelivered.Inc()
		m.deliverySeconds.Observe(d.Seconds())
	}
	o.OnRetried = m.eventsRetried.Inc
	o.OnDead = m.eventsDead.Inc
	return o
}

// onEventsRecorded is the store's OnEvents hook.
func (m *metrics) onEventsRecorded(n int) {
	if m != nil {
		m.eventsRecorded.Add(float64(n))
	}
}

// startedUp records the start-up's duration and the steps that ran.
func (m *metrics) startedUp(d time.Duration, blocks []string) {
	if m == nil {
		return
	}
	m.startup.Set(d.Seconds())
	if len(blocks) == 0 {
		blocks = []string{"none"}
	}
	for _, b := range blocks {
		m.startupBlocks.WithLabelValues(b).Set(1)
	}
}

// serve answers GET /metrics on ln until ctx ends.
func (m *metrics) serve(ctx context.Context, ln net.Listener, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn), Timeout: 30 * time.Second}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		log.Error("metrics listener", "error", err)
	}
}

// stateCollector reads the state that lives in files and tables at each scrape.
type stateCollector struct {
	db *store.DB
	// backupDir is SERVICE_BACKUP_DIR: where the automatic backups are ("" = beside the file).
	backupDir string
	runner    atomic.Pointer[tasks.Runner]
	log       *slog.Logger
}

var (
	descTasks      = prometheus.NewDesc("dataservice_tasks", "Tasks in the tasks table, by status.", []string{"status"}, nil)
	descQueue      = prometheus.NewDesc("dataservice_task_queue_depth", "Tasks waiting for a worker (status queued).", nil, nil)
	descDBSize     = prometheus.NewDesc("dataservice_db_size_bytes", "Size of the SQLite database file.", nil, nil)
	descWALSize    = prometheus.NewDesc("dataservice_wal_size_bytes", "Size of the SQLite write-ahead log (<db>-wal).", nil, nil)
	descLastBackup = prometheus.NewDesc("dataservice_last_backup_timestamp_seconds",
		"Modification time (Unix seconds) of the newest complete backup <db>.*.bak; absent when there is none.", nil, nil)
	descBackupAge = prometheus.NewDesc("dataservice_last_backup_age_seconds",
		"Age of the newest complete backup <db>.*.bak; absent when there is none.", nil, nil)
	descDiskFree = prometheus.NewDesc("dataservice_disk_free_bytes",
		"Free space on the filesystem holding the database (bytes available to unprivileged users); writes fail at 0.", nil, nil)
	descDiskSize = prometheus.NewDesc("dataservice_disk_size_bytes", "Size of the filesystem holding the database.", nil, nil)
	descEvents   = prometheus.NewDesc("dataservice_events", "Events in the outbox waiting for delivery (pending) or in the dead letters (dead).", []string{"status"}, nil)
	// The search index's lag (SQLite: the catch-up indexes written rows after their
	// write; PostgreSQL's engine indexes them in the write, so these are absent there).
	descSearchBehindRows = prometheus.NewDesc("dataservice_search_index_behind_rows",
		"Instances written and not yet indexed for search (searches check them by reading them; above 100000 a search reads every row of its schema).", nil, nil)
	descSearchBehindSeconds = prometheus.NewDesc("dataservice_search_index_behind_seconds",
		"Age of the oldest instance write not yet indexed for search; 0 when the index is up to date.", nil, nil)
	descSearchIndexed = prometheus.NewDesc("dataservice_search_index_caught_up_rows_total",
		"Instances this process's search index catch-up indexed (its rate is the catch-up's rate).", nil, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTasks, descQueue, descDBSize, descWALSize, descLastBackup, descBackupAge,
		descDiskFree, descDiskSize, descEvents, descSearchBehindRows, descSearchBehindSeconds, descSearchIndexed} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if r := c.runner.Load(); r == nil {
		// Not wired yet.
	} else if counts, err := r.CountByStatus(ctx); err != nil {
		c.log.Warn("metrics: count tasks", "error", err)
	} else {
		for st, n := range counts {
			ch <- prometheus.MustNewConstMetric(descTasks, prometheus.GaugeValue, float64(n), st)
		}
		ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(counts[tasks.StatusQueued]))
	}
	if pending, dead, err := c.db.EventCounts(ctx); err != nil {
		c.log.Warn("metrics: count events", "error", err)
	} else {
		ch <- prometheus.MustNewConstMetric(descEvents, prometheus.GaugeValue, float64(pending), "pending")
		ch <- prometheus.MustNewConstMetric(descEvents, prometheus.GaugeValue, float64(dead), "dead")
	}
	size := func(p string) float64 {
		if st, err := os.Stat(p); err == nil {
			return float64(st.Size())
		}
		return 0
	}
	if !c.db.IsFile() {
		// A PostgreSQL database: its size, disk and backups are the server's, watched
		// there (pg_database_size, the server's own disk monitoring).
		return
	}
	if lag, err := c.db.SearchLag(ctx); err != nil {
		c.log.Warn("metrics: search index lag", "error", err)
	} else {
		behind := 0.0
		if !lag.Since.IsZero() {
			behind = max(time.Since(lag.Since).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(descSearchBehindRows, prometheus.GaugeValue, float64(lag.Rows))
		ch <- prometheus.MustNewConstMetric(descSearchBehindSeconds, prometheus.GaugeValue, behind)
	}
	ch <- prometheus.MustNewConstMetric(descSearchIndexed, prometheus.CounterValue, float64(c.db.SearchIndexed()))
	ch <- prometheus.MustNewConstMetric(descDBSize, prometheus.GaugeValue, size(c.db.Path()))
	ch <- prometheus.MustNewConstMetric(descWALSize, prometheus.GaugeValue, size(c.db.Path()+"-wal"))
	if free, size, err := c.db.DiskSpace(); err != nil {
		c.log.Warn("metrics: free disk space", "error", err)
	} else {
		ch <- prometheus.MustNewConstMetric(descDiskFree, prometheus.GaugeValue, float64(free))
		ch <- prometheus.MustNewConstMetric(descDiskSize, prometheus.GaugeValue, float64(size))
	}
	if t, ok := bootstrap.LastBackup(bootstrap.BackupBase(c.db, c.backupDir)); ok {
		ch <- prometheus.MustNewConstMetric(descLastBackup, prometheus.GaugeValue, float64(t.UnixNano())/1e9)
		ch <- prometheus.MustNewConstMetric(descBackupAge, prometheus.GaugeValue, time.Since(t).Seconds())
	}
}

// requestHook, loadHook, processedHook and backupHook are m's hooks, nil when metrics are off.
func (m *metrics) requestHook() func(server.RequestInfo) {
	if m == nil {
		return nil
	}
	return m.onRequest
}

func (m *metrics) loadHook() func(*store.LoadResult) {
	if m == nil {
		return nil
	}
	return m.onLoad
}

func (m *metrics) processedHook() func(int) {
	if m == nil {
		return nil
	}
	return m.onProcessed
}

// scheduleHook is the scheduler's OnRun hook, nil when metrics are off.
func (m *metrics) scheduleHook() func(string) {
	if m == nil {
		return nil
	}
	return func(result string) { m.scheduleRuns.WithLabelValues(result).Inc() }
}

func (m *metrics) backupHook() func(string, error) {
	if m == nil {
		return nil
	}
	return m.onBackup
}
