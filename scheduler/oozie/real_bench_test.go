package oozie_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/oozietest"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// bulkProject is 50 hourly slots (startTime 49 hours before t20) of one
// workflow running the application app, all submitted in one step
// (concurrency 50).
func bulkProject(id, app string) *workflow.Project {
	w := fixture.Hourly(id)
	w.SchedulingStrategy.Concurrency = 50
	w.ExternalService = fixture.Oozie(map[string]string{
		"oozie.wf.application.path": "${nameNode}/real/app/" + app,
		"outputDir":                 "/real/output/" + id + "/${year}${month}${day}${hour}",
	})
	w.StartTime = t20.Add(-49 * time.Hour)
	return fixture.Project(id, w)
}

func bulkSlots() []time.Time {
	var ts []time.Time
	for i := range 50 {
		ts = append(ts, t20.Add(time.Duration(i-49)*time.Hour))
	}
	return ts
}

// BenchmarkRealOozie50Slots runs 50 slots through the real Oozie: the
// submit step (50 submissions), then steps until all are SUCCESS,
// reporting each slot's latency from the submit step to the step that saw
// it SUCCESS; then 50 jobs held RUNNING (the wait action), reporting the
// step time while celos polls them.
//
//	go test -run '^$' -bench RealOozie50Slots -benchtime 1x ./scheduler/oozie/
func BenchmarkRealOozie50Slots(b *testing.B) {
	env := oozietest.Shared(b)
	now := t20.Add(30 * time.Minute)
	for i := range b.N {
		r := newRealProject(b, env, bulkProject(fmt.Sprintf("bulk%d", i), "touch"))
		r.step(now) // WAITING -> READY
		began := time.Now()
		r.step(now) // READY -> RUNNING: 50 submissions
		submit := time.Since(began)
		done := map[time.Time]time.Duration{}
		var steps []time.Duration
		for len(done) < 50 {
			if time.Since(began) > 5*time.Minute {
				b.Fatalf("%d of 50 slots SUCCESS after 5 minutes", len(done))
			}
			time.Sleep(100 * time.Millisecond)
			s := time.Now()
			r.step(now)
			steps = append(steps, time.Since(s))
			for _, t := range bulkSlots() {
				if _, ok := done[t]; !ok {
					switch st := r.state(r.engine.WorkflowIDs()[0], t); st.Status {
					case slot.Success:
						done[t] = time.Since(began)
					case slot.Running:
					default:
						b.Fatalf("slot %s is %s", slot.FormatTime(t), st.Status)
					}
				}
			}
		}
		lat := make([]time.Duration, 0, 50)
		for _, d := range done {
			lat = append(lat, d)
		}
		slices.Sort(lat)
		b.ReportMetric(submit.Seconds()*1000, "ms/submit-step")
		b.ReportMetric(lat[24].Seconds(), "s/slot-p50")
		b.ReportMetric(lat[49].Seconds(), "s/slot-max")
		b.Logf("50 slots: submit step %v; submit to SUCCESS p50 %v, max %v; %d polling steps, median %v",
			submit.Round(time.Millisecond), lat[24].Round(time.Millisecond), lat[49].Round(time.Millisecond), len(steps), median(steps))

		// 50 jobs RUNNING: the step time of polling them.
		h := newRealProject(b, env, bulkProject(fmt.Sprintf("hold%d", i), "wait"))
		h.step(now)
		h.step(now)
		deadline := time.Now().Add(2 * time.Minute)
		for _, t := range bulkSlots() {
			for h.state(h.engine.WorkflowIDs()[0], t).Status != slot.Running {
				if time.Now().After(deadline) {
					b.Fatalf("slot %s not RUNNING", slot.FormatTime(t))
				}
				h.step(now)
			}
		}
		var poll []time.Duration
		for range 10 {
			s := time.Now()
			h.step(now)
			poll = append(poll, time.Since(s))
		}
		b.ReportMetric(median(poll).Seconds()*1000, "ms/step-50-running")
		b.Logf("step while 50 Oozie jobs are RUNNING: median %v of 10 (min %v, max %v)", median(poll), slices.Min(poll), slices.Max(poll))
		for hr := range 24 {
			h.release(fmt.Sprintf("%02d", hr))
		}
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond)
}
