// Package humandur parses and prints durations as people write them on a
// command line: Go's units (90s, 1h30m) plus days (d, 24 hours) and weeks
// (w, 7 days), so "30d", "2w" and "1d12h" all work, and 192 hours prints
// as "8d", not "192h0m0s".
package humandur

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// ErrSyntax is returned for a string that is not a duration.
var ErrSyntax = errors.New("want a duration such as 90s, 10m, 1h30m, 30d or 2w")

const (
	day  = 24 * time.Hour
	week = 7 * day
)

// Parse parses a duration: a sequence of numbers each with a unit, the
// units of time.ParseDuration plus d (24 hours) and w (7 days), such as
// "30d", "2w", "1d12h" or "1h30m". A negative duration keeps its sign.
func Parse(s string) (time.Duration, error) {
	rest := strings.TrimSpace(s)
	neg := false
	if strings.HasPrefix(rest, "-") {
		neg, rest = true, rest[1:]
	}
	if rest == "" {
		return 0, ErrSyntax
	}
	if rest == "0" {
		return 0, nil
	}
	var total time.Duration
	for rest != "" {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 || i == len(rest) {
			return 0, ErrSyntax
		}
		if rest[i] != 'd' && rest[i] != 'w' {
			// Go's own units for the rest ("12h30m"), which must not hold d or w.
			if strings.ContainsAny(rest, "dw") {
				return 0, ErrSyntax
			}
			d, err := time.ParseDuration(rest)
			if err != nil || d < 0 {
				return 0, ErrSyntax
			}
			if total > (1<<63-1)-d {
				return 0, errors.New("duration too long")
			}
			total += d
			break
		}
		n, err := strconv.ParseInt(rest[:i], 10, 64)
		unit := day
		if rest[i] == 'w' {
			unit = week
		}
		if err != nil || n > int64((1<<63-1)/unit) || total > (1<<63-1)-time.Duration(n)*unit {
			return 0, errors.New("duration too long")
		}
		total += time.Duration(n) * unit
		rest = rest[i+1:]
	}
	if neg {
		total = -total
	}
	return total, nil
}

// Format prints d as a person writes it: whole weeks are not used (a
// retention of 14d reads better than 2w), whole days are "8d", and the
// rest as Go does without its zero units ("1d12h", "1h30m", "90ms").
func Format(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	if d < 0 {
		return "-" + Format(-d)
	}
	var b strings.Builder
	if days := d / day; days > 0 {
		b.WriteString(strconv.FormatInt(int64(days), 10) + "d")
		d -= days * day
	}
	if d == 0 {
		return b.String()
	}
	if d < time.Second {
		return b.String() + d.String()
	}
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}} {
		if n := d / u.unit; n > 0 {
			b.WriteString(strconv.FormatInt(int64(n), 10) + u.name)
			d -= n * u.unit
		}
	}
	if d > 0 {
		b.WriteString(d.String()) // under a minute: "5s", "1.5s", "500ms"
	}
	return b.String()
}
