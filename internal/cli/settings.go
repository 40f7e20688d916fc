package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"dataservice/bootstrap"
	"dataservice/internal/clientaddr"
	"dataservice/store"
)

// Compiled-in code version; build.sh sets them with -ldflags -X.
var (
	version     = "4.9.0"
	versionDate = "2026-11-22"
)

// settings are the validated SERVICE_* settings: each is read from the environment,
// a flag where there is one wins, and all are validated before anything is opened.
type settings struct {
	DB            string
	Listen        string
	BaseURL       string
	Version       string
	VersionDate   string
	APIKeySecret  string
	AdminPassword string
	Workers       int
	// TaskLease is SERVICE_TASK_LEASE: how long a task a dead process held stays
	// claimed (hidden setting, no flag; tests and operators who need a faster takeover).
	TaskLease time.Duration
	LogLevel  slog.Level
	LogFormat string
	Backup    bool
	// BackupDir is SERVICE_BACKUP_DIR: the existing directory of the automatic backups
	// (the backup before migrating; SQLite's scheduled backups), made absolute. Empty:
	// beside the SQLite file; on PostgreSQL a start that must back up before migrating
	// is refused.
	BackupDir string
	// ReadHeaderTimeout is SERVICE_READ_HEADER_TIMEOUT: how long a client may take to
	// send its request headers (hidden setting, no flag, default 10s; tests shorten it).
	ReadHeaderTimeout time.Duration
	// AccessLog is SERVICE_ACCESS_LOG (on/off, default on): one info line per request.
	AccessLog bool
	// MetricsListen is SERVICE_METRICS_LISTEN: host:port of /metrics ("" = off).
	MetricsListen string
	// DiskWarn is SERVICE_DISK_WARN (--disk-warn): serve warns when the free space on
	// the database's filesystem is below it (diskspace.go).
	DiskWarn diskWarn
	// TrustedProxies is SERVICE_TRUSTED_PROXIES (--trusted-proxies): the reverse
	// proxies whose X-Forwarded-For gives the client address (empty: none, the header is
	// never read).
	TrustedProxies clientaddr.Trusted
	// SecretKeyFile is SERVICE_SECRET_KEY_FILE, made absolute: the key file of
	// encrypted secrets (event rules' signing secrets). Empty: on SQLite the database's
	// path plus ".key", created at the first write that needs it; on PostgreSQL none,
	// so such a write fails naming the setting.
	SecretKeyFile string
}

// settingFlags are the values of the flags that override settings; which flags a
// command takes is decided by the command (cli.dbFlags and the command's setup).
type settingFlags struct {
	db, listen, baseURL, logLevel, logFormat, backup string
	workers, diskWarn, trustedProxies                string
	// quiet: a command other than serve and migrate, whose default log level is warn.
	quiet bool
}

