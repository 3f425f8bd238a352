// Package cron parses Quartz cron expressions and enumerates their fire
// times; `celos cron`, `celos vet` and the scheduler all use it, so a slot
// time shown by one is a slot time of the others.
//
// The evaluator is field by field on bit masks: finding the next fire time
// costs a few bit operations, whatever the expression, and enumerating a
// window allocates nothing but the result. Fire times are whole seconds.
//
// # Time zones
//
// An expression matches wall-clock times in its location. Where the clock
// jumps:
//   - A wall time that does not exist (spring forward) fires once, shifted
//     forward by the gap: 02:30 on a day New York skips 02:00-03:00 fires at
//     03:30 EDT. A shifted time that equals another fire time fires once.
//   - A wall time that occurs twice (fall back) fires once, at its first
//     occurrence, unless the expression matches every hour of the day
//     (hourly, minutely and finer schedules): those fire at every real
//     instant whose wall time matches, so an hourly schedule fires in every
//     real hour of the day, the repeated one included, and never twice in
//     one real hour.
//
// # Bounds
//
// Without a year field the search for the next fire time looks 401 years
// ahead, beyond which the Gregorian calendar repeats itself (400 years are
// exactly 20,871 weeks): an expression that matches no date, such as
// `0 0 0 31 2 ?`, is known to match nothing ever and Next returns the zero
// Time at once. Times before year 1 and from year 10000 on are never
// returned.
package cron

import (
	"math/bits"
	"slices"
	"time"
)

// Expr is a parsed cron expression with its location. It is immutable and
// safe for concurrent use.
type Expr struct {
	src string
	loc *time.Location

	seconds, minutes uint64 // bit v: value v
	hours            uint32
	months           uint16
	anyYear          bool
	years            [4]uint64 // bit y-1970
	allHours         bool

	domSpec, dowSpec bool // which of the two is not '?'
	// day-of-month
	dom            uint32 // plain days, bit d
	domLast        bool   // L or L-n
	domLastOffset  int    // n of L-n
	domLastWeekday bool   // LW
	domNearest     int    // n of nW
	// day-of-week
	dowMasks        [7]uint32 // plain days: days of a month whose 1st is weekday i (0 = Sunday)
	dowLast         int       // n of nL (1 = Sunday)
	dowNth, dowNthK int       // n#k
}

// String returns the expression as parsed (fields separated by one space).
func (e *Expr) String() string { return e.src }

// Location returns the location whose wall clock the expression reads.
func (e *Expr) Location() *time.Location { return e.loc }

// Unix seconds of 0001-01-01T00:00:00Z and 10000-01-01T00:00:00Z: fire
// times are searched in between.
const (
	minSec int64 = -62135596800
	maxSec int64 = 253402300800
)

// horizonSec is how far Next looks ahead when there is no year field: 401
// years of at most 366 days.
const horizonSec = 401 * 366 * 86400

// Next returns the first fire time strictly after t, in UTC, or the zero
// Time if there is none.
func (e *Expr) Next(t time.Time) time.Time {
	if t.Unix() >= maxSec {
		return time.Time{}
	}
	from := max(floorSec(t)+1, minSec)
	var to int64
	if e.anyYear {
		// Look for a matching wall time first, ignoring the zone: when
		// there is none in 401 years there is none ever.
		c := cursorAt(from - 2*86400)
		if !e.next(&c, c.y+402) {
			return time.Time{}
		}
		to = satAdd(from, horizonSec)
	} else {
		to = daysFromCivil(e.lastYear()+1, 1, 1)*86400 + 2*86400
	}
	var buf [1]time.Time
	r := e.scan(buf[:0], from, to, 1)
	if len(r) == 0 {
		return time.Time{}
	}
	return r[0]
}

// Between returns the fire times in [from, to), in UTC, in order. A from
// with a sub-second part is rounded up to the next whole second.
func (e *Expr) Between(from, to time.Time) []time.Time {
	return e.AppendBetween(nil, from, to)
}

