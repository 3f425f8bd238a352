package ui

// The grid's time window: its query parameters, the zoom (any number of
// minutes, as in Celos's UI), the alignment of its buckets on UTC midnight,
// and the zoom chosen when the URL names none.

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/schedule"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// Zooms are the bucket sizes the toolbar offers, in minutes. The zoom
// parameter takes any whole number of minutes, clamped into
// [MinZoom, MaxZoom], as Celos's UI did.
var Zooms = []int{1, 5, 15, 30, 60, 1440}

// MinZoom and MaxZoom bound the zoom parameter (Celos's clamp).
const (
	MinZoom = 1
	MaxZoom = 1440
)

// DefaultZoom is the bucket size when the URL names none and no workflow is
// loaded (Celos's default).
const DefaultZoom = 60

// DefaultColumns is the number of buckets shown without a cols parameter
// (Celos showed min(7 days / zoom, 48)).
const DefaultColumns = 48

// MaxColumns bounds the cols parameter.
const MaxColumns = 168

// columnChoices are the widths the toolbar offers.
var columnChoices = []int{24, 48, 96, 168}

// window is the time range the grid shows: Cols buckets of Zoom, the
// newest (starting at First) on the left, ending at End (exclusive).
type window struct {
	End   time.Time
	Zoom  time.Duration
	Cols  int
	First time.Time // start of the newest bucket
}

// Start is the start of the oldest bucket: the window is [Start, End).
func (w window) Start() time.Time { return w.First.Add(-time.Duration(w.Cols-1) * w.Zoom) }

// bucketStart returns the start of the i-th bucket (0 = newest).
func (w window) bucketStart(i int) time.Time { return w.First.Add(-time.Duration(i) * w.Zoom) }

// bucketOf returns the index of the bucket holding t (0 = newest), which
// is out of [0, Cols) when t is outside the window.
func (w window) bucketOf(t time.Time) int64 {
	z := w.Zoom.Milliseconds()
	d := w.First.UnixMilli() + z - t.UnixMilli() - 1
	// Floor division: d < 0 (t at or after the end of the newest bucket) is
	// a negative index.
	q := d / z
	if d%z != 0 && d < 0 {
		q--
	}
	return q
}

// newWindow places the buckets as Celos's UI did: the newest is found by
// stepping back from the next UTC midnight in steps of the zoom, so bucket
// starts are midnight minus multiples of the zoom (for a zoom that divides
// a day, multiples of it counted from every midnight). The newest bucket
// is the last one that starts before end.
func newWindow(end time.Time, zoomMin, cols int) window {
	z := time.Duration(zoomMin) * time.Minute
	end = end.UTC()
	last := end.Add(-time.Nanosecond)
	next := last.Truncate(24 * time.Hour).Add(24 * time.Hour) // the zero time is a UTC midnight
	back := next.Sub(last)
	steps := (back + z - 1) / z
	return window{End: end, Zoom: z, Cols: cols, First: next.Add(-steps * z)}
}

// gridParams are the query parameters of the grid.
type gridParams struct {
	End      time.Time
	Explicit bool // time was given (else it follows now)
	Zoom     int
	// DefaultZoom is the zoom chosen for the loaded schedules; links leave
	// the zoom out when it is this one.
	DefaultZoom int
	Cols        int
	// Page is the page of rows (0-based), Query and Problems filter the rows.
	Page     int
	Query    string
	Problems bool
}

// parseGridParams reads the grid's query. defaultZoom is used when the
// query names no zoom.
func parseGridParams(q url.Values, now time.Time, defaultZoom func() int) (gridParams, error) {
	p := gridParams{End: now.UTC(), Cols: DefaultColumns}
	for k, v := range q {
		if len(v) > 1 {
			return p, fmt.Errorf("parameter %s given %d times", k, len(v))
		}
	}
	if s := q.Get("time"); s != "" {
		t, err := parseUITime(s)
		if err != nil {
			return p, fmt.Errorf("time: %v", err)
		}
		p.End, p.Explicit = t, true
	}
	p.DefaultZoom = defaultZoom()
	p.Zoom = p.DefaultZoom
	if s := q.Get("zoom"); s != "" {
		z, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil && !isIntOverflow(err) {
			return p, fmt.Errorf("zoom: want a whole number of minutes (%d to %d), not %q", MinZoom, MaxZoom, s)
		}
		p.Zoom = int(min(max(z, MinZoom), MaxZoom))
	}
	if s := q.Get("cols"); s != "" {
		c, err := strconv.Atoi(s)
		if err != nil || c <= 0 {
			return p, fmt.Errorf("cols: want a positive number of columns")
		}
		p.Cols = c
	}
	if s := q.Get("page"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return p, fmt.Errorf("page: want a page number from 1")
		}
		p.Page = n - 1
	}
	p.Query = strings.TrimSpace(q.Get("q"))
	switch q.Get("problems") {
	case "", "0":
	case "1":
		p.Problems = true
	default:
		return p, fmt.Errorf("problems: want 1 or 0")
	}
	p.Cols = maxColumns(p.Zoom, p.Cols)
	return p, nil
}

