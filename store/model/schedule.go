package model

import (
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"dataservice/internal/clip"
)

// Missed-run policies of a schedule: what a start after downtime does with the runs
// that fell due meanwhile.
const (
	MissedRunOnce = "run_once" // one run for all of them
	MissedSkip    = "skip"     // none; wait for the next due time
)

// MinEvery is the shortest interval of an `@every DURATION` schedule.
const MinEvery = time.Second

// cronParser reads the standard 5-field form, the 6-field form whose first field is
// the second, and the descriptors (@yearly, @monthly, @weekly, @daily, @midnight,
// @hourly, @every DURATION).
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom |
	cron.Month | cron.Dow | cron.Descriptor)

// CronSchedule is a parsed cron expression in its time zone: Next gives the first due
// time after a moment.
type CronSchedule struct {
	sched cron.Schedule
	loc   *time.Location
}

// Next is the first due time strictly after t (the zero time when there is none, as
// for a date that never comes, such as 30 February).
func (c *CronSchedule) Next(t time.Time) time.Time { return c.sched.Next(t.In(c.loc)) }

// Location is the schedule's time zone.
func (c *CronSchedule) Location() *time.Location { return c.loc }

// LoadZone loads an IANA time zone name ("" is UTC). "Local" is refused: the nodes of
// one database may run in different zones, and a schedule must fall due at the same
// moment on every one of them.
func LoadZone(name string) (*time.Location, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return time.UTC, nil
	}
	if strings.EqualFold(name, "local") {
		return nil, Errorf(EInvalid, "unknown time zone %s: name an IANA zone such as Europe/Paris (Local differs between nodes)", clip.Quote(name))
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, Errorf(EInvalid, "unknown time zone %s: name an IANA zone such as Europe/Paris or UTC", clip.Quote(name))
	}
	return loc, nil
}

// ParseCron parses a schedule's cron expression for the zone loc: 5 fields (minute
// hour day-of-month month day-of-week), 6 fields (a second first), a descriptor such
// as @hourly, or `@every DURATION` of at least MinEvery. The zone comes from the
// schedule's timezone field, so a TZ= or CRON_TZ= prefix is refused.
func ParseCron(expr string, loc *time.Location) (*CronSchedule, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, Errorf(EInvalid, "empty cron expression")
	}
	if up := strings.ToUpper(expr); strings.HasPrefix(up, "TZ=") || strings.HasPrefix(up, "CRON_TZ=") {
		return nil, Errorf(EInvalid, "invalid cron expression %s: set the zone in the timezone field, not in the expression", clip.Quote(expr))
	}
	if rest, ok := strings.CutPrefix(expr, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return nil, Errorf(EInvalid, "invalid cron expression %s: @every needs a duration such as 90s, 15m or 2h", clip.Quote(expr))
		}
		if d < MinEvery {
			return nil, Errorf(EInvalid, "invalid cron expression %s: @every needs at least %s", clip.Quote(expr), MinEvery)
		}
	}
	s, err := cronParser.Parse(expr)
	if err != nil {
		// The parser's message may repeat the input: bounded like it.
		return nil, Errorf(EInvalid, "invalid cron expression %s: %s", clip.Quote(expr), clip.Text(err.Error()))
	}
	if spec, ok := s.(*cron.SpecSchedule); ok {
		spec.Location = loc
	}
	c := &CronSchedule{sched: s, loc: loc}
	if c.Next(time.Now()).IsZero() {
		// Such as 31 February, or a field whose list is empty: it would never run.
		return nil, Errorf(EInvalid, "invalid cron expression %s: it never falls due", clip.Quote(expr))
	}
	return c, nil
}

// CheckMissed reports (nil) whether v is a missed-run policy ("" is the default,
// run_once).
func CheckMissed(v string) error {
	switch v {
	case "", MissedRunOnce, MissedSkip:
		return nil
	}
	return Errorf(EInvalid, "invalid missed-run policy %s: run_once or skip", clip.Quote(v))
}

// NextTimes lists the n first due times of c after t.
func (c *CronSchedule) NextTimes(t time.Time, n int) []time.Time {
	out := make([]time.Time, 0, n)
	for range n {
		t = c.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}
