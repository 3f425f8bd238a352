package engine

// What a step does beyond Celos's rules (issue 14): it says why a READY
// slot is held (run constraints, a full or undefined pool), admits the
// chosen slots of pools across workflows (pool.Admit), notes missed SLAs,
// and emits the events of the workflows' notification targets once the
// step's state is recorded.

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/pool"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// Problem ops of held and late slots (scheduler.Problem.Op).
const (
	opConstraint = "constraint"
	opPool       = "pool"
	opSLA        = "sla"
)

// PoolUse is a pool's use at the end of a step (StepReport.Pools).
type PoolUse struct {
	Limit int
	// Running are the pool's slots RUNNING when the step began plus those
	// it submitted; Waiting the READY slots their strategy chose that the
	// pool held.
	Running, Waiting int
}

// pendingEvent is an event that waits for its slot's state to be durable.
type pendingEvent struct {
	ev   scheduler.Event
	slot slot.ID       // zero: not tied to a write (SLA missed)
	out  []outboxEntry // its deliveries' outbox records (prepareOutbox)
}

// hold says why slots stay READY: the decision's holds get a problem of
// op "constraint"; every other READY slot of the workflow loses one of op
// "constraint" and is noted for the pool phase (admitPools), which sets
// or clears its problem of op "pool".
func (s *stepper) hold(ws *wfStep, d Decision) {
	held := make(map[int]bool, len(d.Held))
	for _, h := range d.Held {
		held[h.Index] = true
		id := ws.slots[h.Index].ID
		if s.e.setProblem(ws.id, id.Time, opConstraint, errors.New(h.Why)) {
			s.e.log.Info("slot held", "slot", id.String(), "reason", h.Why)
		}
	}
	for i, st := range ws.slots {
		if st.Status == slot.Ready && !held[i] {
			s.e.clearProblemOp(ws.id, st.ID.Time, opConstraint)
			s.ready = append(s.ready, st.ID)
		}
	}
}

