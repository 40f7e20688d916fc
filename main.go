// Command dataservice is a data-management service — schemas, instances, users,
// permissions, API keys and pipelines — in one binary with its data in one SQLite file.
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"dataservice/bootstrap"
	"dataservice/builtin"
	"dataservice/server"
	"dataservice/store"
	"dataservice/store/codec"
	"dataservice/store/model"
	"dataservice/tasks"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// cli carries what every command needs.
type cli struct {
	getenv   func(string) string
	stdout   io.Writer
	stderr   io.Writer
	stdin    io.Reader
	commands []command
	sf       settingFlags // filled by the flags of the command being run
}

func (c *cli) logger(s *settings) *slog.Logger {
	opts := &slog.HandlerOptions{Level: s.LogLevel, ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if a.Key == slog.LevelKey && len(groups) == 0 {
			if l, ok := a.Value.Any().(slog.Level); ok && l >= bootstrap.LevelCritical {
				a.Value = slog.StringValue("CRITICAL")
			}
		}
		return a
	}}
	if s.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(c.stderr, opts))
	}
	return slog.New(slog.NewTextHandler(c.stderr, opts))
}

// settingFlagNames are the flags that override SERVICE_* settings; an empty value is refused.
var settingFlagNames = map[string]bool{"db": true, "listen": true, "base-url": true, "log-level": true,
	"log-format": true, "backup": true, "workers": true, "disk-warn": true,
	"trusted-proxies": true}

// dbFlags registers the settings flags of a command that opens the database.
// startUp: the command runs the start-up sequence (serve, migrate), which adds
// --backup, the only reader of SERVICE_BACKUP. Every other command opens the
// database as it is and logs at warn unless told otherwise: the start-up sequence's
// info lines are not theirs, and would break the --wait progress line.
func (c *cli) dbFlags(fs *pflag.FlagSet, startUp bool) {
	fs.StringVar(&c.sf.db, "db", "", "SQLite file (SERVICE_DB, default ./dataservice.db)")
	defaultLevel := "warn"
	if startUp {
		defaultLevel = "info"
	}
	fs.StringVar(&c.sf.logLevel, "log-level", "", "debug, info, warn or error (SERVICE_LOG_LEVEL; default "+defaultLevel+")")
	fs.StringVar(&c.sf.logFormat, "log-format", "", "text or json (SERVICE_LOG_FORMAT)")
	if startUp {
		fs.StringVar(&c.sf.backup, "backup", "", "on or off: copy the file before migrating (SERVICE_BACKUP)")
	}
	c.sf.quiet = !startUp
}

// openStartUp validates settings, opens the database (creating it and applying its
// table layout steps) and runs the start-up sequence: migrate's way to open it.
func (c *cli) openStartUp(ctx context.Context) (*store.DB, *settings, *slog.Logger, error) {
	s, err := loadSettings(c.getenv, &c.sf)
	if err != nil {
		return nil, nil, nil, err
	}
	log := c.logger(s)
	if err := checkDBPath(s.DB); err != nil {
		return nil, nil, nil, err
	}
	db, err := store.Open(ctx, s.DB, store.Options{Logger: log})
	if err != nil {
		return nil, nil, nil, err
	}
	if err := startUp(ctx, db, s, log); err != nil {
		db.Close()
		return nil, nil, nil, err
	}
	return db, s, log, nil
}

// open opens the database for a command other than serve and migrate: as it is,
// without the start-up sequence, so it never touches admin, LAST_START or the
// backups. A file that is missing or empty, has table layout steps pending, or
// holds data of another version is refused with a message saying what to run, and
// nothing is written to it.
func (c *cli) open(ctx context.Context) (*store.DB, *settings, *slog.Logger, error) {
	return c.openAsIs(ctx, true)
}

