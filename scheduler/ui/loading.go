package ui

// The grid while the state store is still reading the state of the
// workflows after a start (Options.State; statedb reads 1.68 million slot
// files of 10,000 hourly workflows in about 20 s): a view does not wait
// for it. The rows of the page are read at once (their workflows are
// loaded on demand); every other workflow not read yet is left out of the
// counts of the summary, of the group headers and of the Problems only
// filter, and the summary says how many are still being read. Once the
// store has read everything the page is the one it always was.

import (
	"context"
	"runtime"
)

// unread returns the workflows of rows whose state the store is still
// reading (nil when none, or without Options.State).
func (h *handler) unread(groups []*groupView) map[string]bool {
	if h.opts.State == nil {
		return nil
	}
	var ids []string
	for _, g := range groups {
		for _, r := range g.Rows {
			if !r.Missing {
				ids = append(ids, r.ID)
			}
		}
	}
	return h.opts.State.Unread(ids)
}

// markLoading marks rows as still being read. What needs no state is
// still shown: the paused flag (the store keeps it apart).
func (h *handler) markLoading(rows []*rowView) {
	for _, r := range rows {
		r.Loading = true
		if paused, err := h.svc.Paused(r.ID); err == nil {
			r.Paused = paused
		}
	}
}

// readShown reads at once, in parallel, the state of the page's rows that
// the store has not read yet, so that filling them finds it in memory.
func (h *handler) readShown(ctx context.Context, shown []*rowView) {
	var ids []string
	for _, r := range shown {
		if r.Loading {
			ids = append(ids, r.ID)
			r.Loading = false
		}
	}
	if len(ids) == 0 || ctx.Err() != nil {
		return
	}
	// As many readers as the background load has (statedb's: 8), so that
	// the page's rows get about half of the CPU while it runs, not a tenth.
	workers := h.opts.Workers
	if workers <= 0 {
		workers = max(8, runtime.GOMAXPROCS(0))
	}
	h.opts.State.Preload(ids, workers)
}