// clearProblemOp clears the problem of a slot (of the workflow when t is
// zero) if its op is one of ops.
func (e *Engine) clearProblemOp(wf string, t time.Time, ops ...string) {
	k := problemKey{wf, -1}
	if !t.IsZero() {
		k.t = t.UnixMilli()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.problems[k]; ok {
		for _, op := range ops {
			if p.Op == op {
				delete(e.problems, k)
				return
			}
		}
	}
}

// admitPools lets the step's chosen slots of pools run within the pools'
// limits (pool.Admit): the others stay READY with a problem of op "pool".
// A stepped workflow whose pool is not defined gets a workflow-level
// problem. The running slots of a pool are counted over all its
// workflows, paused or not stepped ones included, as stored when the step
// began, and the slots that still run of workflows that left it
// (departed.go).
func (s *stepper) admitPools(c *config, pools pool.Pools, poolsPath string) {
	e := s.e
	running := make(map[string]int)
	s.poolMembers, s.poolLimits = make(map[string][]string), pools
	for _, id := range c.pooled {
		w := c.workflows[id]
		if _, ok := pools[w.Pool]; ok {
			e.clearProblemOp(id, time.Time{}, opPool)
			s.poolMembers[w.Pool] = append(s.poolMembers[w.Pool], id)
		} else {
			// Set at every step, logged when it appears (the step's
			// clearing of workflow problems spares this one: stepped).
			if s.stepped[id] {
				where := "no pools file is configured (celos server --pools FILE)"
				if poolsPath != "" {
					where = "the pools file " + poolsPath + " does not define it"
				}
				if e.setProblem(id, time.Time{}, opPool, fmt.Errorf("pool %q is not defined: %s; its READY slots wait", w.Pool, where)) {
					e.log.Error("workflow names an undefined pool", "workflow", id, "pool", w.Pool, "poolsFile", poolsPath)
				}
			}
			continue
		}
		active, err := e.db.Active(id)
		if err != nil {
			continue // the workflow's own step reports it
		}
		for _, st := range active {
			if st.Status == slot.Running {
				running[w.Pool]++
			}
		}
	}
	// Slots of workflows that left a pool (undeployed, moved) while they
	// ran keep their place in it until they end.
	s.poolDeparted = e.departedInPools(func(name string) bool { _, ok := pools[name]; return ok })
	for name, ids := range s.poolDeparted {
		running[name] += len(ids)
	}
	heldByPool := make(map[slot.ID]bool)
	defer func() {
		// A slot admitted here keeps the hold of an earlier step until
		// the store admits it too (submitRecorded): a pool that stays
		// full across the instances does not set and clear it at every
		// step.
		admitted := make(map[slot.ID]bool, len(s.pending))
		for _, p := range s.pending {
			if _, ok := s.poolMembers[p.w.Pool]; ok {
				admitted[p.st.ID] = true
			}
		}
		for _, id := range s.ready {
			if !heldByPool[id] && !admitted[id] {
				e.clearProblemOp(id.Workflow, id.Time, opPool)
			}
		}
		s.ready = nil
	}()
	if len(c.pooled) == 0 && len(pools) == 0 {
		return
	}
	cands := make([]pool.Candidate, len(s.pending))
	for i, p := range s.pending {
		cands[i] = pool.Candidate{Workflow: p.w.ID, Slot: p.st.ID.Time, Pool: p.w.Pool, Priority: p.w.Priority}
	}
	why, use := pool.Admit(pools, running, cands)
	if fresh := s.freshRunning(use); fresh != nil {
		maps.Copy(running, fresh)
		why, use = pool.Admit(pools, running, cands)
	}
	kept := s.pending[:0]
	for i, p := range s.pending {
		if why[i] == "" {
			kept = append(kept, p)
			continue
		}
		heldByPool[p.st.ID] = true
		if e.setProblem(p.w.ID, p.st.ID.Time, opPool, errors.New(why[i])) {
			e.log.Info("slot held", "slot", p.st.ID.String(), "reason", why[i])
		}
	}
	s.pending = kept
	s.rep.Pools = make(map[string]PoolUse, len(pools))
	for name, limit := range pools {
		u := use[name]
		s.rep.Pools[name] = PoolUse{Limit: limit, Running: u.Running, Waiting: u.Waiting}
	}
}

// freshRunning returns, for the pools whose candidates the engine's view
// holds (use: pool.Admit's on the view), how many of their slots the
// store shared with other instances has RUNNING or being submitted now
// (poolCounter), the step's candidates left out (they are counted as
// candidates); nil when there are none to ask about or the store cannot
// say. The view sees another instance's writes only at its store's next
// refresh (every lease/3), so without this a place freed by another
// instance would stay unused until then. It costs one round trip, only
// in a step where a pool holds slots and has workflows of other
// instances: never for workflows in no pool, or when nothing waits. The
// store's admission under the pool's lock (PutIntents) stays the
// authority; this only lets the step offer it the slots that may fit.
func (s *stepper) freshRunning(use map[string]pool.Use) map[string]int {
	pc, ok := s.e.db.(poolCounter)
	if !ok || s.e.opts.Owns == nil {
		return nil
	}
	var names, wfs []string
	for name, u := range use {
		members := s.poolMembers[name]
		if u.Waiting == 0 || !slices.ContainsFunc(members, func(wf string) bool { return !s.e.owns(wf) }) {
			continue // nothing held, or every member is this instance's: its view is current
		}
		names = append(names, name)
		wfs = append(wfs, members...)
	}
	if len(names) == 0 {
		return nil
	}
	occupied, err := pc.PoolOccupied(wfs)
	if err != nil {
		s.e.log.Warn("pool admission by this instance's view: the store's count failed", "pools", names, "error", err)
		return nil
	}
	candidate := make(map[slot.ID]bool, len(s.pending))
	for _, p := range s.pending {
		candidate[p.st.ID] = true
	}
	poolOf := make(map[string]string, len(wfs))
	fresh := make(map[string]int, len(names))
	for _, name := range names {
		fresh[name] = 0
		for _, wf := range s.poolMembers[name] {
			poolOf[wf] = name
		}
	}
	for _, id := range occupied {
		if name, ok := poolOf[id.Workflow]; ok && !candidate[id] {
			fresh[name]++
		}
	}
	for _, name := range names {
		fresh[name] += len(s.poolDeparted[name]) // (RUNNING when the step began)
	}
	return fresh
}

// noteSLA notes the slots of ws that missed their SLA at this step: not
// SUCCESS when the step began, and now past slot time + successWithin.
// Each is noted once (kept while it is in the window), a problem of op
// "sla", and, unless the store records it as sent already (slaSent:
// across restarts and take-overs), counted in StepReport.SLAMissed, sent
// to the workflow's targets and recorded as sent (recordSLA).
func (s *stepper) noteSLA(ws *wfStep, after []slot.State) {
	sla := ws.w.SLA
	if sla == nil {
		return
	}
	// The records of misses sent begin with the first step of an SLA (an
	// error is met again below, at a miss).
	_, _ = s.e.slaRecordsSince()
	for i, st := range ws.slots {
		deadline, missed := MissedSLA(sla, st, s.now)
		if missed && !s.e.slaNoted(st.ID) {
			s.noteMiss(ws, st.ID, after[i], deadline)
		}
	}
}

// noteSLABeyond notes the misses of the slots of ws that left the window
// before their deadline (an SLA longer than the window: a weekly slot
// with 10 days to succeed), which the step does not look at otherwise:
// the slots whose deadline passed since the last such check (after a
// restart, within the window's length before now), read from the store.
// A slot without a record older than a prune keeps (pruneSafe) is left
// out: it may have succeeded and been pruned.
// Called after the step forgot the slots that left the window.
func (s *stepper) noteSLABeyond(ws *wfStep) {
	sla := ws.w.SLA
	if sla == nil || time.Duration(sla.SuccessWithinSeconds)*time.Second <= scheduler.Window {
		return
	}
	e := s.e
	// Missed at now: slot time + successWithin < now, i.e. slot time <
	// hi; the slots from ws.start on are the step's own.
	hi := s.now.Add(-time.Duration(sla.SuccessWithinSeconds) * time.Second)
	if hi.After(ws.start) {
		hi = ws.start
	}
	lo, ok := e.slaChecked[ws.id]
	if !ok || lo.Before(hi.Add(-scheduler.Window)) {
		lo = hi.Add(-scheduler.Window)
	}
	lo = maxTime(lo, ws.w.StartTime)
	if !lo.Before(hi) {
		return
	}
	for _, t := range ws.sched.AppendTimes(nil, lo, hi) {
		id := slot.ID{Workflow: ws.id, Time: t}
		if e.slaNoted(id) {
			continue
		}
		st, found, err := e.db.Get(id)
		switch {
		case err != nil:
			e.log.Warn("SLA of a slot outside the window not checked: its state cannot be read", "slot", id.String(), "error", err)
			return // (checked again at the next step)
		case !found && t.Before(s.now.Add(-pruneSafe)):
			continue // perhaps pruned after it succeeded: unknown
		case !found:
			st = slot.NewWaiting(id) // it waited: never written
		}
		if deadline, missed := MissedSLA(sla, st, s.now); missed {
			s.noteMiss(ws, id, st, deadline)
		}
	}
	e.slaChecked[ws.id] = hi
}

// pruneSafe is how long a final slot's record is kept at least (a prune
// keeps the window and a day: statedb.MinRetention).
const pruneSafe = scheduler.Window + 24*time.Hour

func maxTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}