// AppendBetween appends the fire times in [from, to) to dst, as Between,
// and returns the extended slice.
func (e *Expr) AppendBetween(dst []time.Time, from, to time.Time) []time.Time {
	return e.scan(dst, ceilSec(from), ceilSec(to), -1)
}

// AppendBetweenLimit is AppendBetween that appends at most limit fire times
// (the first ones); a negative limit means no limit.
func (e *Expr) AppendBetweenLimit(dst []time.Time, from, to time.Time, limit int) []time.Time {
	return e.scan(dst, ceilSec(from), ceilSec(to), limit)
}

// floorSec and ceilSec return t's Unix seconds rounded down and up.
func floorSec(t time.Time) int64 { return t.Unix() } // Unix floors: Nanosecond() is never negative

func ceilSec(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() != 0 && s < maxSec {
		s++
	}
	return s
}

func satAdd(a, b int64) int64 {
	if a > maxSec-b {
		return maxSec
	}
	return a + b
}

// scan appends to dst the fire instants in [from, to) (Unix seconds), at
// most limit of them when limit >= 0. It walks the zone's periods of
// constant offset; in each, instant = wall - offset.
func (e *Expr) scan(dst []time.Time, from, to int64, limit int) []time.Time {
	from = max(from, minSec)
	to = min(to, maxSec)
	t := from
	for t < to && limit != 0 {
		off, segStart, segEnd := period(e.loc, t)
		segLimit := min(segEnd, to)
		if segStart > minSec {
			prevOff := offsetAt(e.loc, segStart-1)
			switch {
			case prevOff < off: // spring forward: wall times [segStart+prevOff, segStart+off) do not exist
				gapEnd := segStart + off - prevOff
				if t < gapEnd {
					hi := min(gapEnd, segLimit)
					n := len(dst)
					// The skipped wall times, shifted forward by the gap, and
					// the real ones of the first gap-long stretch after the
					// jump, merged.
					dst = e.appendRange(dst, t+prevOff, hi+prevOff, prevOff, -1)
					dst = e.appendRange(dst, t+off, hi+off, off, -1)
					tail := dst[n:]
					slices.SortFunc(tail, func(a, b time.Time) int { return a.Compare(b) })
					tail = slices.CompactFunc(tail, func(a, b time.Time) bool { return a.Equal(b) })
					if limit >= 0 && len(tail) > limit {
						tail = tail[:limit]
					}
					dst = dst[:n+len(tail)]
					if limit >= 0 {
						limit -= len(tail)
					}
					t = hi
				}
			case prevOff > off && !e.allHours: // fall back: skip the repeated wall times
				t = max(t, segStart+prevOff-off)
			}
		}
		if t < segLimit && limit != 0 {
			n := len(dst)
			dst = e.appendRange(dst, t+off, segLimit+off, off, limit)
			if limit >= 0 {
				limit -= len(dst) - n
			}
		}
		t = segEnd
	}
	return dst
}

// offsetAt returns loc's offset from UTC at Unix second t.
func offsetAt(loc *time.Location, t int64) int64 {
	_, o := time.Unix(t, 0).In(loc).Zone()
	return int64(o)
}

// period returns loc's offset at Unix second t and the period around t in
// which it holds, [start, end): start is a change of offset or of zone
// name (or minSec), end the next one (or maxSec).
func period(loc *time.Location, t int64) (off, start, end int64) {
	lt := time.Unix(t, 0).In(loc)
	_, o := lt.Zone()
	off = int64(o)
	s, e := lt.ZoneBounds()
	start, end = minSec, maxSec
	if !s.IsZero() {
		start = min(s.Unix(), t)
	}
	if !e.IsZero() {
		end = min(e.Unix(), maxSec)
	}
	if end <= t {
		// Go's ZoneBounds can return an end at or before t on the last
		// day of a leap year once the zone's rule extends its table
		// (Europe/London, 2040-12-31). Take the next day, or the
		// change of offset within it.
		end = min(t+86400, maxSec)
		if offsetAt(loc, end-1) != off {
			lo, hi := t, end-1 // offset at lo is off, at hi it is not
			for hi-lo > 1 {
				mid := lo + (hi-lo)/2
				if offsetAt(loc, mid) == off {
					lo = mid
				} else {
					hi = mid
				}
			}
			end = hi
		}
	}
	return off, start, end
}

