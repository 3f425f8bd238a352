// Package metrics holds the Prometheus metrics of `celos server` (all
// named celos_*, served by the HTTP API at /metrics) and the decorator of
// external services that counts their calls. It sits below the transports:
// the API and the step loop record into a Metrics; it knows neither.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"
)

// Metrics are the Prometheus metrics served at /metrics, all named celos_*:
//
//	celos_step_duration_seconds            histogram of scheduler steps
//	celos_steps_total{result}              steps, ok or error
//	celos_last_step_timestamp_seconds      when the last step finished
//	celos_slots{status}                    slots in the 7-day window per status
//	celos_workflows{paused}                loaded workflows
//	celos_workflow_load_errors             workflows files that did not load
//	celos_workflows_loading                workflows whose state was still being read at the
//	                                       last count, left out of celos_slots
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
//	celos_pool_limit{pool}, celos_pool_running{pool}, celos_pool_waiting{pool}
//	celos_sla_missed_total{workflow}
//	celos_notifications_total{event,result}  (see run.go)
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
	run   *runMetrics // pools, SLAs, notifications (run.go)

	// The steps in flight, by a sequence number: when each started (by
	// clock) and its step time. clock and stepTimeout are set by observe.
	stepMu      sync.Mutex
	stepSeq     uint64
	inFlight    map[uint64]StepRun
	clock       func() time.Time
	stepTimeout time.Duration
	loading     Loading // guarded by stepMu (StateLoading)
}

// StepRun is a step in flight.
type StepRun struct {
	Started time.Time // by the clock given to Observe
	At      time.Time // the step's time (simulated or now)
}

// New returns a fresh registry with the celos metrics.
func New() *Metrics {
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
	m.inFlight = make(map[uint64]StepRun)
	running := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "celos_step_running_seconds",
		Help: "How long the oldest scheduler step in flight has been running, 0 when none is; /healthz fails once it exceeds celos_step_timeout_seconds.",
	}, func() float64 {
		_, d, ok := m.OldestStep()
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
	m.run = newRunMetrics(m.reg)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

// Registry is where more collectors may be registered (the HDFS client's
// RPC counters, say).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format (GET /metrics).
func (m *Metrics) Handler() http.Handler { return m.handler }

// StepDone records a finished step: its duration, its result (ok or
// error) and when it ended; the slot-state gauges are recounted at the
// next scrape.
func (m *Metrics) StepDone(took time.Duration, err error) {
	m.stepDuration.Observe(took.Seconds())
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.steps.WithLabelValues(result).Inc()
	m.lastStep.SetToCurrentTime()
	m.Changed()
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

// Request counts an HTTP API request by path (the route, or "other"),
// method and status code, and observes its latency.
func (m *Metrics) Request(path, method string, code int, took time.Duration) {
	switch method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodHead:
	default:
		method = "other"
	}
	m.requests.WithLabelValues(path, method, strconv.Itoa(code)).Inc()
	m.requestTime.WithLabelValues(path).Observe(took.Seconds())
}

// Changed tells the slot-state gauges that slots may have changed.
func (m *Metrics) Changed() {
	if m.state != nil {
		m.state.markDirty()
	}
}

// Observe registers the collector of per-status slot counts over svc, and
// sets the clock and the bound of the steps in flight; a Metrics observes
// one service (later calls do nothing).
func (m *Metrics) Observe(svc scheduler.Service, now func() time.Time, stepTimeout time.Duration) {
	m.once.Do(func() {
		m.state = &stateCollector{svc: svc, now: now, dirty: true, loading: m.stateLoading}
		m.reg.MustRegister(m.state)
		m.stepMu.Lock()
		m.clock, m.stepTimeout = now, stepTimeout
		m.stepMu.Unlock()
	})
}

// StateLoading tells the slot-state gauges which workflows' state the
// store is still reading in the background (the file store after a
// start): they are left out of celos_slots and counted in
// celos_workflows_loading instead of being read by a scrape.
func (m *Metrics) StateLoading(l Loading) {
	m.stepMu.Lock()
	defer m.stepMu.Unlock()
	m.loading = l
}

func (m *Metrics) stateLoading() Loading {
	m.stepMu.Lock()
	defer m.stepMu.Unlock()
	return m.loading
}

// StepStarted records a step (at step time at) in flight; StepEnded, given
// what StepStarted returned, removes it.
func (m *Metrics) StepStarted(at time.Time) uint64 {
	m.stepMu.Lock()
	defer m.stepMu.Unlock()
	m.stepSeq++
	started := time.Now()
	if m.clock != nil {
		started = m.clock()
	}
	m.inFlight[m.stepSeq] = StepRun{Started: started, At: at}
	return m.stepSeq
}

func (m *Metrics) StepEnded(key uint64) {
	m.stepMu.Lock()
	defer m.stepMu.Unlock()
	delete(m.inFlight, key)
}

// OldestStep returns the step in flight that started first and how long it
// has been running; ok is false when none is.
func (m *Metrics) OldestStep() (run StepRun, running time.Duration, ok bool) {
	m.stepMu.Lock()
	defer m.stepMu.Unlock()
	for _, r := range m.inFlight {
		if !ok || r.Started.Before(run.Started) {
			run, ok = r, true
		}
	}
	if !ok {
		return StepRun{}, 0, false
	}
	now := time.Now()
	if m.clock != nil {
		now = m.clock()
	}
	running = now.Sub(run.Started)
	if running < 0 {
		running = 0
	}
	return run, running, true
}
