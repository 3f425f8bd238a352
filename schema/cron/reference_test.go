package cron_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/celos-go/celos/schema/cron"
)

// This file checks Between against a brute-force reference written
// independently of the evaluator: random expressions are generated together
// with the sets they stand for, and the reference tests every second (or
// every day) of a window with the time package.

// genField is one generated field: its text and the values it matches.
type genField struct {
	text string
	in   func(v int) bool
}

// item is a-b/n over a field of span values; b < a wraps around (Quartz).
func itemIn(a, b, n, lo, span int) func(int) bool {
	return func(v int) bool {
		d := ((v-a)%span + span) % span
		length := ((b-a)%span + span) % span
		return v >= lo && v < lo+span && d <= length && d%n == 0
	}
}

func valueText(t *rapid.T, v, lo int, names []string) string {
	if names != nil && rapid.Bool().Draw(t, "name") {
		s := names[v-lo]
		if rapid.Bool().Draw(t, "lower") {
			s = strings.ToLower(s)
		}
		return s
	}
	return fmt.Sprint(v)
}

// drawItem draws one list item of a plain field.
// Values are drawn in [vlo, vhi] within the field's [lo, hi].
func drawItem(t *rapid.T, lo, hi, vlo, vhi int, names []string, wrap bool, label string) genField {
	span := hi - lo + 1
	val := func(l string) int { return rapid.IntRange(vlo, vhi).Draw(t, label+l) }
	switch rapid.IntRange(0, 5).Draw(t, label+"kind") {
	case 0:
		return genField{"*", func(v int) bool { return v >= lo && v <= hi }}
	case 1:
		a := val("v")
		return genField{valueText(t, a, lo, names), itemIn(a, a, 1, lo, span)}
	case 2:
		a, b := val("a"), val("b")
		if !wrap && b < a {
			a, b = b, a
		}
		return genField{valueText(t, a, lo, names) + "-" + valueText(t, b, lo, names), itemIn(a, b, 1, lo, span)}
	case 3:
		a, n := val("a"), rapid.IntRange(1, span).Draw(t, label+"n")
		return genField{fmt.Sprintf("%s/%d", valueText(t, a, lo, names), n), itemIn(a, hi, n, lo, span)}
	case 4:
		n := rapid.IntRange(1, span).Draw(t, label+"n")
		return genField{fmt.Sprintf("*/%d", n), itemIn(lo, hi, n, lo, span)}
	default:
		a, b, n := val("a"), val("b"), rapid.IntRange(1, span).Draw(t, label+"n")
		if !wrap && b < a {
			a, b = b, a
		}
		return genField{fmt.Sprintf("%s-%s/%d", valueText(t, a, lo, names), valueText(t, b, lo, names), n), itemIn(a, b, n, lo, span)}
	}
}

// drawPlain draws a plain field: one item or a list of them.
func drawPlain(t *rapid.T, lo, hi int, names []string, wrap bool, label string) genField {
	return drawPlainIn(t, lo, hi, lo, hi, names, wrap, label)
}

func drawPlainIn(t *rapid.T, lo, hi, vlo, vhi int, names []string, wrap bool, label string) genField {
	k := rapid.IntRange(1, 3).Draw(t, label+"items")
	var texts []string
	var ins []func(int) bool
	for i := range k {
		g := drawItem(t, lo, hi, vlo, vhi, names, wrap, fmt.Sprintf("%s%d", label, i))
		texts, ins = append(texts, g.text), append(ins, g.in)
	}
	return genField{strings.Join(texts, ","), func(v int) bool {
		for _, in := range ins {
			if in(v) {
				return true
			}
		}
		return false
	}}
}

var (
	refMonths = []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}
	refDays   = []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}
)

func monthDays(y int, m time.Month) int { return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day() }

func weekday(y int, m time.Month, d int) time.Weekday {
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Weekday()
}

func isWorkday(y int, m time.Month, d int) bool {
	wd := weekday(y, m, d)
	return wd != time.Saturday && wd != time.Sunday
}

// dayField is the generated day-of-month and day-of-week pair.
type dayField struct {
	dom, dow string
	in       func(y int, m time.Month, d int) bool
}

