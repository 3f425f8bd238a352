// Package engine is the slot engine: it loads the workflows directory,
// runs scheduler steps (enumerate each workflow's slots in the window,
// decide their transitions with Decide, submit READY slots to external
// services, persist what changed) and serves the operations of the HTTP
// API (scheduler.Service: slots, trigger status, rerun, kill, pause, registers).
//
// # Crash safety of submission
//
// Before it calls an external service's Submit for a slot, the engine
// writes a submit intent (statedb.PutIntents: the slot, the attempt, the
// wall-clock time; durable before any Submit of the step), and it deletes
// the intent once the slot's RUNNING state with its external ID is
// durable. If the process dies in between, the slot is still READY on the next step and has an intent: the engine then asks
// the service (external.Recoverer) whether it accepted a job for the slot
// since the intent's time, and records that job instead of submitting a
// second one. A service that cannot answer is retried on the next step; a
// service without Recoverer is submitted to again (logged). An intent
// is only ever recovered for the attempt that wrote it: one left on a
// RUNNING slot (a crash between the RUNNING write and the intent's removal)
// is dropped when the slot is stepped, one of an earlier attempt (its
// Attempt differs from the slot's retry count) is replaced by a new
// submission, and Rerun and Kill delete it.
//
// # Cost of a step
//
// Per workflow the engine remembers up to which slot time every slot of the
// window is final ("done"); a step enumerates schedule times only from
// there, plus the stored slots that are not final and the slots marked for
// rerun. A steady-state step therefore reads no file, writes no file, and
// costs in proportion to the slots that can still change, not to the
// window or the history on disk. What a step changes is written in bulk
// (statedb.Batch): a few file-system syncs per step, not per slot.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/celos-go/celos/scheduler"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/schedule"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/schema/workflow"
)

// Options configure an Engine.
type Options struct {
	// WorkflowsDir holds the compiled workflow files (*.json).
	WorkflowsDir string
	// DB is the open state database.
	DB *statedb.DB
	// Services run slots, by workflow.ExternalService.Type ("command", "oozie").
	Services map[string]external.Service
	// FS answers hdfsCheck triggers; nil means trigger.NewMux("") (file: only).
	FS trigger.FileSystems
	// Clock is the wall clock (submit intents, rerun markers written by
	// steps); nil means time.Now.
	Clock func() time.Time
	// Logger receives transitions and errors; nil means slog.Default().
	Logger *slog.Logger
	// CallTimeout bounds each call to an external service or trigger file
	// system; 0 means one minute.
	CallTimeout time.Duration
	// OnStep, if set, is called after every step with its report (metrics).
	OnStep func(StepReport)
}

// Engine is the slot engine. It implements scheduler.Service. Steps and the
// operations that change slots (rerun, kill) are serialized; reads run
// beside them.
type Engine struct {
	opts   Options
	db     *statedb.DB
	fs     trigger.FileSystems
	clock  func() time.Time
	log    *slog.Logger
	stepMu sync.Mutex // held by Step, Rerun, Kill, ClearCache

	loader *loader // guarded by stepMu

	mu       sync.RWMutex // guards the fields below
	cfg      *config
	done     map[string]doneMark // per workflow, see stepWorkflow
	problems map[problemKey]scheduler.Problem
	last     StepReport
}

type doneMark struct {
	key   string    // schedule key and start time the mark is valid for
	until time.Time // every schedule time in [window start, until) is final
}

type problemKey struct {
	wf string
	t  int64 // slot time (UnixMilli), or -1 for a workflow-level problem
}

// StepReport describes one step.
type StepReport struct {
	Now      time.Time     // the step's time
	Started  time.Time     // wall clock
	Duration time.Duration // wall clock
	// Workflows stepped, paused (skipped), and failed (not stepped at all).
	Workflows, Paused, Failed int
	// Slots considered (not counting the final slots the step skipped).
	Slots int
	// Transitions by the status entered (RUNNING counts submissions).
	Transitions map[slot.Status]int
	// Errors by Op ("trigger", "submit", "status", ...): slots left as
	// they were because something could not answer.
	Errors map[string]int
	// LoadErrors is the number of workflows files that did not load.
	LoadErrors int
	// Writes is the number of files the step wrote or removed.
	Writes int64
}

