package ui

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"runtime"
	"slices"
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
	Pager       pager
	// PageURL is this view's URL without the filters and the page (the
	// script adds them).
	PageURL   string
	TimeInput string // the window end for <input type=datetime-local>
}

type stats struct {
	Workflows, Failing, Paused, Running, Missing, Problems int
	// Loading counts the workflows whose state the store is still
	// reading (after a start): the other counts leave them out.
	Loading int
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
	// Loading counts the rows whose state is still being read.
	Loading int
	// File and Deploy are set for a project's group: its workflows file,
	// and the deploy that wrote it (nil: none known).
	File   string
	Deploy *Deployment
	// Total is the group's number of rows (Rows may be a page's part of
	// them); Continued marks a group whose rows began on an earlier page.
	Total     int
	Continued bool
	src       *groupView // the whole group a page's part comes from
}

// rowView is one workflow's row. Cells is rendered by renderCells.
type rowView struct {
	ID      string
	Missing bool
	Paused  bool
	Err     string
	// Loading: the store is still reading the workflow's state (after a
	// start); its counts are not known yet. Never set on a row a page
	// shows (those are read).
	Loading bool
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
	p, err := parseGridParams(r.URL.Query(), now, func() int {
		return h.zoom.choose(h.svc, h.svc.WorkflowIDs(), now)
	})
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
// call per workflow) for the counts, the filters and the problem marks,
// then renders the cells of the rows of the requested page only: a view
// never holds more than pageLines rows and group headers.
func (h *handler) buildGrid(ctx context.Context, p gridParams, now time.Time) (*gridPage, error) {
	win := newWindow(p.End, p.Zoom, p.Cols)
	page := &gridPage{
		pageCommon: h.common("Slots"),
		Window:     win,
		Now:        now,
		Params:     p,
		Legend:     legend,
		LoadErrors: h.svc.LoadErrors(),
		Following:  !p.Explicit,
	}
	page.EndLabel = win.End.Format("2006-01-02 15:04") + " UTC"
	page.TimeInput = win.End.Format("2006-01-02T15:04")
	h.headers(page, win, now)
	h.navigation(page, p, now)

	groups := h.group(h.svc.WorkflowIDs())
	byWorkflow := map[string][]scheduler.Problem{}
	for _, p := range h.problems("") {
		byWorkflow[p.Workflow] = append(byWorkflow[p.Workflow], p)
	}
	unread := h.unread(groups)
	var rows, loading []*rowView
	for _, g := range groups {
		for _, row := range g.Rows {
			switch {
			case row.Missing:
			case unread[row.ID]:
				row.Problems = byWorkflow[row.ID]
				loading = append(loading, row)
			default:
				row.Problems = byWorkflow[row.ID]
				rows = append(rows, row)
			}
		}
	}
	h.markLoading(loading)
	h.aggregate(ctx, rows, win)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, g := range groups {
		g.Total = len(g.Rows)
	}
	page.Groups, page.Pager = h.paginate(filterRows(groups, p), p)
	unfiltered := p
	unfiltered.Query, unfiltered.Problems = "", false
	page.PageURL = h.gridURL(unfiltered, p.End, p.Explicit, p.Zoom, p.Cols, 0)
	var shown []*rowView
	for _, g := range page.Groups {
		for _, row := range g.Rows {
			if !row.Missing && row.Err == "" {
				shown = append(shown, row)
			}
		}
	}
	h.readShown(ctx, shown)
	h.eachRow(ctx, shown, win, true)
	h.agg.update(aggKey{win.First.Unix(), win.Zoom, win.Cols}, shown)
	for _, g := range groups {
		for _, row := range g.Rows {
			switch {
			case row.Missing:
				g.Missing++
				page.Stats.Missing++
				continue
			case row.Loading:
				g.Loading++
				page.Stats.Loading++
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
	for _, g := range page.Groups {
		g.Failing, g.Missing, g.Loading = g.src.Failing, g.src.Missing, g.src.Loading
	}
	return page, ctx.Err()
}

// eachRow fills rows (concurrently, Options.Workers at a time): their
// counts, and their cells when render is set.
func (h *handler) eachRow(ctx context.Context, rows []*rowView, win window, render bool) {
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
			for {
				i := int(next.Add(1) - 1)
				if i >= len(rows) || ctx.Err() != nil {
					return
				}
				h.fillRow(ctx, rows[i], win, cells, render)
			}
		}()
	}
	wg.Wait()
}

// fillRow reads one workflow's slots, counts them, and with render writes
// its cells.
func (h *handler) fillRow(ctx context.Context, row *rowView, win window, cells []cell, render bool) {
	if paused, err := h.svc.Paused(row.ID); err == nil {
		row.Paused = paused
	}
	if render { // the service type is for the row's title
		if wf, err := h.svc.Workflow(row.ID); err == nil {
			row.Service = wf.ExternalService.Type
		}
	}
	slots, err := h.svc.Slots(ctx, row.ID, win.Start(), win.End)
	if err != nil {
		row.Err = err.Error()
		return
	}
	clear(cells)
	row.Running, row.Fail = 0, 0
	for i := range slots {
		s := &slots[i]
		b := win.bucketOf(s.ID.Time)
		if b < 0 || b >= int64(len(cells)) {
			continue
		}
		c := &cells[b]
		c.n++
		if r := listedStyle(s).rank; r > c.rank {
			c.rank = r
		}
		if s.Status == slot.Running {
			row.Running++
		}
	}
	// A killed slot was stopped on purpose (celos kill): only failures,
	// wait timeouts and unreadable slots make a row one "with failures".
	for i := range cells {
		if cells[i].rank >= styleIndex[slot.WaitTimeout].rank {
			row.Fail++
		}
	}
	if render {
		row.Cells = template.HTML(renderCells(make([]byte, 0, len(cells)*16), cells))
	}
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
// marked missing) and "Unlisted workflows"; without a config, one group
// per project (workflows file) when the service says which file defines a
// workflow, else one group.
func (h *handler) group(ids []string) []*groupView {
	if len(h.opts.Config.Groups) == 0 {
		if groups, ok := h.projectGroups(ids); ok {
			return groups
		}
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
	// spanKey names the span of a bucket: its key, its labels from the
	// longest to the shortest, and its title.
	spanKey := func(t time.Time) (key string, labels []string, title string) {
		switch {
		case zoomMin >= 1440:
			return t.Format("2006-01"), []string{t.Format("Jan 2006"), t.Format("Jan")}, t.Format("January 2006")
		case zoomMin >= 60:
			return t.Format("2006-01-02"), []string{t.Format("Mon 2 Jan"), t.Format("Mon 2"), t.Format("2")}, t.Format("Monday 2 January 2006")
		default:
			k := t.Format("2006-01-02 15")
			if t.Hour() == 0 {
				return k, []string{t.Format("Mon 2 Jan"), t.Format("2 Jan"), t.Format("2")}, t.Format("Monday 2 January 2006, 15:00")
			}
			return k, []string{t.Format("15:00"), t.Format("15")}, t.Format("Monday 2 January 2006, 15:00")
		}
	}
	var css strings.Builder
	var boundaries []int
	var labels [][]string
	nowCol := -1
	lastKey := ""
	for i := 0; i < win.Cols; i++ {
		t := win.bucketStart(i)
		key, ls, title := spanKey(t)
		if key != lastKey {
			if i > 0 {
				boundaries = append(boundaries, i)
			}
			page.Spans = append(page.Spans, span{Title: title})
			labels = append(labels, ls)
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
	// A span's label is the longest that fits its columns at their
	// narrowest, so that none is cut off (a day of two columns is "24").
	minCell := 22
	if zoomMin >= 1440 {
		minCell = 44
	}
	for i := range page.Spans {
		page.Spans[i].Label = fitLabel(labels[i], page.Spans[i].N*minCell)
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

// fitLabel returns the first label whose text fits width pixels of a
// header span (7 px a character at the header's 11 px, 6 px of padding),
// or "" when none does (the span's title still names it).
func fitLabel(labels []string, width int) string {
	for _, l := range labels {
		if 6+len(l)*7 <= width {
			return l
		}
	}
	return ""
}

// navigation builds the toolbar links: zoom levels, widths, newer/older.
// Every link keeps the page of rows and the filters.
func (h *handler) navigation(page *gridPage, p gridParams, now time.Time) {
	link := func(end time.Time, explicit bool, zoom, cols int) string {
		return h.gridURL(p, end, explicit, zoom, cols, p.Page)
	}
	zooms := Zooms
	if !slices.Contains(zooms, p.Zoom) {
		zooms = append(slices.Clone(zooms), p.Zoom)
		slices.Sort(zooms)
	}
	for _, z := range zooms {
		// Keep a width the operator chose; the default stays the default.
		cols := p.Cols
		if p.Cols == maxColumns(p.Zoom, DefaultColumns) {
			cols = DefaultColumns
		}
		page.Zooms = append(page.Zooms, navLink{Label: zoomLabel(z), URL: link(p.End, p.Explicit, z, cols), Active: z == p.Zoom})
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

// gridURL is the URL of a view of the grid: parameters equal to their
// defaults are left out, the filters are kept.
func (h *handler) gridURL(p gridParams, end time.Time, explicit bool, zoom, cols, pg int) string {
	q := url.Values{}
	if explicit {
		q.Set("time", end.UTC().Format("2006-01-02T15:04Z"))
	}
	if zoom != p.DefaultZoom {
		q.Set("zoom", strconv.Itoa(zoom))
	}
	if cols != DefaultColumns {
		q.Set("cols", strconv.Itoa(cols))
	}
	if p.Query != "" {
		q.Set("q", p.Query)
	}
	if p.Problems {
		q.Set("problems", "1")
	}
	if pg > 0 {
		q.Set("page", strconv.Itoa(pg+1))
	}
	if len(q) == 0 {
		return h.opts.BasePath
	}
	return h.opts.BasePath + "?" + q.Encode()
}

// zoomLabel names a zoom: 1d, 2h, 45m.
func zoomLabel(z int) string {
	switch {
	case z%1440 == 0:
		return fmt.Sprintf("%dd", z/1440)
	case z%60 == 0:
		return fmt.Sprintf("%dh", z/60)
	}
	return fmt.Sprintf("%dm", z)
}
