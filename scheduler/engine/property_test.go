package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
	"pgregory.net/rapid"
)

// tb adapts *rapid.T to what the rig needs.
type tb struct {
	*rapid.T
	cleanups []func()
}

func (t *tb) TempDir() string {
	d, err := os.MkdirTemp("", "celos-prop-*")
	if err != nil {
		t.Fatal(err)
	}
	t.cleanups = append(t.cleanups, func() { os.RemoveAll(d) })
	return d
}
func (t *tb) Cleanup(f func()) { t.cleanups = append(t.cleanups, f) }
func (t *tb) done() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

// allStates returns every stored state of wf, by time.
func allStates(t tlike, db rigDB, wf string) map[time.Time]slot.State {
	sts, err := db.Range(wf, time.Unix(0, 0), time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[time.Time]slot.State, len(sts))
	for _, s := range sts {
		m[s.ID.Time] = s
	}
	return m
}

// TestEngineProperties drives a real engine (real state database in a temp
// dir, fake service) through random steps, clock jumps, job outcomes,
// service outages, reruns and kills, and checks after every step:
//   - no slot leaves a final state except by rerun;
//   - every change a step makes is one of Celos's transitions (or a
//     submission READY → RUNNING), at most one per slot;
//   - RUNNING slots never exceed the concurrency;
//
// and at the end, with the service healthy and jobs succeeding, that a slot
// rerun outside the window is stepped until final and that every slot of
// the window old enough for its trigger ends final (nothing is skipped by
// the engine's done marks).
func TestEngineProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		t := &tb{T: rt}
		defer t.done()
		w := fixture.Hourly("wf")
		// Every 6 hours: 28 slots in the window keeps a check fast.
		w.Schedule.Cron = "0 0 */6 * * ?"
		start := ts("2024-01-01T00:00Z")
		w.StartTime = start
		w.SchedulingStrategy.Concurrency = rapid.IntRange(1, 3).Draw(rt, "concurrency")
		w.MaxRetryCount = rapid.IntRange(0, 2).Draw(rt, "maxRetry")
		w.WaitTimeoutSeconds = rapid.SampledFrom([]int64{workflow.NeverTimeout, 3 * 3600}).Draw(rt, "timeout")
		delay := rapid.SampledFrom([]int64{0, 1800, 5400}).Draw(rt, "delay")
		w.Trigger = workflow.Trigger{Type: workflow.TriggerDelay, Seconds: delay}
		r := newRig(t, nil, w)
		ctx := context.Background()
		now := start.Add(time.Duration(rapid.IntRange(1, 5).Draw(rt, "now0")) * time.Hour)
		reran := map[time.Time]bool{}

		pickStored := func(label string) (slot.State, bool) {
			all := allStates(t, r.db, "wf")
			if len(all) == 0 {
				return slot.State{}, false
			}
			var list []slot.State
			for _, s := range all {
				list = append(list, s)
			}
			sort.Slice(list, func(i, j int) bool { return list[i].ID.Time.Before(list[j].ID.Time) })
			return rapid.SampledFrom(list).Draw(rt, label), true
		}

		for range rapid.IntRange(1, 40).Draw(rt, "actions") {
			switch rapid.IntRange(0, 9).Draw(rt, "action") {
			case 0, 1, 2, 3:
				before := allStates(t, r.db, "wf")
				if err := r.e.Step(ctx, now, nil); err != nil {
					t.Fatal(err)
				}
				after := allStates(t, r.db, "wf")
				running := 0
				for tm, a := range after {
					if a.Status == slot.Running {
						running++
					}
					b, ok := before[tm]
					if !ok {
						b = slot.NewWaiting(a.ID)
					}
					if a == b {
						continue
					}
					if b.Status.Final() {
						t.Fatalf("final slot changed by a step: %v → %v", b, a)
					}
					submitted := b.Status == slot.Ready && a.Status == slot.Running && a.RetryCount == b.RetryCount && a.ExternalID != ""
					if !submitted && !legal(b, a) {
						t.Fatalf("illegal step transition %v → %v", b, a)
					}
				}
				if running > w.SchedulingStrategy.Concurrency {
					t.Fatalf("%d RUNNING slots, concurrency %d", running, w.SchedulingStrategy.Concurrency)
				}
			case 4:
				now = now.Add(time.Duration(rapid.IntRange(0, 12*3600).Draw(rt, "advance")) * time.Second)
			case 5:
				if rapid.IntRange(0, 4).Draw(rt, "bigjump") == 0 {
					now = now.Add(8 * 24 * time.Hour)
				}
			case 6:
				r.svc.mu.Lock()
				for _, j := range r.svc.jobs {
					if j.status.Running && rapid.Bool().Draw(rt, "finish") {
						j.status = external.Status{Success: rapid.Bool().Draw(rt, "success")}
					}
				}
				r.svc.mu.Unlock()
			case 7:
				down := rapid.Bool().Draw(rt, "down")
				r.svc.mu.Lock()
				if down {
					r.svc.submitErr, r.svc.statusErr = external.ErrUnavailable, external.ErrUnavailable
				} else {
					r.svc.submitErr, r.svc.statusErr = nil, nil
				}
				r.svc.mu.Unlock()
			case 8:
				if s, ok := pickStored("rerun"); ok {
					err := r.e.Rerun(ctx, s.ID, now)
					if s.Status.Final() != (err == nil) {
						t.Fatalf("rerun of %v: %v", s, err)
					}
					if err == nil {
						reran[s.ID.Time] = true
					}
				}
			case 9:
				if s, ok := pickStored("kill"); ok {
					r.svc.mu.Lock()
					r.svc.killErr = nil
					r.svc.mu.Unlock()
					err := r.e.Kill(ctx, s.ID)
					if s.Status.Final() != errors.Is(err, slot.ErrIllegalTransition) {
						t.Fatalf("kill of %v: %v", s, err)
					}
				}
			}
		}

		// Heal: service up, every job succeeds; steps until quiet.
		r.svc.mu.Lock()
		r.svc.submitErr, r.svc.statusErr = nil, nil
		r.svc.mu.Unlock()
		for _, s := range allStates(t, r.db, "wf") {
			if reran[s.ID.Time] && s.Status.Final() && s.ID.Time.Before(now.Add(-scheduler.Window)) && rapid.Bool().Draw(rt, "rerunOld") {
				if err := r.e.Rerun(ctx, s.ID, now); err != nil {
					t.Fatal(err)
				}
			}
		}
		var pending []slot.State
		for range 1000 {
			r.svc.finishAll(true)
			if err := r.e.Step(ctx, now, nil); err != nil {
				t.Fatal(err)
			}
			pending = pending[:0]
			for _, s := range allStates(t, r.db, "wf") {
				if !s.Status.Final() && (s.Status == slot.Running || reran[s.ID.Time] || !s.ID.Time.Before(now.Add(-scheduler.Window))) {
					pending = append(pending, s)
				}
			}
			if len(pending) == 0 {
				break
			}
		}
		if len(pending) > 0 {
			t.Fatalf("slots never became final (now %v, last step %+v, problems %v): %v", now, r.e.LastStep(), r.e.Problems(""), pending)
		}
		// Every window slot old enough for its trigger is final.
		ws := windowStart(&w, now)
		for _, tm := range (mustCron(t, w.Schedule.Cron)).Times(ws, now.Add(-time.Duration(delay+1)*time.Second)) {
			if s := r.state("wf", tm); !s.Status.Final() {
				t.Fatalf("window slot %v never stepped to final (now %v)", s, now)
			}
		}
	})
}

func mustCron(t tlike, expr string) interface {
	Times(a, b time.Time) []time.Time
} {
	s, err := newCron(expr)
	if err != nil {
		t.Fatal(fmt.Sprint(err))
	}
	return s
}
