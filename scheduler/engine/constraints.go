package engine

// Run constraints: the pure check of a workflow's constraints
// (CheckConstraints, used by Decide) and the submission times it counts
// (runsOf, kept by the engine).

import (
	"fmt"
	"sort"
	"time"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
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
// constraints c matter (0: they do not): the longer of minInterval and
// maxRuns' period, however long (up to 100 years: a submission counts
// for the whole period, not only while its slot is in the window).
func runLookback(c *workflow.Constraints) time.Duration { return c.RunLookBack() }

// runsKept is how many of the latest submissions constraints c need.
func runsKept(c *workflow.Constraints) int {
	if c.MaxRuns != nil {
		return max(1, c.MaxRuns.Count)
	}
	return 1
}

// runsOf returns the submission times of workflow ws that its constraints
// count at now, oldest first. The engine notes every submission a step
// makes (noteRun) and, when the store keeps them (runRecorder), records
// them before the step writes the RUNNING states (recordRuns). What
// happened before the engine stepped the workflow (a restart, a take-over
// by another instance) is read once: the store's record, and for every
// slot of the look-back period that had a job but is not in it (state an
// older celos wrote, or a store without a record) the slot time, the
// earliest it can have been submitted. A crash between a submission and
// its record leaves the slot READY with a submit intent: the step that
// recovers (or submits again) counts it at its own time, later than the
// real one, never earlier.
func (s *stepper) runsOf(ws *wfStep) []time.Time {
	look := runLookback(ws.w.Constraints)
	if look == 0 {
		return nil
	}
	e := s.e
	runs, seeded := e.runs[ws.id]
	if !seeded {
		runs = s.seedRuns(ws, look)
	}
	// Forget what no longer counts.
	k := 0
	for k < len(runs) && s.now.Sub(runs[k].At) >= look {
		k++
	}
	runs = runs[k:]
	// Only the latest runs matter: minInterval's last, maxRuns' count
	// (the next place frees when the count-th latest ages out); a record
	// of a long period is bounded by them (onTimeout "run" submits past
	// the constraints).
	if keep := runsKept(ws.w.Constraints); len(runs) > keep {
		runs = runs[len(runs)-keep:]
	}
	e.runs[ws.id] = runs
	s.runTimes = s.runTimes[:0]
	for _, r := range runs {
		s.runTimes = append(s.runTimes, r.At)
	}
	return s.runTimes
}

// seedRuns reads the submissions of workflow ws in the look-back period
// before now (see runsOf), oldest first.
func (s *stepper) seedRuns(ws *wfStep, look time.Duration) []store.Run {
	e := s.e
	var runs []store.Run
	recorded := make(map[int64]bool)
	if rr, ok := e.db.(runRecorder); ok {
		rec, preloaded := s.preRuns[ws.id]
		var err error
		if !preloaded {
			rec, err = rr.Runs(ws.id)
		}
		if err != nil {
			e.log.Warn("record of submissions not read; the slots of the look-back that had a job count at their slot times",
				"workflow", ws.id, "error", err)
			rec = nil
		}
		for _, r := range rec {
			recorded[r.Slot.UnixMilli()] = true
			if s.now.Sub(r.At) < look {
				runs = append(runs, r)
			}
		}
	}
	// The slots without a record are looked for in the window only: what
	// is older may be pruned, and a long look-back (a month of minutely
	// slots) would read each of its slots.
	for _, t := range ws.sched.AppendTimes(nil, s.now.Add(-min(look, scheduler.Window)), s.now) {
		if recorded[t.UnixMilli()] {
			continue
		}
		st, found, err := e.db.Get(slot.ID{Workflow: ws.id, Time: t})
		if err == nil && found && hadJob(st) {
			runs = append(runs, store.Run{Slot: t, Attempt: st.RetryCount, At: t})
		}
	}
	sortRuns(runs)
	return runs
}

// batchRunReads turns preloadRuns on (a benchmark compares both ways).
var batchRunReads = true

// preloadRuns reads, in one call to a store that can (runBatchReader), the
// records of submissions of the gathered workflows whose constraints count
// them and that this engine has not counted yet (after a restart, or the
// workflows a take-over brought): seedRuns then finds them in preRuns. A
// workflow without a record is preloaded as such. When the batch read
// fails, seedRuns reads each workflow's record on its own (and logs what
// fails there).
func (s *stepper) preloadRuns(wfs []wfStep) {
	s.preRuns = nil
	br, ok := s.e.db.(runBatchReader)
	if !ok || !batchRunReads {
		return
	}
	var ids []string
	for i := range wfs {
		if runLookback(wfs[i].w.Constraints) == 0 {
			continue
		}
		if _, seeded := s.e.runs[wfs[i].id]; !seeded {
			ids = append(ids, wfs[i].id)
		}
	}
	if len(ids) < 2 {
		return // one read either way
	}
	got, err := br.RunsOf(ids)
	if err != nil {
		s.e.log.Warn("records of submissions not read in one batch; reading them one by one", "workflows", len(ids), "error", err)
		return
	}
	s.preRuns = make(map[string][]store.Run, len(ids))
	for _, id := range ids {
		s.preRuns[id] = got[id] // nil: no record
	}
}

func sortRuns(runs []store.Run) {
	sort.SliceStable(runs, func(i, j int) bool { return runs[i].At.Before(runs[j].At) })
}

// hadJob reports whether a stored slot was submitted at least once.
func hadJob(st slot.State) bool {
	switch st.Status {
	case slot.Running, slot.Success, slot.Failure:
		return true
	}
	return st.ExternalID != "" || st.RetryCount > 0
}

// noteRun records a submission (or a recovered one) of slot st of w at
// the step's time, to be recorded in the store by recordRuns. A second
// one of the same attempt (a job recovered after a crash between its
// submission and the RUNNING write) replaces the first: it counts at the
// later time.
func (s *stepper) noteRun(w *workflow.Workflow, st slot.State) {
	if runLookback(w.Constraints) == 0 {
		return
	}
	runs := s.e.runs[w.ID]
	for i, r := range runs {
		if r.Slot.Equal(st.ID.Time) && r.Attempt == st.RetryCount {
			runs = append(runs[:i:i], runs[i+1:]...)
			break
		}
	}
	runs = append(runs, store.Run{Slot: st.ID.Time, Attempt: st.RetryCount, At: s.now})
	if n := len(runs); n > 1 && runs[n-1].At.Before(runs[n-2].At) {
		sortRuns(runs) // a step at an earlier time than the last
	}
	s.e.runs[w.ID] = runs
	if s.noted == nil {
		s.noted = make(map[string]bool)
	}
	s.noted[w.ID] = true
}

// recordRuns writes the submissions of the workflows the step submitted
// for (noteRun) to a store that keeps them (runRecorder), before apply
// writes their RUNNING states: a crash before this write leaves the slots
// READY with their submit intents (counted again, later, when the job is
// recovered), one after it finds the submission recorded. A record that
// cannot be written is a failed write of the step (ErrPersist); the
// submission still counts in this engine's memory.
func (s *stepper) recordRuns() {
	noted := s.noted
	s.noted = nil
	rr, ok := s.e.db.(runRecorder)
	if !ok || len(noted) == 0 {
		return
	}
	set := make(map[string][]store.Run, len(noted))
	for wf := range noted {
		set[wf] = append([]store.Run(nil), s.e.runs[wf]...)
	}
	for wf, err := range rr.PutRuns(set) {
		if !s.e.owns(wf) {
			s.rep.Fenced++
			s.e.log.Warn("dropped: another instance owns the workflow now", "workflow", wf, "what", "record of submissions", "error", err)
			continue
		}
		s.rep.Errors["persist"]++
		s.persistFailed(err)
		s.e.log.Error("submissions not recorded: after a restart they count at their slot times", "workflow", wf, "error", err)
	}
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
