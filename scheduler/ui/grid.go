package ui

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/celos-go/celos/scheduler"

	"github.com/celos-go/celos/scheduler/slot"
)

// problemLister is implemented by the slot engine: the errors it kept for
// display (a slot whose submit or status call failed stays as it was; a
// workflow that could not be stepped). The UI shows them when the service
// offers them.
type problemLister interface {
	Problems(workflow string) []scheduler.Problem
}

// problems returns the service's kept problems of a workflow ("" for all).
func (h *handler) problems(workflow string) []scheduler.Problem {
	if pl, ok := h.svc.(problemLister); ok {
		return pl.Problems(workflow)
	}
	return nil
}

// Zooms are the bucket sizes the grid offers, in minutes. Each divides a
// day, so buckets are aligned on UTC midnight as in Celos.
var Zooms = []int{1, 5, 15, 30, 60, 1440}

// DefaultZoom is the bucket size without a zoom parameter (Celos's).
const DefaultZoom = 60

// DefaultColumns is the number of buckets shown without a cols parameter
// (Celos showed min(7 days / zoom, 48)).
const DefaultColumns = 48

// MaxColumns bounds the cols parameter.
const MaxColumns = 168

// columnChoices are the widths the toolbar offers.
var columnChoices = []int{24, 48, 96, 168}

// status presentation: CSS class (one letter, to keep a 1,000-row page
// small), the glyph the stylesheet draws, the name, and the rank that picks a
// bucket's worst state (higher is worse).
type statusStyle struct {
	Status slot.Status
	Class  string
	Glyph  string
	Name   string
	rank   uint8
}

var styles = []statusStyle{
	{slot.Success, "s", "✓", "success", 1},
	{slot.Waiting, "w", "·", "waiting", 2},
	{slot.Ready, "r", "R", "ready", 3},
	{slot.Running, "u", "▶", "running", 4},
	{slot.Killed, "k", "K", "killed", 5},
	{slot.WaitTimeout, "t", "T", "wait timeout", 6},
	{slot.Failure, "f", "✕", "failure", 7},
}

// styleByRank is indexed by rank; styleOf maps a status to its style.
var (
	styleByRank [8]*statusStyle
	styleIndex  = map[slot.Status]*statusStyle{}
)

func init() {
	for i := range styles {
		styleByRank[styles[i].rank] = &styles[i]
		styleIndex[styles[i].Status] = &styles[i]
	}
}

func styleOf(s slot.Status) *statusStyle {
	if st, ok := styleIndex[s]; ok {
		return st
	}
	return styleIndex[slot.Waiting]
}

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

// newWindow aligns buckets on UTC midnight: the newest bucket is the one
// holding end-1ns... i.e. the last bucket that starts before end.
func newWindow(end time.Time, zoomMin, cols int) window {
	z := time.Duration(zoomMin) * time.Minute
	end = end.UTC()
	// The newest bucket is the one that contains the last instant before end.
	last := end.Add(-time.Nanosecond)
	first := floorTo(last, z)
	return window{End: end, Zoom: z, Cols: cols, First: first}
}

// floorTo truncates t to a multiple of d counted from the Unix epoch (a UTC
// midnight), valid for any d that divides a day.
func floorTo(t time.Time, d time.Duration) time.Time {
	s := t.Unix()
	ds := int64(d / time.Second)
	m := s % ds
	if m < 0 {
		m += ds
	}
	return time.Unix(s-m, 0).UTC()
}

// gridParams are the query parameters of the grid.
type gridParams struct {
	End      time.Time
	Explicit bool // time was given (else it follows now)
	Zoom     int
	Cols     int
}

func parseGridParams(q url.Values, now time.Time) (gridParams, error) {
	p := gridParams{End: now.UTC(), Zoom: DefaultZoom, Cols: DefaultColumns}
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
	if s := q.Get("zoom"); s != "" {
		z, err := strconv.Atoi(s)
		if err != nil || z <= 0 {
			return p, fmt.Errorf("zoom: want minutes, one of %v", Zooms)
		}
		p.Zoom = nearestZoom(z)
	}
	if s := q.Get("cols"); s != "" {
		c, err := strconv.Atoi(s)
		if err != nil || c <= 0 {
			return p, fmt.Errorf("cols: want a positive number of columns")
		}
		p.Cols = c
	}
	p.Cols = maxColumns(p.Zoom, p.Cols)
	return p, nil
}

// maxColumns clamps a number of columns to MaxColumns and to scheduler.Window at
// the given zoom.
func maxColumns(zoom, cols int) int {
	return max(1, min(cols, MaxColumns, int(scheduler.Window/(time.Duration(zoom)*time.Minute))))
}