// New loads the workflows directory and returns an engine.
func New(opts Options) (*Engine, error) {
	if opts.DB == nil {
		return nil, errors.New("engine: no state database")
	}
	if opts.WorkflowsDir == "" {
		return nil, errors.New("engine: no workflows directory")
	}
	e := &Engine{
		opts:     opts,
		db:       opts.DB,
		fs:       opts.FS,
		clock:    opts.Clock,
		log:      opts.Logger,
		loader:   &loader{dir: opts.WorkflowsDir, db: opts.DB, files: make(map[string]*fileEntry)},
		done:     make(map[string]doneMark),
		problems: make(map[problemKey]scheduler.Problem),
	}
	if e.fs == nil {
		e.fs = trigger.NewMux("")
	}
	if e.clock == nil {
		e.clock = time.Now
	}
	if e.log == nil {
		e.log = slog.Default()
	}
	e.loader.log = e.log
	if e.opts.CallTimeout <= 0 {
		e.opts.CallTimeout = time.Minute
	}
	e.stepMu.Lock()
	e.reload()
	e.stepMu.Unlock()
	return e, nil
}

var _ scheduler.Service = (*Engine)(nil)

// reload re-reads the workflows directory; stepMu is held.
func (e *Engine) reload() *config {
	c := e.loader.load()
	if c == e.cfg {
		return c // nothing changed; already logged
	}
	for _, le := range c.newLoadErrs {
		e.log.Error("workflows file not loaded", "file", le.File, "error", le.Error)
	}
	for id, err := range c.schedErrs {
		e.log.Error("workflow schedule", "workflow", id, "error", err)
	}
	e.mu.Lock()
	e.cfg = c
	for k := range e.problems { // workflows that are gone have no problems
		if c.workflows[k.wf] == nil {
			delete(e.problems, k)
		}
	}
	for id := range e.done {
		if c.workflows[id] == nil {
			delete(e.done, id)
		}
	}
	e.mu.Unlock()
	return c
}

func (e *Engine) config() *config {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.cfg
}

// setProblem records a problem and reports whether it is news: the slot (or
// workflow) had no problem, or a different one.
func (e *Engine) setProblem(wf string, t time.Time, op string, err error) bool {
	k := problemKey{wf, -1}
	if !t.IsZero() {
		k.t = t.UnixMilli()
	}
	msg := err.Error()
	e.mu.Lock()
	old, had := e.problems[k]
	e.problems[k] = scheduler.Problem{Workflow: wf, Slot: t, Op: op, Error: msg, At: e.clock().UTC()}
	e.mu.Unlock()
	return !had || old.Op != op || old.Error != msg
}

func (e *Engine) clearProblem(wf string, t time.Time) {
	k := problemKey{wf, -1}
	if !t.IsZero() {
		k.t = t.UnixMilli()
	}
	e.mu.Lock()
	delete(e.problems, k)
	e.mu.Unlock()
}

// Problems lists the problems kept for workflow wf ("" for all), oldest
// slot first.
func (e *Engine) Problems(wf string) []scheduler.Problem {
	e.mu.RLock()
	out := make([]scheduler.Problem, 0, len(e.problems))
	for k, p := range e.problems {
		if wf == "" || k.wf == wf {
			out = append(out, p)
		}
	}
	e.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Workflow != out[j].Workflow {
			return out[i].Workflow < out[j].Workflow
		}
		return out[i].Slot.Before(out[j].Slot)
	})
	return out
}

// LastStep returns the report of the last step.
func (e *Engine) LastStep() StepReport {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.last
}

// Step reloads the workflows directory and runs one step at now for every
// workflow that is not paused, or only for those named in ids (unknown
// names are logged and ignored). One workflow's failure is logged, kept in
// Problems, and does not stop the others. Step returns an error when ctx
// is done, and one wrapping ErrPersist when the state database refused a
// write (read-only, full): the step went on, changing nothing it could not
// record, and the caller must hear of it (POST /scheduler answers 500).
func (e *Engine) Step(ctx context.Context, now time.Time, ids []string) error {
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	now = now.UTC()
	rep := StepReport{Now: now, Started: time.Now(), Transitions: make(map[slot.Status]int), Errors: make(map[string]int)}
	writes0 := e.db.Stats().Writes
	c := e.reload()
	rep.LoadErrors = len(c.loadErrs)
	todo := c.ids
	if ids != nil {
		todo = nil
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
	}
	e.db.Preload(todo, 8) // start-up: read the state files in parallel
	st := &stepper{e: e, now: now, env: trigger.Env{States: e.db, FS: trigger.NewMemo(e.fs)}, rep: &rep, failed: make(map[int64]bool),
		batch: e.db.Batch(), to: make(map[slot.ID]slot.Status)}
	defer st.commit() // also when ctx ends the step early
	for _, id := range todo {
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.db.Paused(id) {
			rep.Paused++
			continue
		}
		if err := st.safeWorkflow(ctx, c, id); err != nil {
			rep.Failed++
			e.setProblem(id, time.Time{}, "step", err)
			e.log.Error("workflow not stepped", "workflow", id, "error", err)
			continue
		}
		e.clearProblem(id, time.Time{})
		rep.Workflows++
	}
	st.submitAll(ctx)
	st.commit()
	rep.Duration = time.Since(rep.Started)
	rep.Writes = e.db.Stats().Writes - writes0
	e.mu.Lock()
	e.last = rep
	e.mu.Unlock()
	if e.opts.OnStep != nil {
		e.opts.OnStep(rep)
	}
	if st.dbErr != nil {
		return fmt.Errorf("%w: %d slot changes not recorded, the first: %v", ErrPersist, st.dbErrs, st.dbErr)
	}
	return nil
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
	e      *Engine
	now    time.Time
	env    trigger.Env
	rep    *StepReport
	times  []time.Time    // reused buffer
	failed map[int64]bool // slots of the current workflow that met an error
	batch  *statedb.Batch // the step's transitions, committed at its end
	unmark []slot.ID      // rerun markers to drop after the commit
	to     map[slot.ID]slot.Status
	// pending are the READY slots to submit at the end of the step;
	// submitted are those now RUNNING (their intents go after the
	// commit), dropIntents those whose submission was refused outright.
	pending     []pendingSubmit
	submitted   []slot.ID
	dropIntents []slot.ID
	// dbErr is the first write the state database refused; dbErrs counts them.
	dbErr  error
	dbErrs int
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

// safeWorkflow steps one workflow; a panic in it (a trigger's file system
// or an external service gone wrong) becomes that workflow's error.
func (s *stepper) safeWorkflow(ctx context.Context, c *config, id string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			s.e.log.Error("panic while stepping a workflow", "workflow", id, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("internal error: %v", p)
		}
	}()
	return s.workflow(ctx, c, id)
}

