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

// aggregate fills the counts of rows: from the cache for the rows it holds
// this window's counts of, when it is younger than aggTTL, and by reading
// the slots of the others (which are then cached too, when there are many
// rows). While the state store is still reading the state of some
// workflows (after a start), rows holds only those read: the cache then
// grows by the rows read since the previous view.
func (h *handler) aggregate(ctx context.Context, rows []*rowView, win window) {
	if len(rows) < cacheRows {
		h.eachRow(ctx, rows, win, false)
		return
	}
	key := aggKey{win.First.Unix(), win.Zoom, win.Cols}
	c := &h.agg
	if len(c.use(key, rows)) == 0 {
		return
	}
	c.fill.Lock()
	defer c.fill.Unlock()
	missing := c.use(key, rows) // some may have been filled while this request waited
	if len(missing) == 0 {
		return
	}
	h.eachRow(ctx, missing, win, false)
	if ctx.Err() != nil {
		return
	}
	c.add(key, missing, len(missing) == len(rows))
}

// use copies the cached counts into the rows the cache has, and returns
// the others (all of rows when the cache is of another window or older
// than aggTTL).
func (c *aggCache) use(key aggKey, rows []*rowView) (missing []*rowView) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rows == nil || c.key != key || time.Since(c.at) >= aggTTL {
		return rows
	}
	for _, r := range rows {
		a, ok := c.rows[r.ID]
		if !ok {
			missing = append(missing, r)
			continue
		}
		r.Fail, r.Running, r.Paused, r.Err = a.fail, a.running, a.paused, a.err
	}
	return missing
}

// add caches the counts of rows just read: a new cache, aged from now,
// when they are all the rows of a view (or the cache is of another
// window), else added to the current one (they expire with it).
func (c *aggCache) add(key aggKey, rows []*rowView, all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if all || c.rows == nil || c.key != key {
		c.key, c.at, c.rows = key, time.Now(), make(map[string]rowAgg, len(rows))
	}
	for _, r := range rows {
		c.rows[r.ID] = rowAgg{r.Fail, r.Running, r.Paused, r.Err}
	}
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
