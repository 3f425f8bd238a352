package engine

// A step: gather → observe → decide → apply (see Step).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sort"
	"time"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/schedule"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/schema/workflow"
)

// Step reloads the workflows directory and runs one step at now for every
// workflow that is not paused, or only for those named in ids (unknown
// names are logged and ignored). One workflow's failure is logged, kept in
// Problems, and does not stop the others. Step returns an error when ctx
// is done, and one wrapping ErrPersist when the state database refused a
// write (read-only, full): the step went on, changing nothing it could not
// record, and the caller must hear of it (POST /scheduler answers 500).
//
// A step runs in four phases: gather (one read of the state of every
// workflow it steps: the slots it looks at, rerun markers, paused flags),
// observe (triggers and external services, for those slots), decide
// (Decide, a pure function of the slots and the observations) and apply
// (the submissions, then one batched write of every state the step
// changed). No slot state is written before apply, so every trigger, the
// success trigger included, reads the state as it was when the step began,
// for every workflow: a step's outcome does not depend on the order in
// which it visits the workflows.
func (e *Engine) Step(ctx context.Context, now time.Time, ids []string) error {
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	now = now.UTC()
	rep := StepReport{Now: now, Started: time.Now(), Transitions: make(map[slot.Status]int), Errors: make(map[string]int)}
	writes0 := e.writes()
	c := e.reload()
	pools := e.loadPools()
	e.scanDefinitions(c)
	e.readDepartures()
	e.pruneDepartures(c)
	rep.LoadErrors = len(c.loadErrs)
	todo := e.owned(e.toStep(c, ids))
	todo, rep.Loading = e.loadState(c, todo, ids != nil)
	// Before the step decides: a record of an event whose state a kill
	// left unwritten must see the state as it was (outbox.go).
	e.offerOutbox(c, todo)
	st := &stepper{e: e, now: now, rep: &rep, to: make(map[slot.ID]slot.Status), stepped: make(map[string]bool),
		// The store is not written before apply: triggers read the state
		// of the step's beginning (see above).
		env: trigger.NewStepEnv(e.db, e.fs, e.regs).WithRegisterCosts(&e.regCosts)}
	defer st.apply() // also when ctx ends the step early
	wfs := st.gather(c, todo)
	st.preloadRuns(wfs)
	for i := range wfs {
		ws := &wfs[i]
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := st.workflow(ctx, ws); err != nil {
			st.workflowFailed(ws.id, err)
			continue
		}
		if ws.w.Pool != "" {
			// Its "pool" problem is the pools phase's to set or clear.
			e.clearProblemOp(ws.id, time.Time{}, "schedule", "step")
			st.stepped[ws.id] = true
		} else {
			e.clearProblem(ws.id, time.Time{})
		}
		rep.Workflows++
	}
	st.drain(ctx, c) // the running slots of workflows no longer deployed
	st.admitPools(c, pools, e.opts.PoolsFile)
	st.submitAll(ctx)
	st.apply()
	e.publishProblems(c, todo)
	rep.Duration = time.Since(rep.Started)
	rep.Writes = e.writes() - writes0
	e.mu.Lock()
	e.last = rep
	e.mu.Unlock()
	if e.opts.OnStep != nil {
		e.opts.OnStep(rep)
	}
	if st.dbErr != nil {
		if errors.Is(st.dbErr, scheduler.ErrStoreUnavailable) { // an outage, not a fault (503)
			return fmt.Errorf("%w: %d slot changes not recorded, the first: %w", ErrPersist, st.dbErrs, st.dbErr)
		}
		return fmt.Errorf("%w: %d slot changes not recorded, the first: %v", ErrPersist, st.dbErrs, st.dbErr)
	}
	if st.unreadErr != nil { // an outage: the step could not do its work (503), not one workflow's problem
		return fmt.Errorf("%d workflows not stepped, the state database cannot be read: %w", st.unread, st.unreadErr)
	}
	return nil
}

// toStep returns the workflows a step steps: all of c, or those of ids
// that c has, each once.
func (e *Engine) toStep(c *config, ids []string) []string {
	if ids == nil {
		return c.ids
	}
	var todo []string
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if c.workflows[id] == nil {
			e.log.Warn("step: no such workflow", "workflow", id)
			continue
		}
		if !seen[id] { // a workflow named twice is still stepped once
			seen[id] = true
			todo = append(todo, id)
		}
	}
	return todo
}

