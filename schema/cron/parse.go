package cron

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrInvalid is wrapped by every error Parse returns: errors.Is(err,
// cron.ErrInvalid) tells a bad expression from other failures.
var ErrInvalid = errors.New("invalid cron expression")

// ParseError says which field of an expression is wrong and why. Its
// message is "<field>: <reason>", e.g. "day-of-month: value 32 out of range
// 1-31"; callers add the expression itself when they report it.
type ParseError struct {
	Field  string // "seconds", "minutes", …, "year"; "expression" for the whole
	Reason string
}

func (e *ParseError) Error() string { return e.Field + ": " + e.Reason }

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *ParseError) Unwrap() error { return ErrInvalid }

// The fields of an expression, in order.
const (
	fSecond = iota
	fMinute
	fHour
	fDOM
	fMonth
	fDOW
	fYear
)

// The year field's range, as Quartz documents it.
const (
	minYearField = 1970
	maxYearField = 2199
)

var monthNames = []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}
var dayNames = []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}

type fieldSpec struct {
	name     string
	min, max int
	names    []string // names[i] is value min+i
}

var fields = [...]fieldSpec{
	fSecond: {"seconds", 0, 59, nil},
	fMinute: {"minutes", 0, 59, nil},
	fHour:   {"hours", 0, 23, nil},
	fDOM:    {"day-of-month", 1, 31, nil},
	fMonth:  {"month", 1, 12, monthNames},
	fDOW:    {"day-of-week", 1, 7, dayNames},
	fYear:   {"year", minYearField, maxYearField, nil},
}

// Parse parses a Quartz cron expression whose wall-clock times are read in
// loc (UTC when loc is nil). It has 6 or 7 fields separated by white space:
//
//	seconds minutes hours day-of-month month day-of-week [year]
//
// with the Quartz syntax: `*`, `?` (day-of-month or day-of-week only, and
// exactly one of the two must be `?`), `a-b` (a range, which wraps around
// when b < a, as in FRI-MON), `a/n`, `*/n` and `a-b/n` (steps), lists with
// `,`, month names JAN-DEC and day names SUN-SAT (any case, day-of-week
// 1 = Sunday … 7 = Saturday), and the day specials: in day-of-month `L`
// (last day), `L-n` (n days before the last), `LW` (last weekday) and `nW`
// (the weekday nearest day n, not leaving the month); in day-of-week `L`
// alone (Saturday), `nL` (the last day n of the month) and `n#k` (the k-th
// day n of the month, k 1-5). The specials stand alone in their field, as
// in Quartz. The year field takes 1970-2199; without it every year matches.
//
// A bad expression returns a *ParseError naming the field and the reason.
func Parse(expr string, loc *time.Location) (*Expr, error) {
	if loc == nil {
		loc = time.UTC
	}
	parts := strings.Fields(expr)
	if len(parts) != 6 && len(parts) != 7 {
		msg := fmt.Sprintf("want 6 or 7 fields (seconds minutes hours day-of-month month day-of-week [year]), got %d", len(parts))
		if q := quartzOfCrontab(parts, loc); q != "" {
			msg += fmt.Sprintf(" (a crontab line? Quartz starts with seconds and takes ? in one day field: %q)", q)
		}
		return nil, &ParseError{"expression", msg}
	}
	e := &Expr{src: strings.Join(parts, " "), loc: loc, anyYear: true}
	var sets [7]uint64
	for i, p := range parts {
		set, err := e.parseField(i, p)
		if err != nil {
			return nil, err
		}
		sets[i] = set
	}
	e.seconds, e.minutes = sets[fSecond], sets[fMinute]
	e.hours = uint32(sets[fHour])
	e.months = uint16(sets[fMonth])
	if e.domSpec == e.dowSpec {
		reason := "exactly one of day-of-month and day-of-week must be '?' (Quartz rule), e.g. \"0 0 12 * * ?\" or \"0 0 12 ? * MON\""
		if !e.domSpec {
			reason = "both are '?'; " + reason
		} else {
			reason = "both are given; " + reason
		}
		return nil, &ParseError{"day-of-month/day-of-week", reason}
	}
	if e.domSpec {
		e.dom = uint32(sets[fDOM])
	} else {
		dow := uint8(sets[fDOW])
		for wd1 := range 7 { // weekday of the 1st, 0 = Sunday
			var m uint32
			for d := 1; d <= 31; d++ {
				if dow&(1<<(1+(wd1+d-1)%7)) != 0 {
					m |= 1 << d
				}
			}
			e.dowMasks[wd1] = m
		}
	}
	e.allHours = e.hours == 1<<24-1
	return e, nil
}