func (s *stepper) workflow(ctx context.Context, c *config, id string) error {
	e := s.e
	w := c.workflows[id]
	sched := c.scheds[id]
	clear(s.failed)
	if sched == nil {
		return fmt.Errorf("schedule: %w", c.schedErrs[id])
	}
	start := windowStart(w, s.now)
	markKey := sched.Key() + "\x00" + w.StartTime.String()
	e.mu.RLock()
	mark := e.done[id]
	e.mu.RUnlock()
	from := start
	if mark.key == markKey && mark.until.After(from) {
		from = mark.until
	}
	// enum: the schedule times not yet known to be final, in [from, now).
	enum := sched.AppendTimes(s.times[:0], from, s.now)
	s.times = enum
	active, err := e.db.Active(id)
	if err != nil {
		return err
	}
	marks, err := e.db.RerunMarks(id)
	if err != nil {
		return err
	}
	rerun := make(map[int64]statedb.RerunMark, len(marks))
	for _, m := range marks {
		rerun[m.Slot.UnixMilli()] = m
	}
	// Besides enum: stored slots that are not final (in the window and the
	// schedule, or RUNNING anywhere: a job is polled until it ends) and
	// slots marked for rerun (anywhere).
	var extra []time.Time
	for _, a := range active {
		t := a.ID.Time
		inWindow := !t.Before(start) && t.Before(s.now)
		if a.Status == slot.Running || (inWindow && sched.InSchedule(t)) {
			extra = append(extra, t)
		}
	}
	for _, m := range marks {
		extra = append(extra, m.Slot)
	}
	times := enum
	if len(extra) > 0 {
		times = append(append(make([]time.Time, 0, len(enum)+len(extra)), enum...), extra...)
		sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
		times = dedupe(times)
	}

	slots := make([]slot.State, 0, len(times))
	for _, t := range times {
		sid := slot.ID{Workflow: id, Time: t}
		st, found, err := e.db.Get(sid)
		if err != nil {
			s.fail(sid, "state", err)
			continue
		}
		if !found {
			st = slot.NewWaiting(sid)
		}
		slots = append(slots, st)
	}
	s.rep.Slots += len(slots)
	// A RUNNING slot's intent is left over from a crash (or a failed sync)
	// between the RUNNING write and the intent's removal: drop it, or a
	// retry would "recover" the job that already ran.
	for _, st := range slots {
		if st.Status != slot.Running {
			continue
		}
		if _, left, err := e.db.GetIntent(st.ID); err == nil && left {
			if err := e.db.DeleteIntent(st.ID); err != nil {
				e.log.Warn("delete leftover submit intent", "slot", st.ID.String(), "error", err)
			}
		}
	}

	obs := make([]Observation, len(slots))
	svc := e.opts.Services[w.ExternalService.Type]
	for i := range slots {
		trig, stat := Needs(slots[i])
		switch {
		case trig:
			tctx, cancel := context.WithTimeout(ctx, e.opts.CallTimeout)
			obs[i].TriggerReady, obs[i].TriggerErr = trigger.Ready(tctx, s.env, &w.Trigger, slots[i].ID.Time, s.now)
			cancel()
			if obs[i].TriggerErr != nil {
				s.fail(slots[i].ID, "trigger", obs[i].TriggerErr)
			}
		case stat:
			if svc == nil {
				obs[i].JobErr = fmt.Errorf("no external service of type %q is configured", w.ExternalService.Type)
			} else {
				cctx, cancel := context.WithTimeout(ctx, e.opts.CallTimeout)
				obs[i].Job, obs[i].JobErr = svc.Status(cctx, w, slots[i].ExternalID)
				cancel()
			}
			if obs[i].JobErr != nil {
				s.fail(slots[i].ID, "status", obs[i].JobErr)
			}
		}
	}

	d := Decide(PolicyOf(w), slots, s.now, obs)
	slotsBefore := append([]slot.State(nil), slots...)
	for _, i := range d.Submit { // submitted for every workflow at once, at the end of the step
		s.pending = append(s.pending, pendingSubmit{w: w, svc: svc, st: slots[i]})
	}

	// Transitions are visible at once and made durable together at the end
	// of the step (statedb.Batch); submissions above are durable one by one
	// (the submit-intent protocol needs it).
	for _, ch := range d.Changes {
		from := slots[ch.Index]
		if err := s.batch.Put(ch.To); err != nil {
			s.fail(from.ID, "persist", err)
			s.persistFailed(err)
			continue
		}
		if from.Status == slot.Running {
			// Why a job's slot moved: the service's word (exit 3, never
			// started, exit status unknown: ...).
			s.transition(from, ch.To, "job", from.ExternalID, "reason", obs[ch.Index].Job.Detail)
		} else {
			s.transition(from, ch.To)
		}
		slots[ch.Index] = ch.To
	}

	// Clear the problems of slots that were observed without error; drop
	// the rerun markers of final slots outside the window (Celos #590) or
	// older than statedb.RerunExpiry. A marker of a slot that is not final
	// is kept however old: a rerun slot is stepped until it is final.
	for i, st := range slots {
		if trig, stat := Needs(slotsBefore[i]); (trig || stat) && !s.failed[st.ID.Time.UnixMilli()] {
			e.clearProblem(id, st.ID.Time)
		}
		if m, ok := rerun[st.ID.Time.UnixMilli()]; ok && st.Status.Final() && (st.ID.Time.Before(start) || m.Expired(s.now)) {
			s.unmark = append(s.unmark, st.ID) // once the final state is durable
		}
	}

	// Forget problems of slots that left the window and are not stepped.
	stepped := make(map[int64]bool, len(slots))
	for _, st := range slots {
		stepped[st.ID.Time.UnixMilli()] = true
	}
	e.mu.Lock()
	for k := range e.problems {
		if k.wf == id && k.t >= 0 && k.t < start.UnixMilli() && !stepped[k.t] {
			delete(e.problems, k)
		}
	}
	e.mu.Unlock()

	// Move the done mark to the first enumerated schedule time whose slot
	// is not final (or was skipped), else to now.
	until := s.now
	j := 0
	for _, t := range enum {
		for j < len(slots) && slots[j].ID.Time.Before(t) {
			j++
		}
		if j >= len(slots) || !slots[j].ID.Time.Equal(t) || !slots[j].Status.Final() {
			until = t
			break
		}
	}
	e.mu.Lock()
	e.done[id] = doneMark{key: markKey, until: until}
	e.mu.Unlock()
	return nil
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

// commit makes the step's transitions durable. A slot whose write failed
// is back in its previous state: it is reported, and the workflow's done
// mark is lowered to it so that the next step looks at it again.
func (s *stepper) commit() {
	failed := s.batch.Commit()
	for id, err := range failed {
		s.rep.Errors["persist"]++
		if st, ok := s.to[id]; ok {
			s.rep.Transitions[st]--
		}
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
	if err := s.e.db.DeleteIntents(drop); err != nil {
		s.e.log.Warn("delete submit intents", "error", err)
	}
	s.submitted, s.dropIntents = nil, nil
	clear(s.to)
}

func (s *stepper) fail(id slot.ID, op string, err error) {
	s.failed[id.Time.UnixMilli()] = true
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
	s.e.log.Info("slot transition", append([]any{"slot", to.ID.String(), "from", string(from.Status), "to", string(to.Status),
		"externalID", to.ExternalID, "retryCount", to.RetryCount}, attrs...)...)
}

// pendingSubmit is a READY slot the strategy chose, submitted at the end
// of the step.
type pendingSubmit struct {
	w   *workflow.Workflow
	svc external.Service
	st  slot.State
}

// submitAll submits the step's chosen READY slots with the submit-intent
// protocol of the package documentation, in bulk so that its durable writes
// cost a few file-system syncs per step rather than a few per slot: the
// intents of all slots (durable before any Submit), the submissions, the
// RUNNING states (in the step's batch), then, once those are durable, the
// removal of the intents (commit).
func (s *stepper) submitAll(ctx context.Context) {
	e := s.e
	pending := s.pending
	s.pending = nil
	intents := make(map[slot.ID]statedb.Intent)
	var todo []pendingSubmit
	for _, p := range pending {
		id := p.st.ID
		if p.svc == nil {
			s.fail(id, "submit", fmt.Errorf("no external service of type %q is configured", p.w.ExternalService.Type))
			continue
		}
		in, left, err := e.db.GetIntent(id)
		if err != nil {
			s.fail(id, "submit", err)
			continue
		}
		if left && !intentOf(in, p.st) {
			// An intent of an earlier attempt (a crash between a RUNNING
			// write and the intent's removal): that job already ran; the
			// new intent below replaces it.
			e.log.Info("dropping the submit intent of an earlier attempt", "slot", id.String(),
				"intentAttempt", in.Attempt, "retryCount", p.st.RetryCount)
			left = false
		}
		if left {
			if rec, ok := p.svc.(external.Recoverer); ok {
				var ext string
				var found bool
				err := guard(func() (err error) {
					cctx, cancel := context.WithTimeout(ctx, e.opts.CallTimeout)
					defer cancel()
					ext, found, err = rec.Recover(cctx, p.w, id, in.Time)
					return err
				})
				if err != nil {
					s.fail(id, "recover", err)
					continue
				}
				if found {
					e.log.Info("recovered a job submitted before a crash", "slot", id.String(), "externalID", ext)
					s.running(p, ext)
					continue
				}
			} else {
				e.log.Warn("a previous submission of this slot may have reached the service, which cannot be asked; submitting again",
					"slot", id.String(), "service", p.w.ExternalService.Type, "intent", slot.FormatTime(in.Time))
			}
		}
		intents[id] = statedb.Intent{Attempt: p.st.RetryCount, Time: e.clock()}
		todo = append(todo, p)
	}
	if len(todo) == 0 {
		return
	}
	failed := e.db.PutIntents(intents)
	for _, p := range todo {
		id := p.st.ID
		if err := failed[id]; err != nil {
			s.fail(id, "submit", fmt.Errorf("record submit intent: %w", err))
			s.persistFailed(err)
			continue
		}
		if err := ctx.Err(); err != nil {
			s.fail(id, "submit", err) // the intent stays; harmless
			continue
		}
		var ext string
		err := guard(func() (err error) {
			cctx, cancel := context.WithTimeout(ctx, e.opts.CallTimeout)
			defer cancel()
			ext, err = p.svc.Submit(cctx, p.w, id)
			return err
		})
		if err != nil {
			if !errors.Is(err, external.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				// A definite refusal: no job exists, forget the intent.
				s.dropIntents = append(s.dropIntents, id)
			}
			s.fail(id, "submit", err)
			continue
		}
		s.running(p, ext)
	}
}

// intentOf reports whether submit intent in belongs to the current attempt
// of st (an intent of unknown attempt, < 0, is taken to).
func intentOf(in statedb.Intent, st slot.State) bool {
	return in.Attempt < 0 || in.Attempt == st.RetryCount
}

// guard runs f, turning a panic into an error (an external service gone
// wrong must not take the server down).
func guard(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: internal error: %v", external.ErrUnavailable, p)
		}
	}()
	return f()
}

