package ui

// Pages of rows: at 10,000 workflows the grid shows one screenful at a
// time (pageLines rows and group headers), with the filters applied on the
// server before paging, so a page is small and quick whatever the number
// of workflows.

import (
	"strings"
)

// pageLines bounds the rows and group headers of one page: about what a
// person sees on a large screen (21 px a row).
const pageLines = 50

// pager is the page of rows a view shows, and its links.
type pager struct {
	Page, Pages int // Page is 0-based
	// First and Last number the rows shown (1-based), of Total rows
	// (after the filters).
	First, Last, Total int
	Prev, Next         string
}

// Paged reports whether the rows span more than one page.
func (p pager) Paged() bool { return p.Pages > 1 }

// filterRows keeps the rows whose id contains the query (case-insensitive)
// and, with problems, the rows with failures or missing; groups left
// empty by a filter are dropped.
func filterRows(groups []*groupView, p gridParams) []*groupView {
	if p.Query == "" && !p.Problems {
		return groups
	}
	q := strings.ToLower(p.Query)
	var out []*groupView
	for _, g := range groups {
		var rows []*rowView
		for _, r := range g.Rows {
			if q != "" && !strings.Contains(strings.ToLower(r.ID), q) {
				continue
			}
			if p.Problems && r.Fail == 0 && !r.Missing && r.Err == "" {
				continue
			}
			rows = append(rows, r)
		}
		if len(rows) > 0 {
			ng := *g
			ng.Rows, ng.src = rows, g
			out = append(out, &ng)
		}
	}
	return out
}

// paginate cuts the groups into pages of pageLines lines (a group's header
// is a line, and is repeated, marked continued, on a page that starts in
// the middle of its rows) and returns the requested page (the last one
// when p.Page is past it).
func (h *handler) paginate(groups []*groupView, p gridParams) ([]*groupView, pager) {
	type line struct {
		g   int
		row int // -1: the group's header
	}
	var pages [][]line
	var cur []line
	total := 0
	for gi, g := range groups {
		for ri := range g.Rows {
			if ri == 0 && len(cur) >= pageLines-1 { // no room for the header and a row
				pages, cur = append(pages, cur), nil
			}
			if ri == 0 || len(cur) == 0 {
				cur = append(cur, line{gi, -1})
			}
			cur = append(cur, line{gi, ri})
			total++
			if len(cur) >= pageLines {
				pages, cur = append(pages, cur), nil
			}
		}
	}
	if len(cur) > 0 {
		pages = append(pages, cur)
	}
	pg := pager{Pages: max(1, len(pages)), Total: total}
	pg.Page = min(p.Page, pg.Pages-1)
	var out []*groupView
	if len(pages) > 0 {
		for _, pl := range pages[:pg.Page] {
			for _, l := range pl {
				if l.row >= 0 {
					pg.First++
				}
			}
		}
		pg.Last = pg.First
		pg.First++
		for _, l := range pages[pg.Page] {
			if l.row < 0 {
				ng := *groups[l.g]
				ng.Rows, ng.src = nil, groups[l.g]
				if ng.src.src != nil { // a filtered copy
					ng.src = ng.src.src
				}
				out = append(out, &ng)
				continue
			}
			g := out[len(out)-1]
			if len(g.Rows) == 0 && l.row > 0 {
				g.Continued = true
			}
			g.Rows = append(g.Rows, groups[l.g].Rows[l.row])
			pg.Last++
		}
	}
	if pg.Page > 0 {
		pg.Prev = h.gridURL(p, p.End, p.Explicit, p.Zoom, p.Cols, pg.Page-1)
	}
	if pg.Page < pg.Pages-1 {
		pg.Next = h.gridURL(p, p.End, p.Explicit, p.Zoom, p.Cols, pg.Page+1)
	}
	return out, pg
}
