package ui

// The counts of every row (failures, running slots, paused, errors), kept
// for a few seconds at scale: a page shows pageLines rows, but the summary,
// the group headers and the "problems only" filter need every workflow's
// counts, one Slots call each. Below cacheRows workflows they are always
// read fresh; the rows a page shows always are.

import (
	"context"
	"sync"
	"time"
)

// cacheRows is the number of workflows from which the counts are cached.
const cacheRows = 4 * pageLines

// aggTTL is how long cached counts are used.
const aggTTL = 5 * time.Second

type aggKey struct {
	first int64
	zoom  time.Duration
	cols  int
}

type rowAgg struct {
	fail, running int
	paused        bool
	err           string
}

// aggCache holds the counts of one window (the one asked for last).
type aggCache struct {
	fill sync.Mutex // one computation at a time
	mu   sync.Mutex
	key  aggKey
	at   time.Time // wall clock
	rows map[string]rowAgg
}

// aggregate fills the counts of rows: from the cache when it holds this
// window's counts of every row and is younger than aggTTL, else by reading
// every row's slots (and then caching them when there are many rows).
func (h *handler) aggregate(ctx context.Context, rows []*rowView, win window) {
	if len(rows) < cacheRows {
		h.eachRow(ctx, rows, win, false)
		return
	}
	key := aggKey{win.First.Unix(), win.Zoom, win.Cols}
	c := &h.agg
	if c.use(key, rows) {
		return
	}
	c.fill.Lock()
	defer c.fill.Unlock()
	if c.use(key, rows) { // filled while this request waited
		return
	}
	h.eachRow(ctx, rows, win, false)
	if ctx.Err() != nil {
		return
	}
	m := make(map[string]rowAgg, len(rows))
	for _, r := range rows {
		m[r.ID] = rowAgg{r.Fail, r.Running, r.Paused, r.Err}
	}
	c.mu.Lock()
	c.key, c.at, c.rows = key, time.Now(), m
	c.mu.Unlock()
}

// use copies the cached counts into rows when the cache has them all.
func (c *aggCache) use(key aggKey, rows []*rowView) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rows == nil || c.key != key || time.Since(c.at) >= aggTTL {
		return false
	}
	for _, r := range rows {
		if _, ok := c.rows[r.ID]; !ok {
			return false
		}
	}
	for _, r := range rows {
		a := c.rows[r.ID]
		r.Fail, r.Running, r.Paused, r.Err = a.fail, a.running, a.paused, a.err
	}
	return true
}

// update replaces the cached counts of rows just read fresh.
func (c *aggCache) update(key aggKey, rows []*rowView) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rows == nil || c.key != key {
		return
	}
	for _, r := range rows {
		if _, ok := c.rows[r.ID]; ok {
			c.rows[r.ID] = rowAgg{r.Fail, r.Running, r.Paused, r.Err}
		}
	}
}

// dropCaches forgets the cached counts (for benchmarks of the full work).
func (h *handler) dropCaches() {
	h.agg.mu.Lock()
	h.agg.rows = nil
	h.agg.mu.Unlock()
}
