package store

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"dataservice/internal/clip"
	"dataservice/internal/netguard"
	"dataservice/store/model"
)

// ConfigDef is a configuration entry defined in code.
type ConfigDef struct {
	Keyname     string
	Default     string
	Description string
	// Min and Max bound integer entries; Int says the value is an integer.
	Int      bool
	Min, Max int
}

// Configuration keys. Code reads configuration through these names only: an unknown
// key is logged as an internal error rather than silently read as empty or 0.
const (
	ConfigAppName             = "GLOBAL_APPNAME"
	ConfigCSVDelimiter        = "CSV_DELIMITER"
	ConfigDataDefaultSize     = "DATA_DEFAULT_SIZE"
	ConfigDataMaxSize         = "DATA_MAX_SIZE"
	ConfigTaskRetentionDays   = "TASK_RETENTION_DAYS"
	ConfigRevisionRetention   = "REVISION_RETENTION_DAYS"
	ConfigQueueMax            = "QUEUE_MAX"
	ConfigSessionIdleMinutes  = "CONSOLE_SESSION_IDLE_MINUTES"
	ConfigSessionMaxHours     = "CONSOLE_SESSION_MAX_HOURS"
	ConfigQueueMaxPerOwner    = "QUEUE_MAX_PER_OWNER"
	ConfigBackupIntervalHours = "BACKUP_INTERVAL_HOURS"
	ConfigBackupKeep          = "BACKUP_KEEP"
	ConfigWebhookAllowPrivate = "WEBHOOK_ALLOW_PRIVATE"
	ConfigWebhookMaxAttempts  = "WEBHOOK_MAX_ATTEMPTS"
	ConfigWebhookTimeout      = "WEBHOOK_TIMEOUT_SECONDS"
)

// ConfigDefs are the configuration entries this code defines; the start-up step
// "synchronise configuration" adds missing ones with their default, keeps stored
// values and removes entries no longer listed here.
var ConfigDefs = []ConfigDef{
	{Keyname: ConfigAppName, Default: "dataservice", Description: "application name shown to users"},
	{Keyname: ConfigCSVDelimiter, Default: ";", Description: "default CSV delimiter of /api/rawfile/ (one character)"},
	{Keyname: ConfigDataDefaultSize, Default: "200", Description: "default page size of instance lists", Int: true, Min: 1, Max: 100000},
	{Keyname: ConfigDataMaxSize, Default: "500", Description: "largest page size of instance lists", Int: true, Min: 1, Max: 100000},
	{Keyname: ConfigTaskRetentionDays, Default: "30", Description: "days finished tasks are kept", Int: true, Min: 1, Max: 36500},
	{Keyname: ConfigRevisionRetention, Default: "0", Description: "days revisions are kept (0 = forever); an instance's latest revision is always kept", Int: true, Min: 0, Max: 36500},
	{Keyname: ConfigQueueMax, Default: "1000", Description: "most unfinished tasks the queue accepts", Int: true, Min: 1, Max: 1000000},
	{Keyname: ConfigSessionIdleMinutes, Default: "60", Description: "web console: minutes without a request after which a session ends", Int: true, Min: 1, Max: 525600},
	{Keyname: ConfigSessionMaxHours, Default: "12", Description: "web console: hours after sign-in after which a session ends", Int: true, Min: 1, Max: 8760},
	{Keyname: ConfigQueueMaxPerOwner, Default: "100", Description: "most unfinished tasks one submitting credential (user or API key) may have queued or running", Int: true, Min: 1, Max: 1000000},
	{Keyname: ConfigBackupIntervalHours, Default: "0", Description: "hours between scheduled backups taken by serve (0 = off)", Int: true, Min: 0, Max: 8760},
	{Keyname: ConfigBackupKeep, Default: "7", Description: "scheduled backups kept; older ones are deleted", Int: true, Min: 1, Max: 1000},
	{Keyname: ConfigWebhookAllowPrivate, Default: "", Description: "comma-separated hosts, addresses or CIDR ranges webhooks may target although loopback, link-local, multicast or a cloud metadata address (private ranges need no entry)"},
	{Keyname: ConfigWebhookMaxAttempts, Default: "8", Description: "attempts to deliver an event before it is dead (listed, redeliverable)", Int: true, Min: 1, Max: 100},
	{Keyname: ConfigWebhookTimeout, Default: "10", Description: "seconds one webhook attempt may take (connect, send, answer)", Int: true, Min: 1, Max: 300},
}

func configDef(key string) (ConfigDef, bool) {
	for _, d := range ConfigDefs {
		if d.Keyname == key {
			return d, true
		}
	}
	return ConfigDef{}, false
}