// loadWait is how long a step waits for the store to read the state of the
// workflows it steps (start-up) before it steps those read so far.
var loadWait = time.Second

// loadState makes sure the store has read the state of the workflows todo
// and returns those the step steps, and how many it leaves because their
// state is still being read. A store that reads in the background
// (backgroundLoader) is given loadWait; the workflows it has not read by
// then are left to a later step, so that the first step after a restart
// of a large installation does not wait for every file. A step of named
// workflows (all true: POST /scheduler with ids) waits for them, as does
// a store that can only preload.
func (e *Engine) loadState(c *config, todo []string, all bool) ([]string, int) {
	if e.stateRead == c {
		return todo, 0 // read for these workflows: nothing to ask the store
	}
	bg, ok := e.db.(backgroundLoader)
	if !ok || all {
		if p, ok := e.db.(preloader); ok {
			p.Preload(todo, 8) // start-up: read the state files in parallel
		}
		return todo, 0
	}
	done := bg.LoadInBackground(todo, 8)
	select {
	case <-done:
		e.stateRead = c
		return todo, 0
	case <-time.After(loadWait):
	}
	ready := make([]string, 0, len(todo))
	for _, wf := range todo {
		if bg.Loaded(wf) {
			ready = append(ready, wf)
		}
	}
	left := len(todo) - len(ready)
	if left > 0 {
		e.log.Info("step: state still being read; those workflows are stepped once read",
			"loading", left, "stepped", len(ready))
	}
	return ready, left
}

// writes is the number of files the store wrote so far (0 if it does not
// count them).
func (e *Engine) writes() int64 {
	if w, ok := e.db.(writeCounter); ok {
		return w.Stats().Writes
	}
	return 0
}

// windowStart is the oldest slot time a step at now looks at for w:
// max(now − 7 days, startTime), rounded up to a whole second.
func windowStart(w *workflow.Workflow, now time.Time) time.Time {
	start := now.Add(-scheduler.Window)
	if w.StartTime.After(start) {
		start = w.StartTime
	}
	if r := start.Truncate(time.Second); !r.Equal(start) {
		start = r.Add(time.Second)
	}
	return start
}

// stepper carries one step's state.
type stepper struct {
	e     *Engine
	now   time.Time
	env   trigger.Env
	rep   *StepReport
	times []time.Time // the enumerated schedule times of every workflow
	// writes are the states the step changed, written together by apply.
	writes []slot.State
	unmark []slot.ID // rerun markers to drop after the write
	to     map[slot.ID]slot.Status
	// pending are the READY slots to submit at the end of the step;
	// submitted are those now RUNNING (their intents go after the
	// write), dropIntents those whose submission was refused outright.
	pending     []pendingSubmit
	submitted   []slot.ID
	dropIntents []slot.ID
	// dbErr is the first write the state database refused; dbErrs counts them.
	dbErr  error
	dbErrs int
	// unreadErr is the first error that kept a workflow from being
	// stepped because the state database could not be reached; unread
	// counts those workflows.
	unreadErr error
	unread    int
	// stepped are the workflows with a pool the step stepped; pendingEvents
	// the events sent once the step's write is done.
	stepped       map[string]bool
	pendingEvents []pendingEvent
	// ready are the READY slots no run constraint holds (hold), whose
	// "pool" problems admitPools sets or clears.
	ready []slot.ID
	// poolMembers are the workflows of each defined pool (sorted) and
	// poolLimits their limits, for the store's admission (claimPools).
	poolMembers map[string][]string
	poolLimits  map[string]int
	// poolDeparted are the RUNNING slots of workflows that left each
	// pool, which count in it until they end (departed.go).
	poolDeparted map[string][]slot.ID
	// noted are the workflows whose submissions the step noted (noteRun),
	// recorded by recordRuns; runTimes is runsOf's buffer.
	noted    map[string]bool
	runTimes []time.Time
	// preRuns holds the records of submissions preloadRuns read for the
	// workflows the step starts counting (nil: none read in one batch).
	preRuns map[string][]store.Run
	// slaMisses are the SLA misses the step sent, recorded by recordSLA.
	slaMisses []slaMiss
	// slaKeys are the keys of the SLA records by workflow prefix, from
	// one listing of the bucket in the step (nil: not listed yet).
	slaKeys map[string][]string
}