// loadSettings reads the environment, lets flags win, and validates everything,
// naming the variable in each error.
func loadSettings(getenv func(string) string, f *settingFlags) (*settings, error) {
	pick := func(flag, env, def string) string {
		if flag != "" {
			return flag
		}
		if v := getenv(env); v != "" {
			return v
		}
		return def
	}
	s := &settings{
		DB:            pick(f.db, "SERVICE_DB", "./dataservice.db"),
		Listen:        pick(f.listen, "SERVICE_LISTEN", "127.0.0.1:8080"),
		BaseURL:       strings.TrimRight(pick(f.baseURL, "SERVICE_BASE_URL", ""), "/"),
		Version:       pick("", "SERVICE_VERSION", version),
		VersionDate:   pick("", "SERVICE_VERSION_DATE", versionDate),
		APIKeySecret:  getenv("SERVICE_APIKEY_SECRET"),
		AdminPassword: getenv("SERVICE_ADMIN_PASSWORD"),
		LogFormat:     pick(f.logFormat, "SERVICE_LOG_FORMAT", "text"),
	}
	var errs []string
	if _, _, err := net.SplitHostPort(s.Listen); err != nil {
		errs = append(errs, fmt.Sprintf("SERVICE_LISTEN %q: not host:port", s.Listen))
	}
	if s.BaseURL != "" {
		u, err := url.Parse(s.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Sprintf("SERVICE_BASE_URL %q: not an absolute http(s) URL", s.BaseURL))
		}
	}
	workers := pick(f.workers, "SERVICE_WORKERS", "2")
	n, err := strconv.Atoi(workers)
	if err != nil || n < 1 || n > 64 {
		errs = append(errs, fmt.Sprintf("SERVICE_WORKERS %q: not an integer from 1 to 64", workers))
	}
	s.Workers = n
	if v := getenv("SERVICE_TASK_LEASE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > time.Hour {
			errs = append(errs, fmt.Sprintf("SERVICE_TASK_LEASE %q: not a duration from 1s to 1h", v))
		}
		s.TaskLease = d
	}
	defaultLevel := "info"
	if f.quiet {
		defaultLevel = "warn"
	}
	level := pick(f.logLevel, "SERVICE_LOG_LEVEL", defaultLevel)
	if err := s.LogLevel.UnmarshalText([]byte(level)); err != nil {
		errs = append(errs, fmt.Sprintf("SERVICE_LOG_LEVEL %q: not debug, info, warn or error", level))
	}
	if s.LogFormat != "text" && s.LogFormat != "json" {
		errs = append(errs, fmt.Sprintf("SERVICE_LOG_FORMAT %q: not text or json", s.LogFormat))
	}
	switch b := strings.ToLower(pick(f.backup, "SERVICE_BACKUP", "on")); b {
	case "on":
		s.Backup = true
	case "off":
	default:
		errs = append(errs, fmt.Sprintf("SERVICE_BACKUP %q: not on or off", b))
	}
	if v := getenv("SERVICE_BACKUP_DIR"); v != "" {
		if s.BackupDir, err = backupDir(v); err != nil {
			errs = append(errs, fmt.Sprintf("SERVICE_BACKUP_DIR %q: %v", v, err))
		}
	}
	rht := pick("", "SERVICE_READ_HEADER_TIMEOUT", "10s")
	if d, err := time.ParseDuration(rht); err != nil || d < 100*time.Millisecond || d > 10*time.Minute {
		errs = append(errs, fmt.Sprintf("SERVICE_READ_HEADER_TIMEOUT %q: not a duration from 100ms to 10m", rht))
	} else {
		s.ReadHeaderTimeout = d
	}
	switch v := strings.ToLower(pick("", "SERVICE_ACCESS_LOG", "on")); v {
	case "on":
		s.AccessLog = true
	case "off":
	default:
		errs = append(errs, fmt.Sprintf("SERVICE_ACCESS_LOG %q: not on or off", v))
	}
	if s.MetricsListen = getenv("SERVICE_METRICS_LISTEN"); s.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(s.MetricsListen); err != nil {
			errs = append(errs, fmt.Sprintf("SERVICE_METRICS_LISTEN %q: not host:port", s.MetricsListen))
		}
	}
	dw := pick(f.diskWarn, "SERVICE_DISK_WARN", defaultDiskWarn)
	if s.DiskWarn, err = parseDiskWarn(dw); err != nil {
		errs = append(errs, "SERVICE_DISK_WARN "+err.Error())
	}
	tp := pick(f.trustedProxies, "SERVICE_TRUSTED_PROXIES", "")
	if s.TrustedProxies, err = clientaddr.Parse(tp); err != nil {
		errs = append(errs, "SERVICE_TRUSTED_PROXIES "+err.Error())
	}
	if v := getenv("SERVICE_SECRET_KEY_FILE"); v != "" {
		abs, err := filepath.Abs(v)
		if err == nil {
			err = store.CheckSecretKeyFile(abs)
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s %q: %v", store.SecretKeySetting, v, err))
		}
		s.SecretKeyFile = abs
	}
	if err := bootstrap.CheckVersion(s.Version); err != nil {
		errs = append(errs, "SERVICE_VERSION "+err.Error())
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid settings:\n  %s", strings.Join(errs, "\n  "))
	}
	return s, nil
}

// backupDir checks SERVICE_BACKUP_DIR: an existing directory (not created: a typo must
// not scatter backups), returned absolute so the logs name where backups are.
func backupDir(v string) (string, error) {
	abs, err := filepath.Abs(v)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", errors.New("no such directory")
	case err != nil:
		return "", err
	case !st.IsDir():
		return "", errors.New("not a directory")
	}
	return abs, nil
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