// ValidateConfig checks value for the entry key.
func ValidateConfig(key, value string) error {
	d, ok := configDef(key)
	if !ok {
		return model.Errorf(model.EInvalid, "unknown configuration key %s", clip.Quote(key))
	}
	// PostgreSQL's text cannot hold a NUL: neither engine stores one.
	if strings.ContainsRune(value, 0) {
		return model.Errorf(model.EInvalid, "configuration %s: a NUL character is not allowed", key)
	}
	if d.Int {
		n, err := strconv.Atoi(value)
		if err != nil {
			return model.Errorf(model.EInvalid, "configuration %s: %s is not an integer", key, clip.Quote(value))
		}
		if n < d.Min || n > d.Max {
			return model.Errorf(model.EInvalid, "configuration %s: %d is outside %d..%d", key, n, d.Min, d.Max)
		}
	}
	if key == ConfigWebhookAllowPrivate {
		if _, err := netguard.Parse(value); err != nil {
			return model.Errorf(model.EInvalid, "configuration %s: %s", key, err.Error())
		}
	}
	if key == ConfigCSVDelimiter {
		r := []rune(value)
		if len(r) != 1 {
			return model.Errorf(model.EInvalid, "configuration CSV_DELIMITER: must be exactly one character")
		}
		// The characters no CSV reader can split on: /api/rawfile/ would refuse every
		// request that relies on the configured delimiter.
		switch r[0] {
		case '"', '\r', '\n', 0, utf8.RuneError:
			return model.Errorf(model.EInvalid, "configuration CSV_DELIMITER: %s cannot be a delimiter (quote, newline, NUL or U+FFFD)", clip.Quote(value))
		}
	}
	return nil
}

// SyncConfig adds entries the code defines with their default, keeps stored values,
// refreshes defaults and descriptions, and removes entries the code no longer defines.
func (tx *Tx) SyncConfig(ctx context.Context) error {
	keep := map[string]bool{}
	for _, d := range ConfigDefs {
		keep[d.Keyname] = true
		_, err := tx.execContext(ctx, `INSERT INTO configuration(keyname, value, default_value, description)
			VALUES(?, ?, ?, ?)
			ON CONFLICT(keyname) DO UPDATE SET default_value = excluded.default_value, description = excluded.description`,
			d.Keyname, d.Default, d.Default, d.Description)
		if err != nil {
			return fmt.Errorf("sync configuration %s: %w", d.Keyname, err)
		}
	}
	rows, err := tx.queryContext(ctx, "SELECT keyname FROM configuration")
	if err != nil {
		return fmt.Errorf("sync configuration: %w", err)
	}
	var drop []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return fmt.Errorf("sync configuration: %w", err)
		}
		if !keep[k] {
			drop = append(drop, k)
		}
	}
	rows.Close()
	for _, k := range drop {
		if _, err := tx.execContext(ctx, "DELETE FROM configuration WHERE keyname = ?", k); err != nil {
			return fmt.Errorf("sync configuration: %w", err)
		}
	}
	return nil
}

// ConfigEntry is a stored configuration entry.
type ConfigEntry struct {
	Keyname      string `json:"keyname" yaml:"keyname"`
	Value        string `json:"value" yaml:"value"`
	DefaultValue string `json:"default_value" yaml:"default_value"`
	Description  string `json:"description" yaml:"description"`
}

// Config lists the stored configuration entries by keyname.
func (db *DB) Config(ctx context.Context) ([]ConfigEntry, error) {
	rows, err := db.reader().queryContext(ctx, `SELECT keyname, COALESCE(value, ''), COALESCE(default_value, ''),
		COALESCE(description, '') FROM configuration ORDER BY keyname`)
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	defer rows.Close()
	var out []ConfigEntry
	for rows.Next() {
		var e ConfigEntry
		if err := rows.Scan(&e.Keyname, &e.Value, &e.DefaultValue, &e.Description); err != nil {
			return nil, fmt.Errorf("read configuration: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// ConfigValue returns the stored value of key, or its code default when it is not stored.
func (db *DB) ConfigValue(ctx context.Context, key string) string {
	d, ok := configDef(key)
	if !ok {
		db.log.Error("read of an unknown configuration key", "key", key)
	}
	if vals, err := db.configValues(ctx); err == nil {
		if v, ok := vals[key]; ok {
			return v
		}
	}
	return d.Default
}

// configValues returns the stored configuration values, cached in memory until the
// generation counter moves (every change of the configuration table moves it).
func (db *DB) configValues(ctx context.Context) (map[string]string, error) {
	gen, err := db.generation(ctx)
	if err != nil {
		return nil, err
	}
	db.mu.RLock()
	vals, fresh := db.config, db.config != nil && db.configGen == gen
	db.mu.RUnlock()
	if fresh {
		return vals, nil
	}
	rows, err := db.reader().queryContext(ctx, "SELECT keyname, value FROM configuration WHERE value IS NOT NULL")
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	defer rows.Close()
	vals = map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("read configuration: %w", err)
		}
		vals[k] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	db.mu.Lock()
	db.config, db.configGen = vals, gen
	db.mu.Unlock()
	return vals, nil
}

// ConfigInt is ConfigValue as an integer, falling back to the default when unreadable.
func (db *DB) ConfigInt(ctx context.Context, key string) int {
	if n, err := strconv.Atoi(db.ConfigValue(ctx, key)); err == nil {
		return n
	}
	d, _ := configDef(key)
	n, _ := strconv.Atoi(d.Default)
	return n
}

// SetConfig validates and stores updates; an unknown key or invalid value changes nothing.
func (db *DB) SetConfig(ctx context.Context, updates map[string]string) error {
	keys := make([]string, 0, len(updates))
	for k := range updates {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := ValidateConfig(k, updates[k]); err != nil {
			return err
		}
	}
	return db.WithTx(ctx, func(tx *Tx) error {
		for _, k := range keys {
			if _, err := tx.execContext(ctx, "UPDATE configuration SET value = ? WHERE keyname = ?", updates[k], k); err != nil {
				return fmt.Errorf("write configuration %s: %w", k, err)
			}
		}
		return nil
	})
}