// isIntOverflow reports whether a ParseInt error is a number out of range
// (clamped like any other number).
func isIntOverflow(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// maxColumns clamps a number of columns to MaxColumns and to scheduler.Window at
// the given zoom.
func maxColumns(zoom, cols int) int {
	return max(1, min(cols, MaxColumns, int(scheduler.Window/(time.Duration(zoom)*time.Minute))))
}

// parseUITime reads the time parameter: ISO 8601 as the API takes it, or
// the zone-less forms of the toolbar's date box (2026-11-22T14:37,
// 2026-11-22 14:37, 2026-11-22; read as UTC).
func parseUITime(s string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return slot.ParseTime(s)
}

// zoomChooser picks the zoom of a grid whose URL names none: the largest
// offered zoom that is not longer than the typical (median) interval
// between two slots of the loaded workflows, so that a minutely
// installation opens at 1 minute, an hourly one at 1 hour and a daily one at
// 1 day. Cron schedules are measured once and cached by expression.
type zoomChooser struct {
	mu     sync.Mutex
	period map[string]time.Duration // "cron|tz" → typical interval (0: none)
}

// maxCachedSchedules bounds the cache of measured cron expressions.
const maxCachedSchedules = 4096

// choose returns the zoom for the workflows ids of svc at now.
func (z *zoomChooser) choose(svc scheduler.Service, ids []string, now time.Time) int {
	periods := make([]time.Duration, 0, len(ids))
	for _, id := range ids {
		if p := z.periodOf(svc, id, now); p > 0 {
			periods = append(periods, p)
		}
	}
	if len(periods) == 0 {
		return DefaultZoom
	}
	slices.Sort(periods)
	return zoomFor(periods[(len(periods)-1)/2])
}

// zoomFor is the largest offered zoom not longer than period (the smallest
// when every zoom is longer).
func zoomFor(period time.Duration) int {
	best := Zooms[0]
	for _, c := range Zooms {
		if time.Duration(c)*time.Minute <= period {
			best = c
		}
	}
	return best
}

// periodOf measures a workflow's typical interval between slots, following
// dependent schedules (bounded, so a cycle ends); 0 when unknown.
func (z *zoomChooser) periodOf(svc scheduler.Service, id string, now time.Time) time.Duration {
	for range 16 {
		wf, err := svc.Workflow(id)
		if err != nil {
			return 0
		}
		if wf.Schedule.Type == workflow.ScheduleDependent {
			id = wf.Schedule.Workflow
			continue
		}
		return z.cronPeriod(wf.Schedule.Cron, wf.Schedule.TimeZone, now)
	}
	return 0
}

// cronPeriod is the median interval between the times of a cron schedule
// over the two days before now: two days for one that fires less often
// (the grid then opens at one day), 0 for an expression that does not parse.
func (z *zoomChooser) cronPeriod(expr, tz string, now time.Time) time.Duration {
	key := expr + "|" + tz
	z.mu.Lock()
	p, ok := z.period[key]
	z.mu.Unlock()
	if ok {
		return p
	}
	if s, err := schedule.NewCron(expr, tz); err == nil {
		// Two days are enough to tell minutes from hours from days, and
		// bound the work for any expression (at most one time a second).
		end := now.Truncate(time.Hour)
		times := s.Times(end.Add(-48*time.Hour), end)
		p = 48 * time.Hour
		if len(times) > 1 {
			gaps := make([]time.Duration, len(times)-1)
			for i := 1; i < len(times); i++ {
				gaps[i-1] = times[i].Sub(times[i-1])
			}
			slices.Sort(gaps)
			p = gaps[len(gaps)/2]
		}
	}
	z.mu.Lock()
	if z.period == nil || len(z.period) >= maxCachedSchedules {
		z.period = make(map[string]time.Duration)
	}
	z.period[key] = p
	z.mu.Unlock()
	return p
}
