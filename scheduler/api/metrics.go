package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/celos-go/celos/scheduler"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// Metrics are the Prometheus metrics served at /metrics, all named celos_*:
//
//	celos_step_duration_seconds            histogram of scheduler steps
//	celos_steps_total{result}              steps, ok or error
//	celos_last_step_timestamp_seconds      when the last step finished
//	celos_slots{status}                    slots in the 7-day window per status
//	celos_workflows{paused}                loaded workflows
//	celos_workflow_load_errors             workflows files that did not load
//	celos_slot_transitions_total{status}   slot transitions made by steps, by status entered
//	celos_slot_errors_total{operation}     slots a step left as they were because something
//	                                       could not answer (trigger, submit, status, ...)
//	celos_state_writes_total               state database files written or removed by steps
//	celos_submissions_total{service}       jobs submitted to an external service
//	celos_job_failures_total{service}      jobs an external service reported failed
//	celos_external_service_errors_total{service,operation}
//	                                       calls to an external service that failed
//	celos_step_running_seconds             how long the oldest step in flight has run (0: none)
//	celos_step_timeout_seconds             the bound of a step (/healthz fails past it)
//	celos_http_requests_total{path,method,code}
//	celos_http_request_duration_seconds{path}
//
// plus the Go runtime and process collectors.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler

	stepDuration  prometheus.Histogram
	steps         *prometheus.CounterVec
	lastStep      prometheus.Gauge
	transitions   *prometheus.CounterVec
	slotErrors    *prometheus.CounterVec
	writes        prometheus.Counter
	submissions   *prometheus.CounterVec
	jobFailures   *prometheus.CounterVec
	serviceErrors *prometheus.CounterVec
	requests      *prometheus.CounterVec
	requestTime   *prometheus.HistogramVec

	once  sync.Once
	state *stateCollector

	// The steps in flight, by a sequence number: when each started (by
	// clock) and its step time. clock and stepTimeout are set by observe.
	stepMu      sync.Mutex
	stepSeq     uint64
	inFlight    map[uint64]stepRun
	clock       func() time.Time
	stepTimeout time.Duration
}

// stepRun is a step in flight.
type stepRun struct {
	started time.Time // by the handler's clock
	at      time.Time // the step's time (simulated or now)
}

// NewMetrics returns a fresh registry with the celos metrics.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.stepDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "celos_step_duration_seconds",
		Help:    "Duration of scheduler steps.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	})
	m.steps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "celos_steps_total",
		Help: "Scheduler steps run, by result (ok or error).",
	}, []string{"result"})
	m.lastStep = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "celos_last_step_timestamp_seconds",
		Help: "Unix time at which the last scheduler step finished.",
	})
	m.transitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "celos_slot_transitions_total",
		Help: "Slot transitions made by scheduler steps, by the status entered.",
	}, []string{"status"})
	m.slotErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "celos_slot_errors_total",
		Help: "Slots a step left as they were because something could not answer, by operation (trigger, submit, status, ...).",
	}, []string{"operation"})
	m.writes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "celos_state_writes_total",
		Help: "State database files written or removed by scheduler steps.",
	})
	m.submissions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "celos_submissions_total",
		Help: "Jobs submitted to an external service, by service type.",
	}, []string{"service"})
	m.jobFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "celos_job_failures_total",
		Help: "Job status polls that reported a finished, failed job, by service type.",
	}, []string{"service"})
	m.serviceErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "celos_external_service_errors_total",
		Help: "Calls to an external service that returned an error, by service type and operation.",
	}, []string{"service", "operation"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "celos_http_requests_total",
		Help: "HTTP API requests, by path, method and status code.",
	}, []string{"path", "method", "code"})
	m.requestTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "celos_http_request_duration_seconds",
		Help:    "HTTP API request latency, by path.",
		Buckets: prometheus.DefBuckets,
	}, []string{"path"})
	m.inFlight = make(map[uint64]stepRun)
	running := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "celos_step_running_seconds",
		Help: "How long the oldest scheduler step in flight has been running, 0 when none is; /healthz fails once it exceeds celos_step_timeout_seconds.",
	}, func() float64 {
		_, d, ok := m.oldestStep()
		if !ok {
			return 0
		}
		return d.Seconds()
	})
	bound := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "celos_step_timeout_seconds",
		Help: "The bound of a scheduler step (--step-timeout).",
	}, func() float64 {
		m.stepMu.Lock()
		defer m.stepMu.Unlock()
		return m.stepTimeout.Seconds()
	})
	m.reg.MustRegister(running, bound)
	m.reg.MustRegister(m.stepDuration, m.steps, m.lastStep, m.transitions, m.slotErrors, m.writes, m.submissions, m.jobFailures,
		m.serviceErrors, m.requests, m.requestTime,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

// Registry is where more collectors may be registered (the HDFS client's
// RPC counters, say).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

func (m *Metrics) stepDone(took time.Duration, err error) {
	m.stepDuration.Observe(took.Seconds())
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.steps.WithLabelValues(result).Inc()
	m.lastStep.SetToCurrentTime()
	m.changed()
}

// RecordStep counts what a step did, from the engine's step report: the
// transitions by status entered, the slots left as they were by the
// operation that failed, and the state files written.
func (m *Metrics) RecordStep(transitions map[slot.Status]int, errs map[string]int, writes int64) {
	for st, n := range transitions {
		m.transitions.WithLabelValues(string(st)).Add(float64(n))
	}
	for op, n := range errs {
		m.slotErrors.WithLabelValues(op).Add(float64(n))
	}
	if writes > 0 {
		m.writes.Add(float64(writes))
	}
}

func (m *Metrics) request(path, method string, code int, took time.Duration) {
	switch method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodHead:
	default:
		method = "other"
	}
	m.requests.WithLabelValues(path, method, strconv.Itoa(code)).Inc()
	m.requestTime.WithLabelValues(path).Observe(took.Seconds())
}