// wfStep is one workflow in a step: what gather read, and the
// observations and decisions made on it.
type wfStep struct {
	id      string
	w       *workflow.Workflow
	sched   *schedule.Schedule
	svc     external.Service
	start   time.Time   // the window's start
	markKey string      // the done mark's key
	enum    []time.Time // the schedule times not yet known to be final
	rerun   map[int64]store.RerunMark
	// slots are the slots the step looks at, as stored when it began
	// (WAITING when a slot has no record), oldest first.
	slots []slot.State
	// intents are the submit intents of the READY slots (the only ones a
	// step submits), by index in slots; nil when there is none.
	intents map[int]intentRead
	failed  map[int64]bool // slots that met an error in the step
}

// intentRead is a slot's submit intent as gathered.
type intentRead struct {
	in   store.Intent
	left bool  // there is one
	err  error // it could not be read
}

// ErrPersist: a step could not write to the state database.
var ErrPersist = errors.New("state database write failed")

// persistFailed notes a write the state database refused.
func (s *stepper) persistFailed(err error) {
	s.dbErrs++
	if s.dbErr == nil {
		s.dbErr = err
	}
}

// recovered turns a panic in a phase of workflow id's step (a trigger's
// file system or an external service gone wrong) into that workflow's
// error; deferred by the phases.
func (s *stepper) recovered(id string, err *error) {
	if p := recover(); p != nil {
		s.e.log.Error("panic while stepping a workflow", "workflow", id, "panic", p, "stack", string(debug.Stack()))
		*err = fmt.Errorf("internal error: %v", p)
	}
}

// workflowFailed records that workflow id was not stepped.
func (s *stepper) workflowFailed(id string, err error) {
	s.rep.Failed++
	if errors.Is(err, scheduler.ErrStoreUnavailable) {
		s.unread++
		if s.unreadErr == nil {
			s.unreadErr = err
		}
	}
	s.e.setProblem(id, time.Time{}, "step", err)
	s.e.log.Error("workflow not stepped", "workflow", id, "error", err)
}

// gather reads the state of every workflow of todo that is not paused
// (slots, rerun markers, the submit intents of READY and RUNNING slots):
// the step's one read.
func (s *stepper) gather(c *config, todo []string) []wfStep {
	// The step's wfSteps live in one buffer, kept from step to step (a
	// steady step allocates nothing per workflow for them).
	out := s.e.wfBuf[:0]
	if cap(out) < len(todo) {
		out = make([]wfStep, 0, len(todo))
	}
	defer func() { s.e.wfBuf = out }()
	var leftover []slot.ID
	for _, id := range todo {
		if s.e.db.Paused(id) {
			s.rep.Paused++
			continue
		}
		out = append(out, wfStep{})
		ws := &out[len(out)-1]
		if err := s.gatherWorkflow(c, id, ws); err != nil {
			out = out[:len(out)-1]
			s.workflowFailed(id, err)
			continue
		}
		// A READY slot's intent is what submitAll recovers from. A
		// RUNNING slot's intent is left over from a crash (or a failed
		// sync) between the RUNNING write and the intent's removal: drop
		// it before anything is submitted, or a retry would "recover" the
		// job that already ran.
		for i, st := range ws.slots {
			switch st.Status {
			case slot.Ready:
				in, left, err := s.e.db.GetIntent(st.ID)
				if left || err != nil {
					if ws.intents == nil {
						ws.intents = make(map[int]intentRead)
					}
					ws.intents[i] = intentRead{in: in, left: left, err: err}
				}
			case slot.Running:
				if _, left, err := s.e.db.GetIntent(st.ID); err == nil && left {
					leftover = append(leftover, st.ID)
				}
			}
		}
	}
	if len(leftover) > 0 {
		if err := s.e.db.DeleteIntents(leftover); err != nil {
			s.e.log.Warn("delete leftover submit intents", "slots", len(leftover), "error", err)
		}
	}
	return out
}