func drawDays(t *rapid.T) dayField {
	if rapid.Bool().Draw(t, "domMode") {
		switch rapid.IntRange(0, 4).Draw(t, "domKind") {
		case 0:
			g := drawPlain(t, 1, 31, nil, true, "dom")
			return dayField{g.text, "?", func(y int, m time.Month, d int) bool { return g.in(d) }}
		case 1:
			n := rapid.IntRange(0, 30).Draw(t, "Ln")
			text := "L"
			if n > 0 || rapid.Bool().Draw(t, "L-0") {
				text = fmt.Sprintf("L-%d", n)
			}
			return dayField{text, "?", func(y int, m time.Month, d int) bool { return d == monthDays(y, m)-n }}
		case 2:
			return dayField{"LW", "?", func(y int, m time.Month, d int) bool {
				last := monthDays(y, m)
				for !isWorkday(y, m, last) {
					last--
				}
				return d == last
			}}
		default:
			target := rapid.IntRange(1, 31).Draw(t, "W")
			return dayField{fmt.Sprintf("%dW", target), "?", func(y int, m time.Month, d int) bool {
				n := monthDays(y, m)
				if target > n {
					return false
				}
				// The workday of the month nearest the target.
				best, bestDist := 0, 99
				for c := 1; c <= n; c++ {
					dist := max(c-target, target-c)
					if isWorkday(y, m, c) && dist < bestDist {
						best, bestDist = c, dist
					}
				}
				return d == best
			}}
		}
	}
	switch rapid.IntRange(0, 3).Draw(t, "dowKind") {
	case 0:
		return dayField{"?", "L", func(y int, m time.Month, d int) bool { return weekday(y, m, d) == time.Saturday }}
	case 1:
		wd := rapid.IntRange(1, 7).Draw(t, "nL")
		return dayField{"?", valueText(t, wd, 1, refDays) + "L", func(y int, m time.Month, d int) bool {
			return int(weekday(y, m, d))+1 == wd && d+7 > monthDays(y, m)
		}}
	case 2:
		wd, k := rapid.IntRange(1, 7).Draw(t, "nth"), rapid.IntRange(1, 5).Draw(t, "k")
		return dayField{"?", fmt.Sprintf("%s#%d", valueText(t, wd, 1, refDays), k), func(y int, m time.Month, d int) bool {
			return int(weekday(y, m, d))+1 == wd && (d-1)/7+1 == k
		}}
	default:
		g := drawPlain(t, 1, 7, refDays, true, "dow")
		return dayField{"?", g.text, func(y int, m time.Month, d int) bool { return g.in(int(weekday(y, m, d)) + 1) }}
	}
}

// TestDaysAgainstReference compares the days matched by random day-of-month,
// month, day-of-week and year fields over 2020-2031 with the reference.
func TestDaysAgainstReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		days := drawDays(t)
		months := drawPlain(t, 1, 12, refMonths, true, "month")
		yearText, yearIn := "", func(int) bool { return true }
		if rapid.Bool().Draw(t, "hasYear") {
			g := drawPlainIn(t, 1970, 2199, 2015, 2035, nil, false, "year")
			yearText, yearIn = " "+g.text, g.in
		}
		expr := fmt.Sprintf("0 0 0 %s %s %s%s", days.dom, months.text, days.dow, yearText)
		e, err := cron.Parse(expr, time.UTC)
		if err != nil {
			t.Fatalf("Parse(%q): %v", expr, err)
		}
		from, to := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2032, 1, 1, 0, 0, 0, 0, time.UTC)
		var want []time.Time
		for d := from; d.Before(to); d = d.AddDate(0, 0, 1) {
			if yearIn(d.Year()) && months.in(int(d.Month())) && days.in(d.Year(), d.Month(), d.Day()) {
				want = append(want, d)
			}
		}
		if got := e.Between(from, to); format(got) != format(want) {
			t.Fatalf("%q:\n got %s\nwant %s", expr, format(got), format(want))
		}
	})
}

// wall is a broken-down wall-clock time.
type wall struct{ y, mo, d, h, mi, s int }

func wallOf(u int64, loc *time.Location) wall {
	lt := time.Unix(u, 0).In(loc)
	y, mo, d := lt.Date()
	h, mi, s := lt.Clock()
	return wall{y, int(mo), d, h, mi, s}
}

func (w wall) naive() int64 {
	return time.Date(w.y, time.Month(w.mo), w.d, w.h, w.mi, w.s, 0, time.UTC).Unix()
}

func offsetOf(u int64, loc *time.Location) int64 {
	_, o := time.Unix(u, 0).In(loc).Zone()
	return int64(o)
}

var refZones = []string{"America/New_York", "Europe/London", "Australia/Lord_Howe", "Australia/Sydney", "America/Santiago", "UTC"}

