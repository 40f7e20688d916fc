package rules

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"dataservice/internal/clip"
)

// dateUnit is a unit of a field_datetime offset.
type dateUnit uint8

const (
	unitYear dateUnit = iota
	unitMonth
	unitWeek
	unitDay
	unitHour
	unitMinute
	unitSecond
)

// dateUnits maps unit names, singular and plural, to units.
var dateUnits = map[string]dateUnit{
	"year": unitYear, "years": unitYear,
	"month": unitMonth, "months": unitMonth,
	"week": unitWeek, "weeks": unitWeek,
	"day": unitDay, "days": unitDay,
	"hour": unitHour, "hours": unitHour,
	"minute": unitMinute, "minutes": unitMinute,
	"second": unitSecond, "seconds": unitSecond,
}

// maxOffset bounds each offset of a field_datetime expression so that the
// arithmetic cannot overflow.
const maxOffset = 1_000_000

// dateOffset is one signed offset such as "-3month".
type dateOffset struct {
	unit dateUnit
	n    int
}

// parseDateExpr parses `now()` followed by offsets like `-3month +2day`
// (units and now() are case-insensitive; spaces between and inside offsets
// are optional).
func parseDateExpr(s string) ([]dateOffset, error) {
	rest := strings.TrimSpace(s)
	const head = "now()"
	if len(rest) < len(head) || !strings.EqualFold(rest[:len(head)], head) {
		return nil, errors.New(`it must start with "now()"`)
	}
	rest = rest[len(head):]
	var offs []dateOffset
	for {
		rest = strings.TrimLeft(rest, " \t")
		if rest == "" {
			return offs, nil
		}
		sign := 1
		switch rest[0] {
		case '+':
		case '-':
			sign = -1
		default:
			return nil, fmt.Errorf("expected + or - at %s", clip.Quote(rest))
		}
		rest = strings.TrimLeft(rest[1:], " \t")
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 {
			return nil, fmt.Errorf("expected a number at %s", clip.Quote(rest))
		}
		n, err := strconv.Atoi(rest[:i])
		if err != nil || n > maxOffset {
			return nil, fmt.Errorf("offset %s is too large (at most %d)", clip.Text(rest[:i]), maxOffset)
		}
		rest = strings.TrimLeft(rest[i:], " \t")
		j := 0
		for j < len(rest) && (rest[j] >= 'a' && rest[j] <= 'z' || rest[j] >= 'A' && rest[j] <= 'Z') {
			j++
		}
		if j == 0 {
			return nil, fmt.Errorf("expected a unit after %d", n)
		}
		u, ok := dateUnits[strings.ToLower(rest[:j])]
		if !ok {
			return nil, fmt.Errorf("unknown unit %s (want year, month, week, day, hour, minute or second)", clip.Quote(rest[:j]))
		}
		offs = append(offs, dateOffset{unit: u, n: sign * n})
		rest = rest[j:]
	}
}

// evalDateExpr applies offs, in order, to now in UTC. Adding months or years
// keeps the day of the month, clamped to the length of the target month
// (March 31 -1month is February 28 or 29).
func evalDateExpr(now time.Time, offs []dateOffset) time.Time {
	t := now.UTC()
	for _, o := range offs {
		switch o.unit {
		case unitYear:
			t = addMonths(t, 12*o.n)
		case unitMonth:
			t = addMonths(t, o.n)
		case unitWeek:
			t = t.AddDate(0, 0, 7*o.n)
		case unitDay:
			t = t.AddDate(0, 0, o.n)
		case unitHour:
			t = t.Add(time.Duration(o.n) * time.Hour)
		case unitMinute:
			t = t.Add(time.Duration(o.n) * time.Minute)
		case unitSecond:
			t = t.Add(time.Duration(o.n) * time.Second)
		}
	}
	return t
}

// addMonths adds n months to t, clamping the day to the target month.
func addMonths(t time.Time, n int) time.Time {
	y, m, d := t.Date()
	first := time.Date(y, m+time.Month(n), 1, 0, 0, 0, 0, time.UTC)
	if last := first.AddDate(0, 1, -1).Day(); d > last {
		d = last
	}
	return time.Date(first.Year(), first.Month(), d, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}