// parseField parses field i and returns its value set as a bit mask (bit v
// set for value v; for the year field the set goes to e.years instead).
// Day specials are recorded in e.
func (e *Expr) parseField(i int, s string) (uint64, error) {
	f := fields[i]
	bad := func(format string, args ...any) (uint64, error) {
		return 0, &ParseError{f.name, fmt.Sprintf(format, args...)}
	}
	if i == fYear && (s == "*" || s == "?") {
		if s == "?" {
			return bad("'?' is allowed only in day-of-month and day-of-week")
		}
		return 0, nil // every year, as without the field
	}
	if s == "?" {
		if i != fDOM && i != fDOW {
			return bad("'?' is allowed only in day-of-month and day-of-week")
		}
		return 0, nil
	}
	if i == fDOM {
		e.domSpec = true
	}
	if i == fDOW {
		e.dowSpec = true
	}
	items := strings.Split(s, ",")
	var set uint64
	for _, it := range items {
		if it == "" {
			return bad("empty list item in %q", s)
		}
		if it == "?" {
			return bad("'?' cannot be combined with other values")
		}
		up := strings.ToUpper(it)
		if special, err := e.parseSpecial(i, up, len(items)); special || err != nil {
			if err != nil {
				return 0, err
			}
			continue
		}
		lo, hi, step, err := parseItem(f, up)
		if err != nil {
			return 0, &ParseError{f.name, err.Error()}
		}
		if i == fYear {
			if hi < lo {
				return bad("range %d-%d goes backwards", lo, hi)
			}
			e.anyYear = false
			for y := lo; y <= hi; y += step {
				e.years[(y-minYearField)/64] |= 1 << ((y - minYearField) % 64)
			}
			continue
		}
		span := f.max - f.min + 1
		n := hi - lo
		if n < 0 {
			n += span // wraps around, as FRI-MON
		}
		for k := 0; k <= n; k += step {
			set |= 1 << (f.min + (lo-f.min+k)%span)
		}
	}
	return set, nil
}

// parseSpecial handles L, L-n, LW, nW (day-of-month) and L, nL, n#k
// (day-of-week). It reports whether it was a special.
func (e *Expr) parseSpecial(i int, it string, nitems int) (bool, error) {
	f := fields[i]
	alone := func(what string) error {
		if nitems > 1 {
			return &ParseError{f.name, fmt.Sprintf("%s cannot be combined with other values (Quartz does not support it)", what)}
		}
		return nil
	}
	switch i {
	case fDOM:
		switch {
		case it == "L":
			e.domLast = true
			return true, alone("'L'")
		case it == "LW":
			e.domLastWeekday = true
			return true, alone("'LW'")
		case strings.HasPrefix(it, "L-"):
			n, err := number(it[2:])
			if err != nil || n > 30 {
				return true, &ParseError{f.name, fmt.Sprintf("'L-n' needs n in 0-30, got %q", it)}
			}
			e.domLast, e.domLastOffset = true, n
			return true, alone("'L-n'")
		case strings.HasSuffix(it, "W"):
			n, err := number(it[:len(it)-1])
			if err != nil {
				return true, &ParseError{f.name, fmt.Sprintf("'W' needs a single day before it, as 15W; got %q", it)}
			}
			if n < 1 || n > 31 {
				return true, &ParseError{f.name, fmt.Sprintf("value %d out of range 1-31", n)}
			}
			e.domNearest = n
			return true, alone("'W'")
		case strings.ContainsAny(it, "LW#"):
			return true, &ParseError{f.name, fmt.Sprintf("bad use of a special character in %q (day-of-month takes L, L-n, LW or nW)", it)}
		}
	case fDOW:
		switch {
		case it == "L":
			return false, nil // Saturday, handled as a value by parseItem
		case strings.HasSuffix(it, "L"):
			d, err := value(f, it[:len(it)-1])
			if err != nil {
				return true, &ParseError{f.name, fmt.Sprintf("'L' needs a single day before it, as 6L or FRIL: %v", err)}
			}
			e.dowLast = d
			return true, alone("'nL'")
		case strings.Contains(it, "#"):
			a, b, _ := strings.Cut(it, "#")
			d, err := value(f, a)
			if err != nil {
				return true, &ParseError{f.name, fmt.Sprintf("'#' needs a single day before it, as 6#3 or FRI#3: %v", err)}
			}
			k, err := number(b)
			if err != nil || k < 1 || k > 5 {
				return true, &ParseError{f.name, fmt.Sprintf("'#' needs an occurrence 1-5 after it, got %q", b)}
			}
			e.dowNth, e.dowNthK = d, k
			return true, alone("'#'")
		case strings.HasSuffix(it, "W"):
			return true, &ParseError{f.name, fmt.Sprintf("'W' is allowed only in day-of-month, got %q", it)}
		}
	}
	return false, nil
}