// openAsIs is open; current: the data must be at the code version (backup copies
// any version).
func (c *cli) openAsIs(ctx context.Context, current bool) (*store.DB, *settings, *slog.Logger, error) {
	s, err := loadSettings(c.getenv, &c.sf)
	if err != nil {
		return nil, nil, nil, err
	}
	log := c.logger(s)
	if err := checkDBExists(s.DB); err != nil {
		return nil, nil, nil, err
	}
	if err := checkDBPath(s.DB); err != nil {
		return nil, nil, nil, err
	}
	db, err := store.Open(ctx, s.DB, store.Options{Logger: log, AsIs: true})
	if errors.Is(err, store.ErrLayoutPending) {
		return nil, nil, nil, fmt.Errorf("%w: %s", err, runMigrate)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if current {
		if err := checkCurrent(ctx, db, s); err != nil {
			db.Close()
			return nil, nil, nil, err
		}
	}
	return db, s, log, nil
}

// runMigrate ends the message of a command refused because the file needs the
// start-up sequence.
const runMigrate = "run `dataservice migrate` (or `serve`) first, with the service's settings"

// checkDBExists refuses a missing or empty database file: only serve and migrate
// create one.
func checkDBExists(path string) error {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) || (err == nil && st.Size() == 0) {
		return fmt.Errorf("no database at %s: run `dataservice migrate` (or `serve`) first", path)
	}
	return nil // any other failure is checkDBPath's to explain
}

// checkCurrent refuses data that is not at the code version, naming what to do.
func checkCurrent(ctx context.Context, db *store.DB, s *settings) error {
	err := bootstrap.Current(ctx, db, s.Version)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, bootstrap.ErrNeedsMigrate):
		return fmt.Errorf("database %s: %w: %s", s.DB, err, runMigrate)
	case errors.Is(err, bootstrap.ErrNewerData):
		return fmt.Errorf("database %s: %w: use that version of dataservice (or a newer one) with this file", s.DB, err)
	}
	return fmt.Errorf("database %s: %w", s.DB, err)
}

// checkDBPath names the usual reasons a database cannot be opened, which SQLite reports
// only as "unable to open database file": a missing directory, a file that is a
// directory, or no permission to the directory or the file.
func checkDBPath(path string) error {
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("database %s: directory %s does not exist (create it first)", path, dir)
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("database %s: permission denied on directory %s", path, dir)
	case err != nil:
		return fmt.Errorf("database %s: %w", path, err)
	case !st.IsDir():
		return fmt.Errorf("database %s: %s is not a directory", path, dir)
	}
	st, err = os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if syscall.Access(dir, 2|1) != nil { // W_OK|X_OK: the file must be created there
			return fmt.Errorf("database %s: permission denied: cannot create files in directory %s", path, dir)
		}
		return nil
	case err != nil:
		return fmt.Errorf("database %s: %w", path, err)
	case st.IsDir():
		return fmt.Errorf("database %s: is a directory, not a file", path)
	}
	if syscall.Access(path, 4) != nil { // R_OK
		return fmt.Errorf("database %s: permission denied: the file is not readable", path)
	}
	if syscall.Access(path, 2) != nil { // W_OK
		return fmt.Errorf("database %s: %w", path, errReadOnlyFile)
	}
	return nil
}

// errReadOnlyFile: the process may read the database file but not write it. Commands
// that only read open it read-only; the others stop with this error.
var errReadOnlyFile = errors.New("permission denied: the file is read-only for this user " +
	"(commands that change data need write access; export, list and show commands, and migrate --status, work)")

// openRead opens the database for a command that only reads. A file this process may
// not write is opened read-only, with a warning; otherwise it is open. Either way the
// data must be at the code version.
func (c *cli) openRead(ctx context.Context) (*store.DB, *settings, *slog.Logger, error) {
	s, err := loadSettings(c.getenv, &c.sf)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := checkDBPath(s.DB); errors.Is(err, errReadOnlyFile) {
		if err := checkDBExists(s.DB); err != nil {
			return nil, nil, nil, err
		}
		log := c.logger(s)
		db, err := store.Open(ctx, s.DB, store.Options{Logger: log, ReadOnly: true})
		if err != nil {
			return nil, nil, nil, err
		}
		if err := checkCurrent(ctx, db, s); err != nil {
			db.Close()
			return nil, nil, nil, err
		}
		log.Warn("database file is read-only: reading only", "db", s.DB)
		return db, s, log, nil
	}
	return c.open(ctx)
}