// running records a submitted (or recovered) slot as RUNNING in the
// step's batch; its intent is removed once that is durable.
func (s *stepper) running(p pendingSubmit, ext string) {
	to := slot.State{ID: p.st.ID, Status: slot.Running, ExternalID: ext, RetryCount: p.st.RetryCount}
	if err := s.batch.Put(to); err != nil {
		// The intent stays: the next step recovers the job.
		s.fail(to.ID, "persist", err)
		s.persistFailed(err)
		return
	}
	s.e.clearProblem(to.ID.Workflow, to.ID.Time)
	s.transition(p.st, to)
	s.submitted = append(s.submitted, to.ID)
}

func (e *Engine) workflow(c *config, id string) (*workflow.Workflow, error) {
	w := c.workflows[id]
	if w == nil {
		return nil, fmt.Errorf("%w: %s", slot.ErrUnknownWorkflow, id)
	}
	return w, nil
}

// WorkflowIDs lists the loaded workflows, sorted.
func (e *Engine) WorkflowIDs() []string {
	return append([]string(nil), e.config().ids...)
}

// Workflow returns a loaded workflow's definition.
func (e *Engine) Workflow(id string) (*workflow.Workflow, error) {
	return e.workflow(e.config(), id)
}

// WorkflowFile returns the name of the file that defines workflow id.
func (e *Engine) WorkflowFile(id string) (string, error) {
	c := e.config()
	if _, err := e.workflow(c, id); err != nil {
		return "", err
	}
	return c.file[id], nil
}