// parseItem reads "*", "v", "a-b", each optionally followed by "/step", and
// "/step" alone (as "*/step"), returning the range and step.
func parseItem(f fieldSpec, it string) (lo, hi, step int, err error) {
	base, stepStr, hasStep := strings.Cut(it, "/")
	step = 1
	if hasStep {
		if stepStr == "" {
			return 0, 0, 0, fmt.Errorf("'/' must be followed by a step, got %q", it)
		}
		n, err := number(stepStr)
		span := f.max - f.min + 1
		if err != nil {
			return 0, 0, 0, fmt.Errorf("bad step %q: %v", stepStr, err)
		}
		if n < 1 || n > span {
			return 0, 0, 0, fmt.Errorf("step %d out of range 1-%d", n, span)
		}
		step = n
	}
	switch {
	case base == "*" || (base == "" && hasStep):
		return f.min, f.max, step, nil
	case base == "":
		return 0, 0, 0, fmt.Errorf("empty value")
	}
	a, b, isRange := strings.Cut(base, "-")
	lo, err = value(f, a)
	if err != nil {
		return 0, 0, 0, err
	}
	if !isRange {
		if hasStep { // "a/n" runs from a to the end of the field
			return lo, f.max, step, nil
		}
		return lo, lo, 1, nil
	}
	hi, err = value(f, b)
	if err != nil {
		return 0, 0, 0, err
	}
	return lo, hi, step, nil
}

// value reads one value of field f: a number in its range, or a name.
func value(f fieldSpec, s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("missing value")
	}
	if f.name == "day-of-week" && s == "L" {
		return 7, nil
	}
	if f.names != nil && s[0] >= 'A' && s[0] <= 'Z' {
		for i, n := range f.names {
			if s == n {
				return f.min + i, nil
			}
		}
		return 0, fmt.Errorf("unknown name %q (want %s-%s)", s, f.names[0], f.names[len(f.names)-1])
	}
	n, err := number(s)
	if err != nil {
		return 0, err
	}
	if n < f.min || n > f.max {
		hint := ""
		if f.name == "day-of-week" {
			hint = " (1 = Sunday)"
		}
		return 0, fmt.Errorf("value %d out of range %d-%d%s", n, f.min, f.max, hint)
	}
	return n, nil
}

// number reads a small non-negative decimal number.
func number(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("missing number")
	}
	if len(s) > 6 {
		return 0, fmt.Errorf("value %q too large", s)
	}
	n := 0
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("unexpected %q (want a number)", s)
		}
		n = n*10 + int(c-'0')
	}
	return n, nil
}

// quartzOfCrontab is the Quartz expression of the crontab line f (minute
// hour day-of-month month day-of-week), when it has one for sure: a
// day-of-week of digits is left ("1" is Monday to crontab, Sunday to
// Quartz), as are lines restricting both day fields (crontab takes
// either; Quartz cannot say it) and whatever does not then parse. "" if
// none.
func quartzOfCrontab(f []string, loc *time.Location) string {
	if len(f) != 5 || strings.ContainsAny(f[4], "0123456789") {
		return ""
	}
	dom, dow := f[2], f[4]
	switch {
	case dow == "*":
		dow = "?"
	case dom == "*":
		dom = "?"
	default:
		return ""
	}
	q := strings.Join([]string{"0", f[0], f[1], dom, f[3], dow}, " ")
	if _, err := Parse(q, loc); err != nil {
		return ""
	}
	return q
}