// changed tells the slot-state gauges that slots may have changed.
func (m *Metrics) changed() {
	if m.state != nil {
		m.state.markDirty()
	}
}

// observe registers the collector of per-status slot counts over svc, and
// sets the clock and the bound of the steps in flight; a Metrics observes
// one service.
func (m *Metrics) observe(svc scheduler.Service, now func() time.Time, stepTimeout time.Duration) {
	m.once.Do(func() {
		m.state = &stateCollector{svc: svc, now: now, dirty: true}
		m.reg.MustRegister(m.state)
		m.stepMu.Lock()
		m.clock, m.stepTimeout = now, stepTimeout
		m.stepMu.Unlock()
	})
}

// stepStarted records a step (at step time at) in flight; stepEnded, given
// what stepStarted returned, removes it.
func (m *Metrics) stepStarted(at time.Time) uint64 {
	m.stepMu.Lock()
	defer m.stepMu.Unlock()
	m.stepSeq++
	started := time.Now()
	if m.clock != nil {
		started = m.clock()
	}
	m.inFlight[m.stepSeq] = stepRun{started: started, at: at}
	return m.stepSeq
}

func (m *Metrics) stepEnded(key uint64) {
	m.stepMu.Lock()
	defer m.stepMu.Unlock()
	delete(m.inFlight, key)
}

// oldestStep returns the step in flight that started first and how long it
// has been running; ok is false when none is.
func (m *Metrics) oldestStep() (run stepRun, running time.Duration, ok bool) {
	m.stepMu.Lock()
	defer m.stepMu.Unlock()
	for _, r := range m.inFlight {
		if !ok || r.started.Before(run.started) {
			run, ok = r, true
		}
	}
	if !ok {
		return stepRun{}, 0, false
	}
	now := time.Now()
	if m.clock != nil {
		now = m.clock()
	}
	running = now.Sub(run.started)
	if running < 0 {
		running = 0
	}
	return run, running, true
}

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

// InstrumentServices wraps each external service so that its submissions,
// failed jobs and errors are counted under its type (the map's key).
func (m *Metrics) InstrumentServices(svcs map[string]external.Service) map[string]external.Service {
	out := make(map[string]external.Service, len(svcs))
	for typ, s := range svcs {
		out[typ] = m.instrument(typ, s)
	}
	return out
}

func (m *Metrics) instrument(typ string, s external.Service) external.Service {
	in := &instrumented{Service: s, typ: typ, m: m}
	if r, ok := s.(external.Recoverer); ok {
		return &instrumentedRecoverer{instrumented: in, r: r}
	}
	return in
}

// instrumented counts calls to an external service.
type instrumented struct {
	external.Service
	typ string
	m   *Metrics
}

func (s *instrumented) fail(op string, err error) {
	if err != nil && !errors.Is(err, context.Canceled) {
		s.m.serviceErrors.WithLabelValues(s.typ, op).Inc()
	}
}

func (s *instrumented) Submit(ctx context.Context, w *workflow.Workflow, id slot.ID) (string, error) {
	x, err := s.Service.Submit(ctx, w, id)
	s.fail("submit", err)
	if err == nil {
		s.m.submissions.WithLabelValues(s.typ).Inc()
	}
	return x, err
}

func (s *instrumented) Status(ctx context.Context, w *workflow.Workflow, externalID string) (external.Status, error) {
	st, err := s.Service.Status(ctx, w, externalID)
	s.fail("status", err)
	if err == nil && !st.Running && !st.Success {
		s.m.jobFailures.WithLabelValues(s.typ).Inc()
	}
	return st, err
}

func (s *instrumented) Kill(ctx context.Context, w *workflow.Workflow, externalID string) error {
	err := s.Service.Kill(ctx, w, externalID)
	s.fail("kill", err)
	return err
}

// Unwrap returns the wrapped service (for optional interfaces a caller
// looks for beyond the ones forwarded here).
func (s *instrumented) Unwrap() external.Service { return s.Service }

// instrumentedRecoverer also forwards external.Recoverer, which the engine
// looks for after a crash between submit and record.
type instrumentedRecoverer struct {
	*instrumented
	r external.Recoverer
}

func (s *instrumentedRecoverer) Recover(ctx context.Context, w *workflow.Workflow, id slot.ID, since time.Time) (string, bool, error) {
	x, found, err := s.r.Recover(ctx, w, id, since)
	s.fail("recover", err)
	return x, found, err
}
