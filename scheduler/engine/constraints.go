package engine

// Run constraints: the pure check of a workflow's constraints
// (CheckConstraints, used by Decide) and the submission times it counts
// (runsOf, kept by the engine).

import (
	"fmt"
	"time"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// CheckConstraints says why the run constraints c keep a slot from being
// submitted at now, or "" when they let it. runs are the workflow's
// submission times, oldest first. It is a pure function.
func CheckConstraints(c *workflow.Constraints, now time.Time, runs []time.Time) string {
	if tw := c.TimeWindow; tw != nil && !tw.Contains(now) {
		// (The same words at every step: a hold is logged when it changes.)
		return fmt.Sprintf("outside the time window %s–%s %s", tw.From, tw.To, zoneName(tw.TimeZone))
	}
	if c.MinIntervalSeconds > 0 && len(runs) > 0 {
		last := runs[len(runs)-1]
		next := last.Add(time.Duration(c.MinIntervalSeconds) * time.Second)
		if now.Before(next) {
			return fmt.Sprintf("minInterval %s: the last submission was at %s, the next may be at %s", seconds(c.MinIntervalSeconds), slot.FormatTime(last), slot.FormatTime(next))
		}
	}
	if m := c.MaxRuns; m != nil {
		period := time.Duration(m.PeriodSeconds) * time.Second
		n, first := 0, -1
		for i, r := range runs {
			if now.Sub(r) < period {
				if first < 0 {
					first = i
				}
				n++
			}
		}
		if n >= m.Count {
			// The next place frees when the (n-count+1)th of them ages out.
			next := runs[first+n-m.Count].Add(period)
			return fmt.Sprintf("maxRuns %d per %s: %d submissions in the last %s, the next may be at %s", m.Count, seconds(m.PeriodSeconds), n, seconds(m.PeriodSeconds), slot.FormatTime(next))
		}
	}
	return ""
}

// constraintTimedOut reports whether the constraints' timeout, from the
// slot time, has passed at now.
func constraintTimedOut(c *workflow.Constraints, slotTime, now time.Time) bool {
	if c.TimeoutSeconds >= workflow.NeverTimeout {
		return false
	}
	return now.After(slotTime.Add(time.Duration(c.TimeoutSeconds) * time.Second))
}

func zoneName(z string) string {
	if z == "" {
		return "UTC"
	}
	return z
}

// seconds writes a duration of whole seconds as Go does (4h0m0s → 4h).
func seconds(s int64) string {
	d := (time.Duration(s) * time.Second).String()
	for _, suffix := range []string{"m0s", "h0m"} {
		if len(d) > len(suffix) && d[len(d)-len(suffix):] == suffix {
			d = d[:len(d)-len(suffix)+1]
		}
	}
	return d
}

// runLookback is how far back the submissions of a workflow with
// constraints c matter (0: they do not).
func runLookback(c *workflow.Constraints) time.Duration {
	if c == nil {
		return 0
	}
	d := time.Duration(c.MinIntervalSeconds) * time.Second
	if c.MaxRuns != nil {
		d = max(d, time.Duration(c.MaxRuns.PeriodSeconds)*time.Second)
	}
	return min(d, scheduler.Window)
}

// runsOf returns the submission times of workflow ws that its constraints
// count at now, oldest first. The engine notes every submission a step
// makes (noteRun); what happened before the server started is read once,
// from the slots of the schedule in the look-back period that have had a
// job, each counted at its slot time (the earliest it can have been
// submitted: after a restart a workflow may run sooner than minInterval
// after its last run, never twice as often as maxRuns allows within the
// schedule). The state store keeps no submission times, so this needs no
// change of engine.Store.
func (s *stepper) runsOf(ws *wfStep) []time.Time {
	look := runLookback(ws.w.Constraints)
	if look == 0 {
		return nil
	}
	e := s.e
	runs, seeded := e.runs[ws.id]
	if !seeded {
		for _, t := range ws.sched.AppendTimes(nil, s.now.Add(-look), s.now) {
			st, found, err := e.db.Get(slot.ID{Workflow: ws.id, Time: t})
			if err == nil && found && hadJob(st) {
				runs = append(runs, t)
			}
		}
	}
	// Forget what no longer counts.
	k := 0
	for k < len(runs) && s.now.Sub(runs[k]) >= look {
		k++
	}
	runs = runs[k:]
	e.runs[ws.id] = runs
	return runs
}

// hadJob reports whether a stored slot was submitted at least once.
func hadJob(st slot.State) bool {
	switch st.Status {
	case slot.Running, slot.Success, slot.Failure:
		return true
	}
	return st.ExternalID != "" || st.RetryCount > 0
}

// noteRun records a submission of workflow id at now.
func (s *stepper) noteRun(w *workflow.Workflow) {
	if runLookback(w.Constraints) == 0 {
		return
	}
	s.e.runs[w.ID] = append(s.e.runs[w.ID], s.now)
}

// MissedSLA says whether slot st, in its state when the step began, has
// missed the SLA at now: it is not SUCCESS and now is strictly after its
// deadline, slot time + successWithinSeconds. It is a pure function; the
// step notes each miss once (noteSLA).
func MissedSLA(sla *workflow.SLA, st slot.State, now time.Time) (deadline time.Time, missed bool) {
	if sla == nil {
		return time.Time{}, false
	}
	deadline = st.ID.Time.Add(time.Duration(sla.SuccessWithinSeconds) * time.Second)
	return deadline, st.Status != slot.Success && now.After(deadline)
}
