package metrics

// The metrics of pools, SLAs and notifications (issue 14):
//
//	celos_pool_limit{pool}                 a pool's limit (the pools file)
//	celos_pool_running{pool}               its slots RUNNING after the last step's submissions
//	celos_pool_waiting{pool}               its READY slots the last step held because it was full
//	celos_sla_missed_total{workflow}       slots that missed their SLA
//	celos_notifications_total{event,result}
//	                                       webhook delivery attempts by outcome
//	                                       (delivered, retried, failed, kept, dropped)

import (
	"github.com/prometheus/client_golang/prometheus"
)

// runMetrics are the collectors of this file.
type runMetrics struct {
	poolLimit, poolRunning, poolWaiting *prometheus.GaugeVec
	slaMissed                           *prometheus.CounterVec
	notifications                       *prometheus.CounterVec
}

func newRunMetrics(reg *prometheus.Registry) *runMetrics {
	r := &runMetrics{
		poolLimit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "celos_pool_limit",
			Help: "A pool's limit on running slots across its workflows (celos server --pools).",
		}, []string{"pool"}),
		poolRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "celos_pool_running",
			Help: "A pool's slots RUNNING when the last step began plus those it submitted.",
		}, []string{"pool"}),
		poolWaiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "celos_pool_waiting",
			Help: "A pool's READY slots that the last step held because the pool was full.",
		}, []string{"pool"}),
		slaMissed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "celos_sla_missed_total",
			Help: "Slots that missed their SLA (not SUCCESS successWithinSeconds after the slot time), by workflow.",
		}, []string{"workflow"}),
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "celos_notifications_total",
			Help: "Webhook delivery attempts, by event and outcome (delivered, retried, failed, kept, dropped).",
		}, []string{"event", "result"}),
	}
	reg.MustRegister(r.poolLimit, r.poolRunning, r.poolWaiting, r.slaMissed, r.notifications)
	return r
}

// PoolUse is one pool's use after a step.
type PoolUse struct{ Limit, Running, Waiting int }

// RecordPools sets the pool gauges to the last step's use; pools no longer
// defined disappear.
func (m *Metrics) RecordPools(pools map[string]PoolUse) {
	m.run.poolLimit.Reset()
	m.run.poolRunning.Reset()
	m.run.poolWaiting.Reset()
	for name, u := range pools {
		m.run.poolLimit.WithLabelValues(name).Set(float64(u.Limit))
		m.run.poolRunning.WithLabelValues(name).Set(float64(u.Running))
		m.run.poolWaiting.WithLabelValues(name).Set(float64(u.Waiting))
	}
}

// SLAMissed counts a slot of workflow wf that missed its SLA.
func (m *Metrics) SLAMissed(wf string) { m.run.slaMissed.WithLabelValues(wf).Inc() }

// Notification counts a webhook delivery attempt's outcome.
func (m *Metrics) Notification(event, result string) {
	m.run.notifications.WithLabelValues(event, result).Inc()
}