// LoadErrors lists the workflows files that failed to load at the last reload.
func (e *Engine) LoadErrors() []scheduler.LoadError {
	return append([]scheduler.LoadError(nil), e.config().loadErrs...)
}

// Schedule returns a workflow's resolved schedule, or the error that keeps
// it from having one (a dependent schedule naming a missing workflow, a
// cycle).
func (e *Engine) Schedule(id string) (*schedule.Schedule, error) {
	return e.schedule(e.config(), id)
}

// schedule is Schedule in config c.
func (e *Engine) schedule(c *config, id string) (*schedule.Schedule, error) {
	if _, err := e.workflow(c, id); err != nil {
		return nil, err
	}
	if s := c.scheds[id]; s != nil {
		return s, nil
	}
	if err := c.schedErrs[id]; err != nil {
		return nil, fmt.Errorf("%w: workflow %s: %w", scheduler.ErrUnschedulable, id, err)
	}
	return nil, fmt.Errorf("%w: workflow %s", scheduler.ErrUnschedulable, id)
}

// Slots returns the slots of workflow id in [start, end), newest first: its
// schedule times (from its startTime on) and the slots marked for rerun in
// that range, with missing records synthesized as WAITING. Slots whose
// file is corrupt are left out (Problems reports them).
func (e *Engine) Slots(ctx context.Context, id string, start, end time.Time) ([]slot.State, error) {
	c := e.config() // once: a reload in between must not mix two configs
	w, err := e.workflow(c, id)
	if err != nil {
		return nil, err
	}
	sched, err := e.schedule(c, id)
	if err != nil {
		return nil, err
	}
	if start.Before(w.StartTime) {
		start = w.StartTime
	}
	if !start.Before(end) {
		return []slot.State{}, nil
	}
	times := sched.Times(start, end)
	marks, err := e.db.RerunMarks(id)
	if err != nil {
		return nil, err
	}
	added := false
	for _, m := range marks {
		if !m.Slot.Before(start) && m.Slot.Before(end) {
			times = append(times, m.Slot)
			added = true
		}
	}
	if added {
		sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
		times = dedupe(times)
	}
	out := make([]slot.State, 0, len(times))
	for i := len(times) - 1; i >= 0; i-- {
		sid := slot.ID{Workflow: id, Time: times[i]}
		st, found, err := e.db.Get(sid)
		if err != nil {
			continue
		}
		if !found {
			st = slot.NewWaiting(sid)
		}
		out = append(out, st)
	}
	return out, nil
}