// gatherWorkflow reads what the step looks at of workflow id: the schedule
// times from its done mark on, its stored slots that are not final, and the
// slots marked for rerun.
func (s *stepper) gatherWorkflow(c *config, id string, ws *wfStep) (err error) {
	defer s.recovered(id, &err)
	e := s.e
	w := c.workflows[id]
	sched := c.scheds[id]
	if sched == nil {
		return fmt.Errorf("schedule: %w", c.schedErrs[id])
	}
	*ws = wfStep{id: id, w: w, sched: sched, svc: e.opts.Services[w.ExternalService.Type],
		start: windowStart(w, s.now), markKey: sched.Key() + "\x00" + w.StartTime.String()}
	e.mu.RLock()
	mark := e.done[id]
	e.mu.RUnlock()
	from := ws.start
	if mark.key == ws.markKey && mark.until.After(from) {
		from = mark.until
	}
	// enum: the schedule times not yet known to be final, in [from, now).
	n := len(s.times)
	s.times = sched.AppendTimes(s.times, from, s.now)
	ws.enum = s.times[n:len(s.times):len(s.times)]
	active, err := e.db.Active(id)
	if err != nil {
		return err
	}
	marks, err := e.db.RerunMarks(id)
	if err != nil {
		return err
	}
	if len(marks) > 0 { // (nil otherwise: a steady step allocates no map)
		ws.rerun = make(map[int64]store.RerunMark, len(marks))
	}
	for _, m := range marks {
		ws.rerun[m.Slot.UnixMilli()] = m
	}
	// Besides enum: stored slots that are not final (in the window and the
	// schedule, or RUNNING anywhere: a job is polled until it ends) and
	// slots marked for rerun (anywhere).
	var extra []time.Time
	for _, a := range active {
		t := a.ID.Time
		inWindow := !t.Before(ws.start) && t.Before(s.now)
		if a.Status == slot.Running || (inWindow && sched.InSchedule(t)) {
			extra = append(extra, t)
		}
	}
	for _, m := range marks {
		extra = append(extra, m.Slot)
	}
	times := ws.enum
	if len(extra) > 0 {
		times = append(append(make([]time.Time, 0, len(ws.enum)+len(extra)), ws.enum...), extra...)
		sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
		times = dedupe(times)
	}
	ws.slots = make([]slot.State, 0, len(times))
	for _, t := range times {
		sid := slot.ID{Workflow: id, Time: t}
		st, found, err := e.db.Get(sid)
		if err != nil {
			s.failSlot(ws, sid, "state", err)
			continue
		}
		if !found {
			st = slot.NewWaiting(sid)
		}
		ws.slots = append(ws.slots, st)
	}
	s.rep.Slots += len(ws.slots)
	return nil
}

// workflow observes, decides and records one gathered workflow.
func (s *stepper) workflow(ctx context.Context, ws *wfStep) (err error) {
	defer s.recovered(ws.id, &err)
	obs := s.observe(ctx, ws)
	p := PolicyOf(ws.w)
	if p.Constraints != nil {
		p.Runs = s.runsOf(ws)
		for i, in := range ws.intents {
			obs[i].Intent = in.left && in.err == nil && intentOf(in.in, ws.slots[i])
		}
	}
	d := Decide(p, ws.slots, s.now, obs)
	s.record(ws, d, obs)
	return nil
}

// observe evaluates the triggers of the slots that wait for them and asks
// the external service about the running ones.
func (s *stepper) observe(ctx context.Context, ws *wfStep) []Observation {
	obs := make([]Observation, len(ws.slots))
	for i, st := range ws.slots {
		trig, stat := Needs(st)
		switch {
		case trig:
			tctx, cancel := context.WithTimeout(ctx, s.e.opts.CallTimeout)
			obs[i].TriggerReady, obs[i].TriggerErr = trigger.Ready(tctx, s.env, &ws.w.Trigger, st.ID.Time, s.now)
			cancel()
			if obs[i].TriggerErr != nil {
				s.failSlot(ws, st.ID, "trigger", obs[i].TriggerErr)
			}
		case stat:
			if ws.svc == nil {
				obs[i].JobErr = fmt.Errorf("no external service of type %q is configured", ws.w.ExternalService.Type)
			} else {
				cctx, cancel := context.WithTimeout(ctx, s.e.opts.CallTimeout)
				obs[i].Job, obs[i].JobErr = ws.svc.Status(cctx, ws.w, st.ExternalID)
				cancel()
			}
			if obs[i].JobErr != nil {
				s.failSlot(ws, st.ID, "status", obs[i].JobErr)
			}
		}
	}
	return obs
}