// appendRange appends the instants wall-off for the matching wall times in
// [w, wEnd), at most limit of them when limit >= 0.
func (e *Expr) appendRange(dst []time.Time, w, wEnd, off int64, limit int) []time.Time {
	if w >= wEnd {
		return dst
	}
	c := cursorAt(w)
	endYear, _, _ := civilFromDays(floorDiv(wEnd-1, 86400))
	for limit != 0 && e.next(&c, endYear) {
		wc := c.wall()
		if wc >= wEnd {
			break
		}
		dst = append(dst, time.Unix(wc-off, 0).UTC())
		limit--
		c.s++
	}
	return dst
}

// cursor is a wall-clock time broken down, with caches of the current
// month's matching days and of the current day's number.
type cursor struct {
	y, mo, d, h, mi, s int

	maskY, maskMo int
	mask          uint32

	dayY, dayMo, dayD int
	days              int64
}

func cursorAt(w int64) cursor {
	days := floorDiv(w, 86400)
	sod := int(w - days*86400)
	y, mo, d := civilFromDays(days)
	return cursor{y: y, mo: mo, d: d, h: sod / 3600, mi: sod / 60 % 60, s: sod % 60,
		dayY: y, dayMo: mo, dayD: d, days: days}
}

// wall returns the cursor's wall time as seconds since 1970-01-01 00:00.
func (c *cursor) wall() int64 {
	if c.d != c.dayD || c.mo != c.dayMo || c.y != c.dayY {
		c.dayY, c.dayMo, c.dayD = c.y, c.mo, c.d
		c.days = daysFromCivil(c.y, c.mo, c.d)
	}
	return c.days*86400 + int64(c.h*3600+c.mi*60+c.s)
}

// next moves c to the first matching wall time at or after it and reports
// whether there is one in a year up to endYear.
func (e *Expr) next(c *cursor, endYear int) bool {
	for {
		if c.s > 59 {
			c.s = 0
			c.mi++
		}
		if c.mi > 59 {
			c.mi = 0
			c.h++
		}
		if c.h > 23 {
			c.h = 0
			c.d++
		}
		if c.d > 31 {
			c.d = 1
			c.mo++
		}
		if c.mo > 12 {
			c.mo = 1
			c.y++
		}
		if c.y > endYear {
			return false
		}
		if !e.anyYear {
			y := e.nextYear(c.y)
			if y < 0 || y > endYear {
				return false
			}
			if y != c.y {
				c.y, c.mo, c.d, c.h, c.mi, c.s = y, 1, 1, 0, 0, 0
			}
		}
		mo := nextBit(uint64(e.months), c.mo)
		if mo < 0 {
			c.y++
			c.mo, c.d, c.h, c.mi, c.s = 1, 1, 0, 0, 0
			continue
		}
		if mo != c.mo {
			c.mo, c.d, c.h, c.mi, c.s = mo, 1, 0, 0, 0
		}
		if c.maskMo != c.mo || c.maskY != c.y {
			c.maskY, c.maskMo = c.y, c.mo
			c.mask = e.dayMask(c.y, c.mo)
		}
		d := nextBit(uint64(c.mask), c.d)
		if d < 0 {
			c.mo++
			c.d, c.h, c.mi, c.s = 1, 0, 0, 0
			continue
		}
		if d != c.d {
			c.d, c.h, c.mi, c.s = d, 0, 0, 0
		}
		h := nextBit(uint64(e.hours), c.h)
		if h < 0 {
			c.d++
			c.h, c.mi, c.s = 0, 0, 0
			continue
		}
		if h != c.h {
			c.h, c.mi, c.s = h, 0, 0
		}
		mi := nextBit(e.minutes, c.mi)
		if mi < 0 {
			c.h++
			c.mi, c.s = 0, 0
			continue
		}
		if mi != c.mi {
			c.mi, c.s = mi, 0
		}
		s := nextBit(e.seconds, c.s)
		if s < 0 {
			c.mi++
			c.s = 0
			continue
		}
		c.s = s
		return true
	}
}