// SlotState returns the stored state of one slot (ErrSlotNotFound if none).
// As in Celos, the workflow need not be loaded.
func (e *Engine) SlotState(ctx context.Context, id slot.ID) (slot.State, error) {
	st, found, err := e.db.Get(id)
	if errors.Is(err, statedb.ErrBadName) {
		return slot.State{}, fmt.Errorf("%w: %v", slot.ErrBadParameter, err)
	}
	if err != nil {
		return slot.State{}, err
	}
	if !found {
		return slot.State{}, fmt.Errorf("%w: %s", slot.ErrSlotNotFound, id)
	}
	return st, nil
}

// Paused reports whether a workflow is paused.
func (e *Engine) Paused(id string) (bool, error) {
	if _, err := e.Workflow(id); err != nil {
		return false, err
	}
	return e.db.Paused(id), nil
}

// SetPaused pauses or unpauses a workflow.
func (e *Engine) SetPaused(ctx context.Context, id string, paused bool) error {
	if _, err := e.Workflow(id); err != nil {
		return err
	}
	return e.db.SetPaused(id, paused)
}

// TriggerStatus evaluates the trigger of slot id at now and explains it.
// If the trigger itself is fine but the slot's last submit or status call
// failed, Error says so.
func (e *Engine) TriggerStatus(ctx context.Context, id slot.ID, now time.Time) (trigger.Status, error) {
	w, err := e.Workflow(id.Workflow)
	if err != nil {
		return trigger.Status{}, err
	}
	tctx, cancel := context.WithTimeout(ctx, e.opts.CallTimeout)
	defer cancel()
	st := trigger.Evaluate(tctx, trigger.Env{States: e.db, FS: e.fs}, &w.Trigger, id.Time, now)
	if st.Error == "" {
		e.mu.RLock()
		p, ok := e.problems[problemKey{id.Workflow, id.Time.UnixMilli()}]
		e.mu.RUnlock()
		if ok {
			st.Error = fmt.Sprintf("%s failed at %s: %s", p.Op, slot.FormatTime(p.At), p.Error)
		}
	}
	return st, nil
}

