package cli

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"dataservice/store"
)

// diskWarn is SERVICE_DISK_WARN: the free space on the database's filesystem below which
// serve logs a warning, as bytes or as a percentage of the filesystem's size (zero: off).
type diskWarn struct {
	bytes uint64
	pct   float64
}

// defaultDiskWarn is 1 GiB: a margin an operator can still act in on any disk the
// service's file lives on; a small dedicated volume sets a percentage instead.
const defaultDiskWarn = "1GiB"

// diskUnits are the size suffixes SERVICE_DISK_WARN accepts, longest first.
var diskUnits = []struct {
	suffix string
	mult   uint64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
	{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1},
}

// parseDiskWarn reads "0" (off), a size in bytes with an optional unit ("512MiB", "2GB",
// "1073741824") or a percentage of the filesystem from 0 to 100 exclusive ("5%").
func parseDiskWarn(v string) (diskWarn, error) {
	bad := fmt.Errorf("%q: not a size (e.g. 1GiB, 500MB, 0 for off) or a percentage below 100 (e.g. 5%%)", v)
	if p, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || !(f > 0 && f < 100) || strings.TrimSpace(p) != p {
			return diskWarn{}, bad
		}
		return diskWarn{pct: f}, nil
	}
	num, mult := v, uint64(1)
	for _, u := range diskUnits {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			num, mult = n, u.mult
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || (n > 0 && n > (1<<63)/mult) {
		return diskWarn{}, bad
	}
	return diskWarn{bytes: n * mult}, nil
}

// threshold is the warning level in bytes on a filesystem of size bytes (0: off).
func (d diskWarn) threshold(size uint64) uint64 {
	if d.pct > 0 {
		return uint64(float64(size) * d.pct / 100)
	}
	return d.bytes
}

// diskCheckEvery is how often serve compares the free space with SERVICE_DISK_WARN.
const diskCheckEvery = time.Minute

// diskWarnRepeat is how often the warning repeats while the free space stays low:
// often enough to be seen in a log read later, rarely enough not to bury it.
const diskWarnRepeat = time.Hour

// watchDisk logs a warning when the free space on the database's filesystem is below
// warn (at once when it is so at start, then again every diskWarnRepeat while it stays
// low) and an info line when it is back above, until ctx ends.
func watchDisk(ctx context.Context, db *store.DB, warn diskWarn, every time.Duration, log *slog.Logger) {
	if warn.bytes == 0 && warn.pct == 0 {
		return
	}
	if !db.IsFile() {
		// The free space that matters is the database server's: this host's says
		// nothing about it.
		log.Info("free disk space is not watched: the database is on a PostgreSQL server (watch its disk there)")
		return
	}
	var low bool
	var warned time.Time
	check := func() {
		free, size, err := db.DiskSpace()
		if err != nil {
			log.Warn("check free disk space", "error", err)
			return
		}
		limit := warn.threshold(size)
		switch {
		case free < limit && (!low || time.Since(warned) >= diskWarnRepeat):
			low, warned = true, time.Now()
			log.Warn("disk space low: writes fail when the filesystem of the database is full",
				"db", db.Path(), "free_bytes", free, "size_bytes", size, "warn_below_bytes", limit)
		case free >= limit && low:
			low = false
			log.Info("disk space above the warning level again", "db", db.Path(), "free_bytes", free,
				"warn_below_bytes", limit)
		}
	}
	check()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			check()
		}
	}
}