// reading is the run function of a command that only reads: the database opened as
// openRead opens it, handed to fn, closed after.
func reading(c *cli, fn func(ctx context.Context, db *store.DB) error) func(context.Context, []string) error {
	return func(ctx context.Context, _ []string) error {
		db, _, _, err := c.openRead(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		return fn(ctx, db)
	}
}

// startUp runs the start-up sequence with the settings; a refusal is returned as is.
func startUp(ctx context.Context, db *store.DB, s *settings, log *slog.Logger) error {
	return startUpWith(ctx, db, s, log, nil)
}

// startUpWith is startUp telling onBlock each step that changed the data version.
func startUpWith(ctx context.Context, db *store.DB, s *settings, log *slog.Logger, onBlock func(string)) error {
	err := bootstrap.Run(ctx, db, bootstrap.Options{Version: s.Version, VersionDate: s.VersionDate,
		APIKeySecret: s.APIKeySecret, AdminPassword: s.AdminPassword, Backup: s.Backup,
		Init: builtin.Init(), Logger: log, OnBlock: onBlock})
	if err != nil && !errors.Is(err, bootstrap.ErrRefused) {
		return fmt.Errorf("start-up: %w", err)
	}
	return err
}

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
	db, err := store.Open(ctx, s.DB, store.Options{Logger: log})
	if err != nil {
		ln.Close()
		return err
	}
	defer db.Close()
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
	srv := &http.Server{
		Handler: server.New(server.Options{DB: db, Runner: runner, Logger: log, BaseURL: s.BaseURL,
			Version: s.Version, VersionDate: s.VersionDate, Ready: ready.Load, AccessLog: s.AccessLog,
			OnRequest: m.requestHook(), OnLoad: m.loadHook(), TrustedProxies: s.TrustedProxies}),
		ReadHeaderTimeout: s.ReadHeaderTimeout,
		ReadTimeout:       2 * time.Minute,
		WriteTimeout:      5 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "db", s.DB, "version", s.Version)
	if exposedWithoutBaseURL(ln.Addr(), s.BaseURL) {
		log.Warn("listening on a non-loopback address without SERVICE_BASE_URL: task_url is built from each request's Host header; set SERVICE_BASE_URL to the address clients use",
			"addr", ln.Addr().String())
	}

	started, blocks := time.Now(), []string(nil)
	if err := startUpWith(ctx, db, s, log, func(b string) { blocks = append(blocks, b) }); err != nil {
		srv.Close()
		return err
	}
	m.startedUp(time.Since(started), blocks)
	ready.Store(true)
	runCtx, stopRunner := context.WithCancel(context.WithoutCancel(ctx))
	go bootstrap.BackupLoop(runCtx, db, backupTick, log, m.backupHook())
	runnerDone := make(chan struct{})
	go func() {
		defer close(runnerDone)
		runner.Run(runCtx)
	}()
	log.Info("ready")

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

func setupMigrate(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, true)
	status := fs.Bool("status", false, "only print DB_VERSION, SERVICE_VERSION and pending blocks; change nothing")
	return func(ctx context.Context, _ []string) error {
		if *status {
			return c.migrateStatus(ctx)
		}
		db, s, _, err := c.openStartUp(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		dbv, _ := db.Registry(ctx, store.RegDBVersion)
		fmt.Fprintf(c.stdout, "DB_VERSION %s (SERVICE_VERSION %s)\n", dbv, s.Version)
		return nil
	}
}

// migrateStatus reports and changes nothing: on a path with no database, or an empty
// file, it creates none, and it applies no table layout step.
func (c *cli) migrateStatus(ctx context.Context) error {
	s, err := loadSettings(c.getenv, &c.sf)
	if err != nil {
		return err
	}
	path := s.DB
	st, err := os.Stat(s.DB)
	missing := errors.Is(err, os.ErrNotExist)
	empty := err == nil && st.Mode().IsRegular() && st.Size() == 0
	if missing || empty {
		// Nothing to create at the path: report what a new database would run, computed
		// on a scratch file that is removed afterwards.
		if err := checkDBPath(s.DB); err != nil && !errors.Is(err, errReadOnlyFile) {
			return err
		}
		tmp, err := os.MkdirTemp("", "dataservice-status-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		path = filepath.Join(tmp, "empty.db")
	}
	scratch := missing || empty
	err = checkDBPath(s.DB)
	readOnly := errors.Is(err, errReadOnlyFile)
	if err != nil && !readOnly {
		return err
	}
	db, err := store.Open(ctx, path, store.Options{Logger: c.logger(s), ReadOnly: readOnly && !scratch,
		AsIs: !readOnly && !scratch})
	if errors.Is(err, store.ErrLayoutPending) {
		// The registry of an older layout is not read: migrate applies the layout steps,
		// then the blocks its DB_VERSION needs.
		_, detail, _ := strings.Cut(err.Error(), store.ErrLayoutPending.Error())
		fmt.Fprintf(c.stdout, "DB_VERSION: (not read: table layout steps pending)\nSERVICE_VERSION: %s\n"+
			"pending: table layout steps%s, then the migration blocks of its DB_VERSION\n", s.Version, detail)
		return nil
	}
	if err != nil {
		return err
	}
	defer db.Close()
	dbv, pending, err := bootstrap.Pending(ctx, db, s.Version)
	if err != nil {
		return err
	}
	switch {
	case missing:
		dbv = fmt.Sprintf("(none: no database at %s; the first start creates it)", s.DB)
	case dbv == "":
		dbv = "(none: empty database)"
	}
	fmt.Fprintf(c.stdout, "DB_VERSION: %s\nSERVICE_VERSION: %s\n", dbv, s.Version)
	if len(pending) == 0 {
		fmt.Fprintln(c.stdout, "pending: none")
	} else {
		fmt.Fprintf(c.stdout, "pending: %s\n", strings.Join(pending, ", "))
	}
	return nil
}

// readLoadFiles expands files and directories (their .yml, .yaml and .json files in
// name order) and checks that each parses; it returns the files, per-file errors and
// warnings. Files that parse item by item are read again, item by item, by the load.
func readLoadFiles(paths []string) ([]*loadFile, []string, []string, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, nil, nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		ents, err := os.ReadDir(p)
		if err != nil {
			return nil, nil, nil, err
		}
		var names []string
		for _, e := range ents {
			ext := strings.ToLower(filepath.Ext(e.Name()))
			if e.Type().IsRegular() && (ext == ".yml" || ext == ".yaml" || ext == ".json") {
				names = append(names, e.Name())
			}
		}
		sort.Strings(names)
		for _, n := range names {
			files = append(files, filepath.Join(p, n))
		}
	}
	var out []*loadFile
	var problems, warnings []string
	for _, f := range files {
		lf := &loadFile{name: filepath.Base(f), path: f}
		ok, err := checkStream(lf)
		if err != nil {
			return nil, nil, nil, err
		}
		if ok {
			out = append(out, lf)
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, nil, err
		}
		entries, warn, err := codec.ParseDocumentLenient(lf.name, data)
		if err != nil {
			problems = append(problems, store.ErrorMessage(err))
			continue
		}
		warnings = append(warnings, warn...)
		lf.entries = entries
		out = append(out, lf)
	}
	return out, problems, warnings, nil
}

// loadFile is a file to load: streamed (read item by item while loading, after a
// first reading checked every item parses) or parsed whole into entries.
type loadFile struct {
	name, path string
	stream     bool
	entries    []*model.Entry
}

// checkStream reads the file item by item without keeping anything: true when the
// whole file parses that way, so it can be loaded as it is read.
func checkStream(lf *loadFile) (bool, error) {
	f, err := os.Open(lf.path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	err = codec.StreamDocument(lf.name, f, func(*model.Entry) error { return nil })
	if errors.Is(err, codec.ErrNotStreamable) {
		return false, nil
	}
	lf.stream = err == nil
	return lf.stream, err
}

// loadSource yields the entries of files in order, streaming those that stream.
func loadSource(files []*loadFile) func(yield func(*model.Entry) error) error {
	return func(yield func(*model.Entry) error) error {
		for _, lf := range files {
			if !lf.stream {
				for _, e := range lf.entries {
					if err := yield(e); err != nil {
						return err
					}
				}
				continue
			}
			f, err := os.Open(lf.path)
			if err != nil {
				return err
			}
			err = codec.StreamDocument(lf.name, f, yield)
			f.Close()
			if errors.Is(err, codec.ErrNotStreamable) {
				return fmt.Errorf("%s: the file changed while it was loaded", lf.path)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
}

func setupLoad(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, false)
	action := fs.String("action", "", "replace every entry's _action (create, update, init, delete, enable, disable, noop)")
	dryrun := fs.Bool("dryrun", false, "report what would change, write nothing")
	pipe := fs.String("pipeline", "", "apply this pipeline's rules to each entry before loading it")
	return func(ctx context.Context, args []string) error { return c.load(ctx, args, *action, *dryrun, *pipe) }
}

func (c *cli) load(ctx context.Context, args []string, action string, dryrun bool, pipe string) error {
	switch action {
	case "", "create", "update", "init", "delete", "enable", "disable", "noop":
	default:
		return &usageError{c.find("load"), fmt.Sprintf("--action %q: not create, update, init, delete, enable, disable or noop", action)}
	}
	files, problems, warnings, err := readLoadFiles(args)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		fmt.Fprintf(c.stderr, "warning: %s\n", w)
	}
	db, _, _, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	opts := store.LoadOptions{Action: model.Action(action), DryRun: dryrun}
	if pipe != "" {
		// The API's load-time pipeline, with its checks: a disabled pipeline or one
		// whose content does not parse is refused, as it is there.
		if opts.Transform, err = db.LoadTransform(ctx, model.SystemAuth(), pipe); err != nil {
			switch store.ErrorCode(err) {
			case model.ENotFound:
				return fmt.Errorf("pipeline %q not found", pipe)
			case model.EInternal:
				return err
			}
			return errors.New(store.ErrorMessage(err))
		}
	}
	res, err := db.LoadStream(ctx, loadSource(files), opts)
	if err != nil {
		return loadStopped(err, res)
	}
	for _, p := range problems {
		fmt.Fprintf(c.stderr, "error: %s\n", p)
	}
	for _, m := range res.Messages {
		fmt.Fprintf(c.stderr, "error: %s\n", m)
	}
	prefix := ""
	if dryrun {
		prefix = "dry run: "
	}
	fmt.Fprintf(c.stdout, "%screated %d, updated %d, unchanged %d, deleted %d, enabled %d, disabled %d, skipped %d, errors %d\n",
		prefix, res.Created, res.Updated, res.Unchanged, res.Deleted, res.Enabled, res.Disabled, res.Skipped,
		res.Errors+len(problems))
	if res.Errors+len(problems) > 0 {
		return exitError(1)
	}
	return nil
}

func setupExport(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, false)
	schemas := fs.String("schema", "", "comma-separated schema names")
	all := fs.Bool("all", false, "every schema, built-in classes included (users, roles, keys without secrets...)")
	format := fs.String("format", "yaml", "yaml or json")
	return func(ctx context.Context, _ []string) error { return c.export(ctx, *schemas, *all, *format) }
}

func (c *cli) export(ctx context.Context, schemas string, all bool, format string) error {
	names := splitList(schemas)
	if len(names) == 0 && !all {
		return &usageError{c.find("export"), "--schema or --all is required"}
	}
	if format != "yaml" && format != "json" {
		return &usageError{c.find("export"), fmt.Sprintf("--format %q: yaml or json", format)}
	}
	db, _, _, err := c.openRead(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	if all {
		if names, err = db.SchemaNames(ctx); err != nil {
			return err
		}
	}
	return db.Export(ctx, c.stdout, names, format)
}

func setupBackup(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, false)
	return func(ctx context.Context, args []string) error {
		db, _, _, err := c.openAsIs(ctx, false)
		if err != nil {
			return err
		}
		defer db.Close()
		if err := db.Backup(ctx, args[0]); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "backup written to %s\n", args[0])
		return nil
	}
}

func setupVersion(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	return func(context.Context, []string) error {
		s, err := loadSettings(c.getenv, &c.sf)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "dataservice %s (%s)\n", s.Version, s.VersionDate)
		return nil
	}
}

// splitList splits a comma-separated list, trimming items and dropping empty ones.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// newSecret returns 32 random bytes, base64url.
func newSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// ipamCollect runs "ipam collect": every stored ipv4 address without an ipam_ip instance
// gets one, with collected: true.
func setupIPAMCollect(c *cli, fs *pflag.FlagSet) func(context.Context, []string) error {
	c.dbFlags(fs, false)
	return c.ipamCollect
}

func (c *cli) ipamCollect(ctx context.Context, _ []string) error {
	db, _, _, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	res, err := db.CollectIPs(ctx, "system")
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "collected %d new ipam_ip instances\n", res.Created)
	if res.Skipped > 0 {
		// The addresses the ipam_ip schema refuses stay uncollected; the run succeeds.
		fmt.Fprintf(c.stdout, "skipped %d addresses the ipam_ip schema refuses:\n", res.Skipped)
		for _, w := range res.Warnings {
			fmt.Fprintf(c.stdout, "  %s\n", w)
		}
	}
	return nil
}