// noteMiss notes the SLA miss of slot id of ws (its state now: st) at
// the step: a problem of op "sla" and, unless the store records it as
// sent (slaSent), counted, logged, sent to the workflow's targets and
// recorded (recordSLA).
func (s *stepper) noteMiss(ws *wfStep, id slot.ID, st slot.State, deadline time.Time) {
	detail := fmt.Sprintf("SLA missed: not SUCCESS %s after the slot time (deadline %s); %s at the step of %s",
		seconds(ws.w.SLA.SuccessWithinSeconds), slot.FormatTime(deadline), st.Status, slot.FormatTime(s.now))
	s.e.mu.Lock()
	s.e.sla[id] = scheduler.Problem{Workflow: ws.id, Slot: id.Time, Op: opSLA, Error: detail, At: s.e.clock().UTC()}
	s.e.mu.Unlock()
	sent, err := s.slaSent(id, deadline)
	if err != nil {
		if !errors.Is(err, errNoRegisters) {
			s.e.log.Warn("SLA misses sent not known: a deadline before the server's start is taken as sent", "slot", id.String(), "error", err)
		}
		sent = deadline.Before(s.e.started)
	}
	if sent {
		return
	}
	s.slaMisses = append(s.slaMisses, slaMiss{id: id, deadline: deadline})
	if s.rep.SLAMissed == nil {
		s.rep.SLAMissed = make(map[string]int)
	}
	s.rep.SLAMissed[ws.id]++
	s.e.log.Warn("slot missed its SLA", "slot", id.String(), "status", string(st.Status), "deadline", slot.FormatTime(deadline))
	s.event(ws.w, workflow.EventSLAMissed, st, detail, slot.ID{})
}