// record queues what Decide chose for a workflow: its transitions for the
// step's write, its submissions for submitAll; it clears the problems of
// slots observed without error, drops rerun markers that are done, and
// moves the workflow's done mark.
func (s *stepper) record(ws *wfStep, d Decision, obs []Observation) {
	e := s.e
	for _, i := range d.Submit { // submitted for every workflow at once, at the end of the step
		s.pending = append(s.pending, pendingSubmit{w: ws.w, svc: ws.svc, st: ws.slots[i], intent: ws.intents[i]})
	}
	// Transitions are written together at the end of the step (apply);
	// submissions are made durable in bulk before that (the submit-intent
	// protocol needs it).
	after := append([]slot.State(nil), ws.slots...)
	for _, ch := range d.Changes {
		from := ws.slots[ch.Index]
		s.writes = append(s.writes, ch.To)
		if from.Status == slot.Running {
			// Why a job's slot moved: the service's word (exit 3, never
			// started, exit status unknown: ...).
			s.transition(from, ch.To, "job", from.ExternalID, "reason", obs[ch.Index].Job.Detail)
		} else {
			s.transition(from, ch.To)
		}
		after[ch.Index] = ch.To
	}
	s.hold(ws, d)
	s.events(ws, d, obs)
	s.noteSLA(ws, after)

	// Clear the problems of slots that were observed without error; drop
	// the rerun markers of final slots outside the window (Celos #590) or
	// older than store.RerunExpiry. A marker of a slot that is not final
	// is kept however old: a rerun slot is stepped until it is final.
	for i, st := range after {
		if trig, stat := Needs(ws.slots[i]); (trig || stat) && !ws.failed[st.ID.Time.UnixMilli()] {
			e.clearProblem(ws.id, st.ID.Time)
		}
		if m, ok := ws.rerun[st.ID.Time.UnixMilli()]; ok && st.Status.Final() && (st.ID.Time.Before(ws.start) || m.Expired(s.now)) {
			s.unmark = append(s.unmark, st.ID) // once the final state is durable
		}
	}

	// Forget problems of slots that left the window and are not stepped.
	stepped := make(map[int64]bool, len(after))
	for _, st := range after {
		stepped[st.ID.Time.UnixMilli()] = true
	}
	e.mu.Lock()
	for k := range e.problems {
		if k.wf == ws.id && k.t >= 0 && k.t < ws.start.UnixMilli() && !stepped[k.t] {
			delete(e.problems, k)
		}
	}
	if ws.w.SLA != nil || len(e.sla) > 0 {
		// A miss is shown until its deadline leaves the window too (an
		// SLA longer than the window: noteSLABeyond).
		limit := ws.start
		if sla := ws.w.SLA; sla != nil && time.Duration(sla.SuccessWithinSeconds)*time.Second > scheduler.Window {
			limit = limit.Add(-time.Duration(sla.SuccessWithinSeconds) * time.Second)
		}
		for id := range e.sla {
			if id.Workflow == ws.id && id.Time.Before(limit) && !stepped[id.Time.UnixMilli()] {
				delete(e.sla, id)
			}
		}
	}
	e.mu.Unlock()
	s.noteSLABeyond(ws)

	// Move the done mark to the first enumerated schedule time whose slot
	// is not final (or was skipped), else to now.
	until := s.now
	j := 0
	for _, t := range ws.enum {
		for j < len(after) && after[j].ID.Time.Before(t) {
			j++
		}
		if j >= len(after) || !after[j].ID.Time.Equal(t) || !after[j].Status.Final() || s.slaPending(ws, after[j]) {
			until = t
			break
		}
	}
	e.mu.Lock()
	e.done[ws.id] = doneMark{key: ws.markKey, until: until}
	e.mu.Unlock()
}