// inSchedule checks that id names a slot: a time of the workflow's
// schedule, or a slot that has a record (a schedule change, a rerun of an
// odd time) so that it can still be killed or rerun.
func (e *Engine) inSchedule(id slot.ID) (*workflow.Workflow, slot.State, bool, error) {
	c := e.config()
	w, err := e.workflow(c, id.Workflow)
	if err != nil {
		return nil, slot.State{}, false, err
	}
	st, found, err := e.db.Get(id)
	if errors.Is(err, statedb.ErrCorrupt) {
		// Unreadable: the operator's rerun or kill repairs it (Status "").
		e.log.Warn("slot file unreadable; rerun or kill rewrites it", "slot", id.String(), "error", err)
		return w, slot.State{ID: id}, true, nil
	}
	if err != nil {
		return nil, slot.State{}, false, err
	}
	if found {
		return w, st, true, nil
	}
	sched, err := e.schedule(c, id.Workflow)
	if err != nil {
		return nil, slot.State{}, false, err
	}
	if !sched.InSchedule(id.Time) {
		return nil, slot.State{}, false, fmt.Errorf("%w: %s", slot.ErrNotInSchedule, id)
	}
	return w, slot.NewWaiting(id), false, nil
}

// checkRerun is what Rerun checks before it changes anything: the slot
// (as inSchedule finds it), that it is due (not after now: a rerun marker
// makes the next step take the slot at once, so a slot the schedule has
// not reached would run early and then never at its time) and not before
// the workflow's startTime (the workflow has no slots there), and that it
// is final or has never run.
func (e *Engine) checkRerun(id slot.ID, now time.Time) (slot.State, bool, error) {
	w, st, found, err := e.inSchedule(id)
	if err != nil {
		return slot.State{}, false, err
	}
	if id.Time.Before(w.StartTime) {
		return slot.State{}, false, fmt.Errorf("%w: %s is before the workflow's startTime %s, where the workflow has no slots",
			scheduler.ErrRerunRefused, id, slot.FormatTime(w.StartTime))
	}
	if id.Time.After(now) {
		return slot.State{}, false, fmt.Errorf("%w: %s is not due yet (the server's time is %s); it runs at its time",
			scheduler.ErrRerunRefused, id, slot.FormatTime(now))
	}
	if found && st.Status != "" && !st.Status.Final() {
		return slot.State{}, false, fmt.Errorf("%w: cannot rerun %s, it is %s", slot.ErrIllegalTransition, id, st.Status)
	}
	return st, found, nil
}

// CheckRerun returns the state of slot id (WAITING if it has no readable
// record) when Rerun at now would accept it, else Rerun's error; it
// changes nothing (scheduler.RerunChecker: GET /rerun).
func (e *Engine) CheckRerun(ctx context.Context, id slot.ID, now time.Time) (slot.State, error) {
	st, found, err := e.checkRerun(id, now)
	if err == nil && (!found || st.Status == "") {
		st = slot.NewWaiting(id)
	}
	return st, err
}

// Rerun marks slot id for rerun (stamped with now) and, if it has a final
// state, resets it to WAITING with retryCount 0. A slot that is not final
// gives ErrIllegalTransition; a time that is neither in the schedule nor
// stored gives ErrNotInSchedule; a time after now or before the workflow's
// startTime gives scheduler.ErrRerunRefused.
func (e *Engine) Rerun(ctx context.Context, id slot.ID, now time.Time) error {
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	st, found, err := e.checkRerun(id, now)
	if err != nil {
		return err
	}
	// Marker first: a crash after it leaves a final slot that can be rerun
	// again, never a WAITING slot outside the window that nothing steps.
	if err := e.db.MarkRerun(id, now); err != nil {
		return fmt.Errorf("rerun %s: mark: %w", id, err)
	}
	// A leftover submit intent belongs to a job that already ran: a rerun
	// must submit a new one, not recover that one.
	if err := e.db.DeleteIntent(id); err != nil {
		return fmt.Errorf("rerun %s: delete submit intent: %w", id, err)
	}
	if found {
		to := slot.State{ID: st.ID, Status: slot.Waiting}
		if err := e.db.Put(to); err != nil {
			return fmt.Errorf("rerun %s: %w", id, err)
		}
		e.log.Info("slot transition", "slot", id.String(), "from", string(st.Status), "to", string(to.Status), "reason", "rerun")
	}
	e.clearProblem(id.Workflow, id.Time)
	e.lowerDone(id)
	return nil
}

func (e *Engine) lowerDone(id slot.ID) {
	e.mu.Lock()
	if m, ok := e.done[id.Workflow]; ok && !id.Time.After(m.until) {
		m.until = id.Time
		e.done[id.Workflow] = m
	}
	e.mu.Unlock()
}

