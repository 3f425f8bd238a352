package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"
)

var (
	slotsDesc      = prometheus.NewDesc("celos_slots", "Slots in the 7-day window, by status (recounted after a step, rerun, kill or pause, at most every 15 s); the workflows counted in celos_workflows_loading are left out.", []string{"status"}, nil)
	loadingDesc    = prometheus.NewDesc("celos_workflows_loading", "Workflows whose slot states were still being read (after a start or POST /clear-cache) at the last count of celos_slots, which leaves them out: 0 when celos_slots is complete.", nil, nil)
	workflowsDesc  = prometheus.NewDesc("celos_workflows", "Loaded workflows, by paused flag.", []string{"paused"}, nil)
	loadErrorsDesc = prometheus.NewDesc("celos_workflow_load_errors", "Workflows files that did not load at the last reload.", nil, nil)
)

// recountEvery is the least time between two recounts of the slots per
// status: a recount reads every workflow's window (about 15 ms of CPU for a
// week of minutely slots), so with many workflows scrapes right after each
// step must not each pay for it.
const recountEvery = 15 * time.Second

// stateCollector counts slots per status over every workflow's window. The
// count is recomputed on a scrape only after something changed (a step, a
// rerun, a kill, a pause), and at most every recountEvery, so scrapes
// between steps cost nothing. While the store reads the state in the
// background (after a start), the workflows it has not read yet are left
// out and counted apart (celos_workflows_loading); such a partial count is
// recounted at most every recountEvery, and at the first scrape after the
// read ended. A read that begins (POST /clear-cache) is counted at the
// next scrape.
type stateCollector struct {
	svc scheduler.Service
	now func() time.Time
	// loading is the store's background read, nil if none (StateLoading).
	loading func() Loading

	mu       sync.Mutex
	dirty    bool
	counted  time.Time // wall clock of the last recount
	counts   map[slot.Status]int
	running  int
	paused   int
	loadErrs int
	unread   int // workflows left out of counts: still being read
}

// Loading is a state store that reads the state of its workflows in the
// background after a start (statedb.DB: LoadInBackground).
type Loading interface {
	// Loading says whether the background read runs.
	Loading() bool
	// Unread returns those of wfs whose state the background read has
	// still to read (nil when none runs).
	Unread(wfs []string) map[string]bool
}

func (c *stateCollector) markDirty() {
	c.mu.Lock()
	c.dirty = true
	c.mu.Unlock()
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- slotsDesc
	ch <- workflowsDesc
	ch <- loadErrorsDesc
	ch <- loadingDesc
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if (c.dirty && time.Since(c.counted) >= recountEvery) || c.readChanged() {
		c.recount()
	}
	for _, st := range slot.Statuses {
		ch <- prometheus.MustNewConstMetric(slotsDesc, prometheus.GaugeValue, float64(c.counts[st]), string(st))
	}
	ch <- prometheus.MustNewConstMetric(workflowsDesc, prometheus.GaugeValue, float64(c.running), "false")
	ch <- prometheus.MustNewConstMetric(workflowsDesc, prometheus.GaugeValue, float64(c.paused), "true")
	ch <- prometheus.MustNewConstMetric(loadErrorsDesc, prometheus.GaugeValue, float64(c.loadErrs))
	ch <- prometheus.MustNewConstMetric(loadingDesc, prometheus.GaugeValue, float64(c.unread))
}

// readChanged reports whether a background read ended since a count that
// left workflows out, or began since a count that left none out (POST
// /clear-cache dropped the state read): the next scrape then counts
// again, not only after recountEvery, so that celos_workflows_loading is
// not 0 over counts the store no longer holds, nor above 0 for long after
// the read.
func (c *stateCollector) readChanged() bool {
	l := c.loading()
	reading := l != nil && l.Loading()
	return reading != (c.unread > 0)
}

func (c *stateCollector) recount() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := c.now()
	c.counts = make(map[slot.Status]int, len(slot.Statuses))
	c.running, c.paused = 0, 0
	ids := c.svc.WorkflowIDs()
	// The workflows the background read has not read yet are left out
	// (counted in unread): reading them here would read every file of a
	// large installation at once, before the read does.
	var unread map[string]bool
	if l := c.loading(); l != nil {
		unread = l.Unread(ids)
	}
	c.unread = len(unread)
	for _, id := range ids {
		if p, err := c.svc.Paused(id); err == nil && p {
			c.paused++
		} else {
			c.running++
		}
		if unread[id] {
			continue
		}
		wf, err := c.svc.Workflow(id)
		if err != nil {
			continue
		}
		start := now.Add(-scheduler.Window)
		if start.Before(wf.StartTime) {
			start = wf.StartTime
		}
		states, err := c.svc.Slots(ctx, id, start, now)
		if err != nil {
			continue
		}
		for _, s := range states {
			if s.Unreadable == nil { // no status (the state database's problems count it)
				c.counts[s.Status]++
			}
		}
	}
	c.loadErrs = len(c.svc.LoadErrors())
	c.dirty = c.unread > 0 // partial: counted again once more is read
	c.counted = time.Now()
}