// slaNoted reports whether a slot's SLA miss is noted.
func (e *Engine) slaNoted(id slot.ID) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	_, ok := e.sla[id]
	return ok
}

// slaPending reports whether slot st of ws may still miss its SLA: the done
// mark must not pass it (a slot that failed early misses it at its
// deadline).
func (s *stepper) slaPending(ws *wfStep, st slot.State) bool {
	return ws.w.SLA != nil && st.Status != slot.Success && !s.e.slaNoted(st.ID)
}

// events queues the events of a workflow's transitions (sent once they
// are durable, by apply).
func (s *stepper) events(ws *wfStep, d Decision, obs []Observation) {
	if len(ws.w.Notify) == 0 || s.e.opts.OnEvent == nil {
		return
	}
	for _, ch := range d.Changes {
		from, to := ws.slots[ch.Index], ch.To
		detail := ""
		if from.Status == slot.Running {
			detail = obs[ch.Index].Job.Detail
		}
		switch {
		case to.Status == slot.Failure:
			s.event(ws.w, workflow.EventFailure, to, detail, to.ID)
		case to.Status == slot.WaitTimeout:
			s.event(ws.w, workflow.EventWaitTimeout, to, detail, to.ID)
		case to.Status == slot.Success && to.RetryCount > 0:
			s.event(ws.w, workflow.EventSuccessAfterRetries, to, detail, to.ID)
		}
	}
}

// event queues an event for the targets of w that want it.
func (s *stepper) event(w *workflow.Workflow, kind string, st slot.State, detail string, tied slot.ID) {
	if s.e.opts.OnEvent == nil {
		return
	}
	var targets []workflow.Notification
	for _, n := range w.Notify {
		if n.Wants(kind) {
			targets = append(targets, n)
		}
	}
	if len(targets) == 0 {
		return
	}
	s.pendingEvents = append(s.pendingEvents, pendingEvent{slot: tied, ev: scheduler.Event{
		Kind: kind, Workflow: w.ID, Slot: st.ID.Time, Status: st.Status, ExternalID: st.ExternalID,
		RetryCount: st.RetryCount, At: s.now, Detail: detail, Targets: targets}})
}

// emit hands the step's events to OnEvent, but those whose slot's state
// could not be recorded.
func (s *stepper) emit(failed map[slot.ID]error) {
	var discard []pendingEvent
	for _, pe := range s.pendingEvents {
		if _, bad := failed[pe.slot]; bad && !pe.slot.Time.IsZero() {
			discard = append(discard, pe)
			continue
		}
		s.e.commitOutbox(pe)
		s.e.opts.OnEvent(pe.ev)
	}
	s.e.discardOutbox(discard...) // (one write)
	s.pendingEvents = nil
}
