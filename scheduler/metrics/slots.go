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
	slotsDesc      = prometheus.NewDesc("celos_slots", "Slots in the 7-day window, by status (recounted after a step, rerun, kill or pause, at most every 15 s).", []string{"status"}, nil)
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
// between steps cost nothing.
type stateCollector struct {
	svc scheduler.Service
	now func() time.Time

	mu       sync.Mutex
	dirty    bool
	counted  time.Time // wall clock of the last recount
	counts   map[slot.Status]int
	running  int
	paused   int
	loadErrs int
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
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirty && time.Since(c.counted) >= recountEvery {
		c.recount()
	}
	for _, st := range slot.Statuses {
		ch <- prometheus.MustNewConstMetric(slotsDesc, prometheus.GaugeValue, float64(c.counts[st]), string(st))
	}
	ch <- prometheus.MustNewConstMetric(workflowsDesc, prometheus.GaugeValue, float64(c.running), "false")
	ch <- prometheus.MustNewConstMetric(workflowsDesc, prometheus.GaugeValue, float64(c.paused), "true")
	ch <- prometheus.MustNewConstMetric(loadErrorsDesc, prometheus.GaugeValue, float64(c.loadErrs))
}

func (c *stateCollector) recount() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := c.now()
	c.counts = make(map[slot.Status]int, len(slot.Statuses))
	c.running, c.paused = 0, 0
	for _, id := range c.svc.WorkflowIDs() {
		if p, err := c.svc.Paused(id); err == nil && p {
			c.paused++
		} else {
			c.running++
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
			c.counts[s.Status]++
		}
	}
	c.loadErrs = len(c.svc.LoadErrors())
	c.dirty = false
	c.counted = time.Now()
}