// parseUITime reads the time parameter: ISO 8601 as the API takes it, or
// the zone-less form of the toolbar's date field (2026-11-22T14:37, read
// as UTC).
func parseUITime(s string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return slot.ParseTime(s)
}

// nearestZoom snaps any number of minutes to the closest offered zoom
// (Celos accepted any integer; buckets must divide a day here).
func nearestZoom(z int) int {
	best := Zooms[0]
	for _, c := range Zooms {
		if abs(c-z) < abs(best-z) {
			best = c
		}
	}
	return best
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// gridPage is what templates/grid.html renders.
type gridPage struct {
	pageCommon
	Window      window
	Now         time.Time
	Params      gridParams
	EndLabel    string
	Spans       []span
	Ticks       []tick
	Groups      []*groupView
	LoadErrors  []scheduler.LoadError
	Legend      []statusStyle
	Zooms       []navLink
	Columns     []navLink
	Newer       string
	Older       string
	NowURL      string
	Following   bool // the window ends at now
	ColumnStyle template.CSS
	Stats       stats
	TimeInput   string // the window end for <input type=datetime-local>
}

type stats struct {
	Workflows, Failing, Paused, Running, Missing, Problems int
}

type navLink struct {
	Label  string
	URL    string
	Active bool
}

// span is a cell of the first header row: a day (or an hour, or a month)
// over several buckets.
type span struct {
	Label string
	Title string
	N     int
}

// tick is a bucket's header cell.
type tick struct {
	Label string
	Title string
	T     int64 // bucket start, Unix seconds
	Class string
}

type groupView struct {
	Name    string
	Rows    []*rowView
	Failing int
	Missing int
}

// rowView is one workflow's row. Cells is rendered by renderCells.
type rowView struct {
	ID      string
	Missing bool
	Paused  bool
	Err     string
	Cells   template.HTML
	Fail    int // buckets whose worst state is a failure
	Running int // slots running
	Service string
	// Problems are the engine's kept errors for this workflow.
	Problems []scheduler.Problem
}

// ProblemTitle summarizes the problems for a tooltip.
func (r *rowView) ProblemTitle() string {
	var b strings.Builder
	for i, p := range r.Problems {
		if i == 5 {
			fmt.Fprintf(&b, "\n… and %d more", len(r.Problems)-i)
			break
		}
		if i > 0 {
			b.WriteString("\n")
		}
		if !p.Slot.IsZero() {
			b.WriteString(p.Slot.UTC().Format("2006-01-02 15:04") + " ")
		}
		b.WriteString(p.Op + ": " + p.Error)
	}
	return b.String()
}

// cell aggregates a bucket: how many slots, and the worst rank.
type cell struct {
	n    int32
	rank uint8
}

func (h *handler) serveGrid(w http.ResponseWriter, r *http.Request) {
	now := h.opts.Now().UTC()
	p, err := parseGridParams(r.URL.Query(), now)
	if err != nil {
		h.httpError(w, r, http.StatusBadRequest, err.Error())
		return
	}
	page, err := h.buildGrid(r.Context(), p, now)
	if err != nil {
		h.httpError(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	h.render(w, r, "grid.html", page)
}

// buildGrid gathers the slots of every workflow (concurrently, one Slots
// call per workflow) and renders each row's cells.
func (h *handler) buildGrid(ctx context.Context, p gridParams, now time.Time) (*gridPage, error) {
	win := newWindow(p.End, p.Zoom, p.Cols)
	page := &gridPage{
		pageCommon: h.common("Slots"),
		Window:     win,
		Now:        now,
		Params:     p,
		Legend:     styles,
		LoadErrors: h.svc.LoadErrors(),
		Following:  !p.Explicit,
	}
	page.EndLabel = win.End.Format("2006-01-02 15:04") + " UTC"
	page.TimeInput = win.End.Format("2006-01-02T15:04")
	h.headers(page, win, now)
	h.navigation(page, p, now)

	ids := h.svc.WorkflowIDs()
	page.Groups = h.group(ids)
	byWorkflow := map[string][]scheduler.Problem{}
	for _, p := range h.problems("") {
		byWorkflow[p.Workflow] = append(byWorkflow[p.Workflow], p)
	}
	var rows []*rowView
	for _, g := range page.Groups {
		for _, row := range g.Rows {
			if !row.Missing {
				row.Problems = byWorkflow[row.ID]
				rows = append(rows, row)
			}
		}
	}
	workers := h.opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(1, min(workers, len(rows)))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cells := make([]cell, win.Cols)
			var buf []byte
			for {
				i := int(next.Add(1) - 1)
				if i >= len(rows) {
					return
				}
				buf = h.fillRow(ctx, rows[i], win, cells, buf[:0])
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, g := range page.Groups {
		for _, row := range g.Rows {
			switch {
			case row.Missing:
				g.Missing++
				page.Stats.Missing++
				continue
			case row.Fail > 0:
				g.Failing++
				page.Stats.Failing++
			}
			page.Stats.Workflows++
			if row.Paused {
				page.Stats.Paused++
			}
			page.Stats.Running += row.Running
			if len(row.Problems) > 0 {
				page.Stats.Problems++
			}
		}
	}
	return page, nil
}

// fillRow reads one workflow's slots and renders its cells.
func (h *handler) fillRow(ctx context.Context, row *rowView, win window, cells []cell, buf []byte) []byte {
	if paused, err := h.svc.Paused(row.ID); err == nil {
		row.Paused = paused
	}
	if wf, err := h.svc.Workflow(row.ID); err == nil {
		row.Service = wf.ExternalService.Type
	}
	slots, err := h.svc.Slots(ctx, row.ID, win.Start(), win.End)
	if err != nil {
		row.Err = err.Error()
		return buf
	}
	clear(cells)
	zs := int64(win.Zoom / time.Second)
	first := win.First.Unix()
	for i := range slots {
		s := &slots[i]
		ts := s.ID.Time.Unix()
		m := ts % zs
		if m < 0 {
			m += zs
		}
		b := (first - (ts - m)) / zs
		if b < 0 || b >= int64(len(cells)) {
			continue
		}
		c := &cells[b]
		c.n++
		if r := styleOf(s.Status).rank; r > c.rank {
			c.rank = r
		}
		if s.Status == slot.Running {
			row.Running++
		}
	}
	for i := range cells {
		if cells[i].rank >= styleIndex[slot.Killed].rank {
			row.Fail++
		}
	}
	buf = renderCells(buf, cells)
	row.Cells = template.HTML(buf)
	return buf
}

// renderCells writes one element per bucket: the class carries the worst
// state (the stylesheet draws its colour and glyph), the text the number of
// slots when there are several. Only constants and digits are written, so
// no escaping is needed; this is the hot loop of a 1,000-workflow page,
// which is why a cell is as short as "<i class=s></i>".
func renderCells(buf []byte, cells []cell) []byte {
	for _, c := range cells {
		if c.n == 0 {
			buf = append(buf, "<i></i>"...)
			continue
		}
		buf = append(buf, "<i class="...)
		buf = append(buf, styleByRank[c.rank].Class...)
		buf = append(buf, '>')
		switch {
		case c.n == 1:
		case c.n < 1000:
			buf = strconv.AppendInt(buf, int64(c.n), 10)
		default:
			buf = append(buf, "999+"...)
		}
		buf = append(buf, "</i>"...)
	}
	return buf
}

// group arranges workflow ids into groups: the config's (ids not loaded
// marked missing) and "Unlisted workflows"; or one group without config.
func (h *handler) group(ids []string) []*groupView {
	if len(h.opts.Config.Groups) == 0 {
		g := &groupView{Name: "All workflows"}
		for _, id := range ids {
			g.Rows = append(g.Rows, &rowView{ID: id})
		}
		return []*groupView{g}
	}
	loaded := make(map[string]bool, len(ids))
	for _, id := range ids {
		loaded[id] = true
	}
	listed := map[string]bool{}
	var groups []*groupView
	for _, cg := range h.opts.Config.Groups {
		g := &groupView{Name: cg.Name}
		for _, id := range cg.Workflows {
			listed[id] = true
			g.Rows = append(g.Rows, &rowView{ID: id, Missing: !loaded[id]})
		}
		groups = append(groups, g)
	}
	var unlisted []string
	for _, id := range ids {
		if !listed[id] {
			unlisted = append(unlisted, id)
		}
	}
	if len(unlisted) > 0 {
		sort.Strings(unlisted)
		g := &groupView{Name: "Unlisted workflows"}
		for _, id := range unlisted {
			g.Rows = append(g.Rows, &rowView{ID: id})
		}
		groups = append(groups, g)
	}
	return groups
}

// headers computes the two header rows and the per-column CSS (the now
// marker, boundaries between days, future buckets).
func (h *handler) headers(page *gridPage, win window, now time.Time) {
	zoomMin := int(win.Zoom / time.Minute)
	spanKey := func(t time.Time) (key, label, title string) {
		switch {
		case zoomMin >= 1440:
			return t.Format("2006-01"), t.Format("Jan 2006"), t.Format("January 2006")
		case zoomMin >= 60:
			return t.Format("2006-01-02"), t.Format("Mon 2 Jan"), t.Format("Monday 2 January 2006")
		default:
			k := t.Format("2006-01-02 15")
			if t.Hour() == 0 {
				return k, t.Format("2 Jan"), t.Format("Monday 2 January 2006, 15:00")
			}
			return k, t.Format("15:00"), t.Format("Monday 2 January 2006, 15:00")
		}
	}
	var css strings.Builder
	var boundaries []int
	nowCol := -1
	lastKey := ""
	for i := 0; i < win.Cols; i++ {
		t := win.bucketStart(i)
		key, label, title := spanKey(t)
		if key != lastKey {
			if i > 0 {
				boundaries = append(boundaries, i)
			}
			page.Spans = append(page.Spans, span{Label: label, Title: title})
			lastKey = key
		}
		page.Spans[len(page.Spans)-1].N++
		tk := tick{T: t.Unix(), Title: t.Format("2006-01-02 15:04") + " UTC"}
		switch {
		case zoomMin >= 1440:
			tk.Label = t.Format("2")
			if t.Weekday() == time.Saturday || t.Weekday() == time.Sunday {
				tk.Class = "we"
			}
		case zoomMin >= 60:
			tk.Label = t.Format("15")
		case zoomMin == 1:
			if t.Minute()%5 == 0 {
				tk.Label = t.Format("04")
			}
		default:
			tk.Label = t.Format("04")
		}
		if !now.Before(t) && now.Before(t.Add(win.Zoom)) {
			if tk.Label == "" {
				tk.Label = t.Format("04")
			}
			nowCol = i
			tk.Class = strings.TrimSpace(tk.Class + " now")
			tk.Title += " (now)"
		}
		page.Ticks = append(page.Ticks, tk)
	}
	// Column i is the (i+2)-th child of a row and of the ticks: the first
	// is the name (or the corner).
	if len(boundaries) > 0 {
		for j, b := range boundaries {
			if j > 0 {
				css.WriteString(",")
			}
			fmt.Fprintf(&css, ".hrow.ticks>:nth-child(%d),.row>:nth-child(%d)", b+2, b+2)
		}
		css.WriteString("{border-left:2px solid var(--boundary)}\n")
	}
	if nowCol >= 0 {
		fmt.Fprintf(&css, ".row>:nth-child(%d){box-shadow:inset 2px 0 0 var(--now)}\n", nowCol+2)
		if nowCol > 0 {
			fmt.Fprintf(&css, ".row>i:nth-child(-n+%d){--hatch:var(--future)}\n", nowCol+1)
		}
	} else if win.First.After(now) {
		css.WriteString(".row>i{--hatch:var(--future)}\n")
	}
	page.ColumnStyle = template.CSS(css.String())
}

// navigation builds the toolbar links: zoom levels, widths, newer/older.
func (h *handler) navigation(page *gridPage, p gridParams, now time.Time) {
	link := func(end time.Time, explicit bool, zoom, cols int) string {
		q := url.Values{}
		if explicit {
			q.Set("time", end.UTC().Format("2006-01-02T15:04Z"))
		}
		if zoom != DefaultZoom {
			q.Set("zoom", strconv.Itoa(zoom))
		}
		if cols != DefaultColumns {
			q.Set("cols", strconv.Itoa(cols))
		}
		if len(q) == 0 {
			return h.opts.BasePath
		}
		return h.opts.BasePath + "?" + q.Encode()
	}
	for _, z := range Zooms {
		label := fmt.Sprintf("%dm", z)
		switch {
		case z == 1440:
			label = "1d"
		case z == 60:
			label = "1h"
		}
		// Keep a width the operator chose; the default stays the default.
		cols := p.Cols
		if p.Cols == maxColumns(p.Zoom, DefaultColumns) {
			cols = DefaultColumns
		}
		page.Zooms = append(page.Zooms, navLink{Label: label, URL: link(p.End, p.Explicit, z, cols), Active: z == p.Zoom})
	}
	for _, c := range columnChoices {
		if c > maxColumns(p.Zoom, MaxColumns) {
			break
		}
		page.Columns = append(page.Columns, navLink{Label: strconv.Itoa(c), URL: link(p.End, p.Explicit, p.Zoom, c), Active: c == p.Cols})
	}
	step := time.Duration(p.Cols) * time.Duration(p.Zoom) * time.Minute
	page.Older = link(p.End.Add(-step), true, p.Zoom, p.Cols)
	newer := p.End.Add(step)
	if !newer.Before(now) {
		page.Newer = link(now, false, p.Zoom, p.Cols)
	} else {
		page.Newer = link(newer, true, p.Zoom, p.Cols)
	}
	page.NowURL = link(now, false, p.Zoom, p.Cols)
}