func dedupe(ts []time.Time) []time.Time {
	out := ts[:0]
	for i, t := range ts {
		if i == 0 || !t.Equal(out[len(out)-1]) {
			out = append(out, t)
		}
	}
	return out
}

// apply records the submissions the step made (recordRuns), then makes
// the step's transitions durable in one batched write. A slot
// whose write failed is back in its previous state: it is reported, and
// the workflow's done mark is lowered to it so that the next step looks at
// it again. Then the rerun markers and submit intents that are done go.
func (s *stepper) apply() {
	s.recordRuns() // before the RUNNING states: see recordRuns
	// The outbox's records go before the states (outbox.go), and the
	// SLA misses sent right after them (recordSLA).
	s.prepareOutbox()
	if len(s.slaMisses) > 0 {
		s.recordSLA()
	}
	var failed map[slot.ID]error
	if len(s.writes) > 0 {
		failed = s.e.db.PutStates(s.writes)
	}
	s.writes = nil
	for id, err := range failed {
		if st, ok := s.to[id]; ok {
			s.rep.Transitions[st]--
		}
		if s.lostOwnership(id, "write", err) {
			continue
		}
		s.rep.Errors["persist"]++
		s.persistFailed(err)
		s.e.setProblem(id.Workflow, id.Time, "persist", err)
		s.e.log.Error("slot transition not saved", "slot", id.String(), "error", err)
		s.e.lowerDone(id)
	}
	for _, id := range s.unmark {
		if _, bad := failed[id]; bad {
			continue
		}
		if err := s.e.db.UnmarkRerun(id); err != nil {
			s.e.log.Warn("unmark rerun", "slot", id.String(), "error", err)
		}
	}
	s.unmark = nil
	// Submit intents go once their slot's RUNNING state is durable (a
	// failed RUNNING write keeps the intent: the next step recovers).
	drop := s.dropIntents
	for _, id := range s.submitted {
		if _, bad := failed[id]; !bad {
			drop = append(drop, id)
		}
	}
	if len(drop) > 0 {
		if err := s.e.db.DeleteIntents(drop); err != nil {
			s.e.log.Warn("delete submit intents", "error", err)
		}
	}
	s.submitted, s.dropIntents = nil, nil
	clear(s.to)
	if len(s.pendingEvents) > 0 {
		s.emit(failed)
	}
}

// failSlot is fail for a slot of a gathered workflow: the slot's problems
// are not cleared at the end of its step.
func (s *stepper) failSlot(ws *wfStep, id slot.ID, op string, err error) {
	if ws.failed == nil {
		ws.failed = make(map[int64]bool)
	}
	ws.failed[id.Time.UnixMilli()] = true
	s.fail(id, op, err)
}

func (s *stepper) fail(id slot.ID, op string, err error) {
	s.rep.Errors[op]++
	// A problem is logged when it appears or changes, not at every step it
	// persists (an outage would otherwise log every waiting slot every
	// step); Problems, /trigger-status, the UI and the metrics keep showing it.
	if s.e.setProblem(id.Workflow, id.Time, op, err) {
		s.e.log.Warn("slot left as it was", "slot", id.String(), "op", op, "error", err)
	} else {
		s.e.log.Debug("slot left as it was (same problem)", "slot", id.String(), "op", op, "error", err)
	}
}

func (s *stepper) transition(from, to slot.State, attrs ...any) {
	s.rep.Transitions[to.Status]++
	s.to[to.ID] = to.Status
	level := slog.LevelInfo
	if isFailure(from, to) {
		level = slog.LevelWarn // what an operator looks for: with the reason
	}
	s.e.log.Log(context.Background(), level, "slot transition", append([]any{"slot", to.ID.String(), "from", string(from.Status), "to", string(to.Status),
		"externalID", to.ExternalID, "retryCount", to.RetryCount}, attrs...)...)
}

// isFailure reports whether a transition is a failure: a job that failed
// (retried or not) or a slot that gave up waiting.
func isFailure(from, to slot.State) bool {
	switch {
	case to.Status == slot.Failure || to.Status == slot.WaitTimeout:
		return true
	case from.Status == slot.Running && to.Status == slot.Waiting: // retry after a failure
		return true
	}
	return false
}
