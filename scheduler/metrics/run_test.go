package metrics

import (
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The pool gauges follow the last step: a pool that is no longer defined
// disappears; SLA misses and notification outcomes count up.
func TestRunMetrics(t *testing.T) {
	m := New()
	m.RecordPools(map[string]PoolUse{"etl": {Limit: 4, Running: 3, Waiting: 2}, "old": {Limit: 1}})
	m.RecordPools(map[string]PoolUse{"etl": {Limit: 4, Running: 4, Waiting: 1}})
	m.SLAMissed("wf")
	m.SLAMissed("wf")
	m.Notification("failure", "delivered")
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		name := mf.GetName()
		if !strings.HasPrefix(name, "celos_pool") && name != "celos_sla_missed_total" && name != "celos_notifications_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			var labels []string
			for _, l := range mt.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := mt.GetGauge().GetValue() + mt.GetCounter().GetValue()
			got = append(got, name+"{"+strings.Join(labels, ",")+"} "+strings.TrimRight(strings.TrimRight(strconvF(v), "0"), "."))
		}
	}
	sort.Strings(got)
	want := []string{
		"celos_notifications_total{event=failure,result=delivered} 1",
		"celos_pool_limit{pool=etl} 4",
		"celos_pool_running{pool=etl} 4",
		"celos_pool_waiting{pool=etl} 1",
		"celos_sla_missed_total{workflow=wf} 2",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("metrics (-want +got):\n%s", d)
	}
}

func strconvF(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