// TestZonesAgainstReference compares Between with a per-second reference of
// the documented rules, over windows of up to 4 hours, most of them around
// a change of offset.
func TestZonesAgainstReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		secs := drawPlain(t, 0, 59, nil, true, "sec")
		if rapid.IntRange(0, 3).Draw(t, "secZero") > 0 {
			secs = genField{"0", func(v int) bool { return v == 0 }}
		}
		mins := drawPlain(t, 0, 59, nil, true, "min")
		hours := drawPlain(t, 0, 23, nil, true, "hour")
		if rapid.Bool().Draw(t, "allHours") {
			hours = genField{"*", func(int) bool { return true }}
		}
		days := dayField{"*", "?", func(int, time.Month, int) bool { return true }}
		if rapid.IntRange(0, 3).Draw(t, "days") == 0 {
			days = drawDays(t)
		}
		expr := fmt.Sprintf("%s %s %s %s * %s", secs.text, mins.text, hours.text, days.dom, days.dow)
		zone := rapid.SampledFrom(refZones).Draw(t, "zone")
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatalf("load zone %s: %v", zone, err)
		}
		e, err := cron.Parse(expr, loc)
		if err != nil {
			t.Fatalf("Parse(%q): %v", expr, err)
		}
		allHours := true
		for h := range 24 {
			allHours = allHours && hours.in(h)
		}
		match := func(w wall) bool {
			return secs.in(w.s) && mins.in(w.mi) && hours.in(w.h) && days.in(w.y, time.Month(w.mo), w.d)
		}

		base := time.Date(rapid.IntRange(2000, 2045).Draw(t, "year"), 1, 1, 0, 0, 0, 0, time.UTC).Unix() +
			rapid.Int64Range(0, 365*86400).Draw(t, "at")
		if rapid.IntRange(0, 3).Draw(t, "nearChange") > 0 {
			if _, end := time.Unix(base, 0).In(loc).ZoneBounds(); !end.IsZero() {
				base = end.Unix()
			}
			base -= rapid.Int64Range(0, 3*3600).Draw(t, "before")
		}
		from, to := base, base+rapid.Int64Range(0, 4*3600).Draw(t, "len")

		offsets := func(u int64) []int64 {
			return []int64{offsetOf(u, loc), offsetOf(u-2*86400, loc), offsetOf(u+2*86400, loc)}
		}
		exists := func(w wall, u int64) bool {
			for _, o := range offsets(u) {
				if wallOf(w.naive()-o, loc) == w {
					return true
				}
			}
			return false
		}
		var want []time.Time
		for u := from; u < to; u++ {
			w := wallOf(u, loc)
			if !secs.in(w.s) {
				continue
			}
			fires := false
			if match(w) {
				repeat := false
				for _, k := range []int64{1800, 3600, 7200} {
					repeat = repeat || wallOf(u-k, loc) == w
				}
				fires = !repeat || allHours
			}
			// A skipped wall time v fires at v - (offset before the jump),
			// the earliest instant whose wall time is later than v.
			for _, k := range []int64{1800, 3600, 7200} {
				if fires {
					break
				}
				vt := time.Unix(w.naive()-k, 0).UTC()
				v := wall{vt.Year(), int(vt.Month()), vt.Day(), vt.Hour(), vt.Minute(), vt.Second()}
				if !match(v) || exists(v, u) {
					continue
				}
				shifted := int64(-1)
				for _, o := range offsets(u) {
					c := v.naive() - offsetOf(v.naive()-o, loc)
					if wallOf(c, loc).naive() > v.naive() && (shifted < 0 || c < shifted) {
						shifted = c
					}
				}
				fires = shifted == u
			}
			if fires {
				want = append(want, time.Unix(u, 0).UTC())
			}
		}
		got := e.Between(time.Unix(from, 0), time.Unix(to, 0))
		if format(got) != format(want) {
			t.Fatalf("%q in %s over [%s, %s):\n got %s\nwant %s", expr, loc, time.Unix(from, 0).UTC().Format(time.RFC3339),
				time.Unix(to, 0).UTC().Format(time.RFC3339), format(got), format(want))
		}
		// Between is repeated Next.
		var viaNext []time.Time
		for n := e.Next(time.Unix(from, 0).Add(-time.Nanosecond)); !n.IsZero() && n.Unix() < to; n = e.Next(n) {
			viaNext = append(viaNext, n)
		}
		if format(viaNext) != format(got) {
			t.Fatalf("%q in %s: repeated Next\n got %s\nBetween %s", expr, loc, format(viaNext), format(got))
		}
	})
}