// nextBit returns the lowest set bit of mask at or above i, or -1.
func nextBit(mask uint64, i int) int {
	if i >= 64 {
		return -1
	}
	m := mask >> uint(i)
	if m == 0 {
		return -1
	}
	return i + bits.TrailingZeros64(m)
}

// nextYear returns the first year of the year field at or after y, or -1.
func (e *Expr) nextYear(y int) int {
	i := max(y-minYearField, 0)
	for ; i <= maxYearField-minYearField; i++ {
		w := e.years[i/64] >> (i % 64)
		if w == 0 {
			i = (i/64+1)*64 - 1
			continue
		}
		return minYearField + i + bits.TrailingZeros64(w)
	}
	return -1
}

// lastYear returns the last year of the year field.
func (e *Expr) lastYear() int {
	for k := len(e.years) - 1; k >= 0; k-- {
		if e.years[k] != 0 {
			return minYearField + k*64 + 63 - bits.LeadingZeros64(e.years[k])
		}
	}
	return minYearField
}

// dayMask returns the days of month mo of year y that match the
// day-of-month or day-of-week field, as bits 1-31.
func (e *Expr) dayMask(y, mo int) uint32 {
	n := monthLen(y, mo)
	first := daysFromCivil(y, mo, 1)
	wd1 := int(floorMod(first+4, 7)) // weekday of the 1st, 0 = Sunday (1970-01-01 was a Thursday)
	weekday := func(d int) int { return (wd1 + d - 1) % 7 }
	one := func(d int) uint32 {
		if d < 1 || d > n {
			return 0
		}
		return 1 << d
	}
	if e.domSpec {
		switch {
		case e.domLast:
			return one(n - e.domLastOffset)
		case e.domLastWeekday:
			switch weekday(n) {
			case 6:
				return one(n - 1)
			case 0:
				return one(n - 2)
			}
			return one(n)
		case e.domNearest > 0:
			d := e.domNearest
			if d > n {
				return 0 // the month has no such day
			}
			switch weekday(d) {
			case 6: // Saturday: the Friday before, or Monday the 3rd
				if d == 1 {
					return one(3)
				}
				return one(d - 1)
			case 0: // Sunday: the Monday after, or the Friday before the last
				if d == n {
					return one(d - 2)
				}
				return one(d + 1)
			}
			return one(d)
		}
		return e.dom & (1<<(n+1) - 2)
	}
	switch {
	case e.dowLast > 0:
		return one(n - (weekday(n)-(e.dowLast-1)+7)%7)
	case e.dowNth > 0:
		return one(1 + (e.dowNth-1-wd1+7)%7 + 7*(e.dowNthK-1))
	}
	return e.dowMasks[wd1] & (1<<(n+1) - 2)
}

func monthLen(y, mo int) int {
	switch mo {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

// daysFromCivil returns the number of days from 1970-01-01 to y-mo-d in the
// proleptic Gregorian calendar (H. Hinnant's algorithm).
func daysFromCivil(y, mo, d int) int64 {
	yy := int64(y)
	if mo <= 2 {
		yy--
	}
	era := floorDiv(yy, 400)
	yoe := yy - era*400
	mp := int64((mo + 9) % 12)
	doy := (153*mp+2)/5 + int64(d) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// civilFromDays is the inverse of daysFromCivil.
func civilFromDays(z int64) (y, mo, d int) {
	z += 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		mo = int(mp + 3)
	} else {
		mo = int(mp - 9)
	}
	y = int(yoe + era*400)
	if mo <= 2 {
		y++
	}
	return y, mo, d
}