// Kill marks slot id KILLED. If it has an external job, the service's Kill
// is called first, and an error there leaves the state unchanged. A slot
// with a leftover submit intent is looked up on the service (Recoverer)
// so that a job submitted just before a crash is killed too. A final slot
// gives ErrIllegalTransition.
func (e *Engine) Kill(ctx context.Context, id slot.ID) error {
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	w, st, _, err := e.inSchedule(id)
	if err != nil {
		return err
	}
	if st.Status.Final() { // (an unreadable slot, Status "", may be killed)
		return fmt.Errorf("%w: cannot kill %s, it is %s", slot.ErrIllegalTransition, id, st.Status)
	}
	svc := e.opts.Services[w.ExternalService.Type]
	ext := st.ExternalID
	in, left, err := e.db.GetIntent(id)
	if err != nil {
		return fmt.Errorf("kill %s: read submit intent: %w", id, err)
	}
	if left && ext == "" && st.Status == slot.Ready && intentOf(in, st) {
		if rec, ok := svc.(external.Recoverer); ok {
			var x string
			var found bool
			err := guard(func() (err error) {
				cctx, cancel := context.WithTimeout(ctx, e.opts.CallTimeout)
				defer cancel()
				x, found, err = rec.Recover(cctx, w, id, in.Time)
				return err
			})
			if err != nil {
				return fmt.Errorf("kill %s: look for a job submitted before a crash: %w", id, err)
			}
			if found {
				ext = x
			}
		}
	}
	if ext != "" {
		if svc == nil {
			return fmt.Errorf("kill %s: no external service of type %q is configured", id, w.ExternalService.Type)
		}
		cctx, cancel := context.WithTimeout(ctx, e.opts.CallTimeout)
		err := svc.Kill(cctx, w, ext)
		cancel()
		if err != nil {
			return fmt.Errorf("kill %s (external ID %s): %w", id, ext, err)
		}
	}
	// The intent goes first: its job (if any) is killed, and a KILLED slot
	// that is later rerun must not recover it.
	if err := e.db.DeleteIntent(id); err != nil {
		return fmt.Errorf("kill %s: delete submit intent: %w", id, err)
	}
	to := slot.State{ID: id, Status: slot.Killed, ExternalID: ext}
	if err := e.db.Put(to); err != nil {
		return fmt.Errorf("kill %s: %w", id, err)
	}
	e.clearProblem(id.Workflow, id.Time)
	e.log.Info("slot transition", "slot", id.String(), "from", string(st.Status), "to", string(slot.Killed), "externalID", ext, "reason", "kill")
	return nil
}

func registerErr(err error) error {
	switch {
	case errors.Is(err, statedb.ErrBadName):
		return fmt.Errorf("%w: %v", slot.ErrBadParameter, err)
	case errors.Is(err, statedb.ErrNotFound):
		// statedb says "not found: register b/k"; keep only what it names.
		return fmt.Errorf("%w: %s", scheduler.ErrRegisterNotFound, strings.TrimPrefix(err.Error(), statedb.ErrNotFound.Error()+": "))
	}
	return err
}

// GetRegister returns the JSON under bucket/key (scheduler.ErrRegisterNotFound if none).
func (e *Engine) GetRegister(ctx context.Context, bucket, key string) (json.RawMessage, error) {
	v, err := e.db.GetRegister(bucket, key)
	return v, registerErr(err)
}

// PutRegister stores a JSON value under bucket/key.
func (e *Engine) PutRegister(ctx context.Context, bucket, key string, value json.RawMessage) error {
	return registerErr(e.db.PutRegister(bucket, key, value))
}

// DeleteRegister removes bucket/key.
func (e *Engine) DeleteRegister(ctx context.Context, bucket, key string) error {
	return registerErr(e.db.DeleteRegister(bucket, key))
}

// DeleteRegistersWithPrefix removes every key of bucket that starts with prefix.
func (e *Engine) DeleteRegistersWithPrefix(ctx context.Context, bucket, prefix string) error {
	return registerErr(e.db.DeleteRegistersWithPrefix(bucket, prefix))
}

// RegisterKeys lists the keys of bucket starting with prefix, sorted.
func (e *Engine) RegisterKeys(ctx context.Context, bucket, prefix string) ([]string, error) {
	k, err := e.db.RegisterKeys(bucket, prefix)
	return k, registerErr(err)
}

// ClearCache re-reads every workflows file (not only changed ones) and the
// state database's index, and forgets the per-workflow done marks.
func (e *Engine) ClearCache() error {
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	e.loader.forget()
	err := e.db.Reload()
	e.mu.Lock()
	e.done = make(map[string]doneMark)
	e.mu.Unlock()
	e.reload()
	return err
}

// StatusCounts returns, for every loaded workflow, how many of its stored
// slots are in each status (for metrics).
func (e *Engine) StatusCounts() map[string]map[slot.Status]int {
	out := make(map[string]map[slot.Status]int)
	for _, id := range e.config().ids {
		if m, err := e.db.Count(id); err == nil {
			out[id] = m
		}
	}
	return out
}
