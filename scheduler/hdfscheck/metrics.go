package hdfscheck

import "github.com/prometheus/client_golang/prometheus"

// Collector exports Stats as Prometheus counters (celos_hdfs_rpcs_total,
// celos_hdfs_errors_total, celos_hdfs_connects_total), for the server's
// /metrics registry.
func (f *FS) Collector() prometheus.Collector { return collector{f} }

type collector struct{ f *FS }

var (
	rpcsDesc     = prometheus.NewDesc("celos_hdfs_rpcs_total", "getFileInfo RPCs sent to NameNodes by hdfsCheck triggers.", nil, nil)
	errorsDesc   = prometheus.NewDesc("celos_hdfs_errors_total", "hdfsCheck existence checks that failed (NameNode unreachable, refused, ...).", nil, nil)
	connectsDesc = prometheus.NewDesc("celos_hdfs_connects_total", "Connections made to HDFS file systems (first ones and reconnections).", nil, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- rpcsDesc
	ch <- errorsDesc
	ch <- connectsDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	st := c.f.Stats()
	ch <- prometheus.MustNewConstMetric(rpcsDesc, prometheus.CounterValue, float64(st.Calls))
	ch <- prometheus.MustNewConstMetric(errorsDesc, prometheus.CounterValue, float64(st.Errors))
	ch <- prometheus.MustNewConstMetric(connectsDesc, prometheus.CounterValue, float64(st.Connects))
}
