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
	"dataservice/tasks"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: dataservice [command] [flags]

commands:
  serve                      run the start-up sequence, then serve (default)
  migrate [--status]         run the start-up sequence and exit; --status only reports
  load FILE|DIR...           load YAML/JSON files [--action A] [--dryrun] [--pipeline NAME]
  export --schema a,b        write instances in the load format [--format yaml|json]
  apikey create KEYNAME --permissions p1,p2 [--readonly] [--user LOGIN] [--expires DATE]
  apikey list | apikey revoke KEYNAME
  pipeline list | pipeline run NAME --schema a,b [--dryrun] [--wait]
  ipam collect               create the missing ipam_ip instances for every stored ipv4 value
  backup FILE                consistent online copy of the database
  restore FILE               replace the (stopped) database with a backup; the next start migrates it
  version                    print SERVICE_VERSION and SERVICE_VERSION_DATE

Run "dataservice COMMAND --help" for a command's flags.
`

// cli carries what every command needs.
type cli struct {
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
}

// run is the whole program: it returns the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	c := &cli{getenv: getenv, stdout: stdout, stderr: stderr}
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = c.serve(ctx, args)
	case "migrate":
		err = c.migrate(ctx, args)
	case "load":
		err = c.load(ctx, args)
	case "export":
		err = c.export(ctx, args)
	case "apikey":
		err = c.apikey(ctx, args)
	case "backup":
		err = c.backup(ctx, args)
	case "restore":
		err = c.restore(ctx, args)
	case "pipeline":
		err = c.pipeline(ctx, args)
	case "ipam":
		err = c.ipam(ctx, args)
	case "version":
		err = c.version(args)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "dataservice: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, pflag.ErrHelp):
		return 0
	case errors.As(err, &ee):
		return int(ee)
	}
	fmt.Fprintf(stderr, "dataservice %s: %v\n", cmd, err)
	return 1
}

// exitError ends a command with a status and no further message.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// flags returns a flag set for a command with the common flags.
func (c *cli) flags(name string, f *settingFlags) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(c.stderr)
	addCommonFlags(fs, f)
	return fs
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

// open validates settings, opens the database and, unless skipStart, runs the start-up sequence.
func (c *cli) open(ctx context.Context, f *settingFlags, skipStart bool) (*store.DB, *settings, *slog.Logger, error) {
	s, err := loadSettings(c.getenv, f)
	if err != nil {
		return nil, nil, nil, err
	}
	log := c.logger(s)
	db, err := store.Open(ctx, s.DB, store.Options{Logger: log})
	if err != nil {
		return nil, nil, nil, err
	}
	if skipStart {
		return db, s, log, nil
	}
	if err := startUp(ctx, db, s, log); err != nil {
		db.Close()
		return nil, nil, nil, err
	}
	return db, s, log, nil
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

func (c *cli) serve(ctx context.Context, args []string) error {
	var f settingFlags
	fs := c.flags("serve", &f)
	addServeFlags(fs, &f)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	s, err := loadSettings(c.getenv, &f)
	if err != nil {
		return err
	}
	log := c.logger(s)
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
	runner := tasks.New(db, tasks.Options{Logger: log, Workers: s.Workers, Lease: s.TaskLease,
		OnProcessed: m.processedHook()})
	m.setRunner(runner)
	srv := &http.Server{
		Handler: server.New(server.Options{DB: db, Runner: runner, Logger: log, BaseURL: s.BaseURL,
			Version: s.Version, VersionDate: s.VersionDate, Ready: ready.Load, AccessLog: s.AccessLog,
			OnRequest: m.requestHook(), OnLoad: m.loadHook()}),
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

func (c *cli) migrate(ctx context.Context, args []string) error {
	var f settingFlags
	fs := c.flags("migrate", &f)
	status := fs.Bool("status", false, "only print DB_VERSION, SERVICE_VERSION and pending blocks")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !*status {
		db, s, _, err := c.open(ctx, &f, false)
		if err != nil {
			return err
		}
		defer db.Close()
		dbv, _ := db.Registry(ctx, store.RegDBVersion)
		fmt.Fprintf(c.stdout, "DB_VERSION %s (SERVICE_VERSION %s)\n", dbv, s.Version)
		return nil
	}
	db, s, _, err := c.open(ctx, &f, true)
	if err != nil {
		return err
	}
	defer db.Close()
	dbv, pending, err := bootstrap.Pending(ctx, db, s.Version)
	if err != nil {
		return err
	}
	if dbv == "" {
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
// name order) and parses them; it returns the entries, per-file errors and warnings.
func readLoadFiles(paths []string) ([]*store.Entry, []string, []string, error) {
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
	var all []*store.Entry
	var problems, warnings []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, nil, err
		}
		entries, warn, err := store.ParseDocumentLenient(filepath.Base(f), data)
		if err != nil {
			problems = append(problems, store.ErrorMessage(err))
			continue
		}
		warnings = append(warnings, warn...)
		all = append(all, entries...)
	}
	return all, problems, warnings, nil
}

func (c *cli) load(ctx context.Context, args []string) error {
	var f settingFlags
	fs := c.flags("load", &f)
	action := fs.String("action", "", "replace every entry's _action (create, update, init, delete, enable, disable, noop)")
	dryrun := fs.Bool("dryrun", false, "report what would change, write nothing")
	pipe := fs.String("pipeline", "", "apply this pipeline's rules to each entry before loading it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("no file or directory given")
	}
	entries, problems, warnings, err := readLoadFiles(fs.Args())
	if err != nil {
		return err
	}
	for _, w := range warnings {
		fmt.Fprintf(c.stderr, "warning: %s\n", w)
	}
	db, _, _, err := c.open(ctx, &f, false)
	if err != nil {
		return err
	}
	defer db.Close()
	opts := store.LoadOptions{Action: *action, DryRun: *dryrun}
	if *pipe != "" {
		if opts.Transform, err = pipelineTransform(ctx, db, *pipe); err != nil {
			return err
		}
	}
	res, err := db.Load(ctx, entries, opts)
	if err != nil {
		return err
	}
	for _, p := range problems {
		fmt.Fprintf(c.stderr, "error: %s\n", p)
	}
	for _, m := range res.Messages {
		fmt.Fprintf(c.stderr, "error: %s\n", m)
	}
	prefix := ""
	if *dryrun {
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

func (c *cli) export(ctx context.Context, args []string) error {
	var f settingFlags
	fs := c.flags("export", &f)
	schemas := fs.String("schema", "", "comma-separated schema names")
	all := fs.Bool("all", false, "every schema, built-in classes included (users, roles, keys without secrets...)")
	format := fs.String("format", "yaml", "yaml or json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	names := splitList(*schemas)
	if len(names) == 0 && !*all {
		return fmt.Errorf("--schema or --all is required")
	}
	if *format != "yaml" && *format != "json" {
		return fmt.Errorf("--format %q: yaml or json", *format)
	}
	db, _, _, err := c.open(ctx, &f, false)
	if err != nil {
		return err
	}
	defer db.Close()
	if *all {
		if names, err = db.SchemaNames(ctx); err != nil {
			return err
		}
	}
	return db.Export(ctx, c.stdout, names, *format)
}

func (c *cli) backup(ctx context.Context, args []string) error {
	var f settingFlags
	fs := c.flags("backup", &f)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: dataservice backup FILE")
	}
	db, _, _, err := c.open(ctx, &f, true)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Backup(ctx, fs.Arg(0)); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "backup written to %s\n", fs.Arg(0))
	return nil
}

func (c *cli) version(args []string) error {
	var f settingFlags
	fs := c.flags("version", &f)
	if err := fs.Parse(args); err != nil {
		return err
	}
	s, err := loadSettings(c.getenv, &f)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "dataservice %s (%s)\n", s.Version, s.VersionDate)
	return nil
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

// ipam runs "ipam collect": every stored ipv4 address without an ipam_ip instance
// gets one, with collected: true.
func (c *cli) ipam(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "collect" {
		return fmt.Errorf("usage: dataservice ipam collect")
	}
	var f settingFlags
	fs := c.flags("ipam collect", &f)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	db, _, _, err := c.open(ctx, &f, false)
	if err != nil {
		return err
	}
	defer db.Close()
	n, err := db.CollectIPs(ctx, "system")
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "collected %d new ipam_ip instances\n", n)
	return nil
}
