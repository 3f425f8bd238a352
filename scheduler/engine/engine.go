// Package engine is the slot engine: it loads the workflows directory,
// runs scheduler steps and serves the operations of the HTTP API
// (scheduler.Service: slots, trigger status, rerun, kill, pause,
// registers). Its state lives behind Store (store.go; statedb.DB is the
// one on disk).
//
// # A step
//
// A step (step.go) gathers the state of every workflow it steps (one read:
// the slots of the window that can still change, rerun markers, paused
// flags), observes the triggers and external services of those slots
// against that state, decides their transitions with the pure Decide
// (decide.go), submits the READY slots it chose (submit.go) and applies
// what changed in one batched write. No slot is written before that write,
// so every trigger reads the state as it was when the step began and the
// outcome does not depend on the order in which workflows are visited.
//
// # Crash safety of submission
//
// Before it calls an external service's Submit for a slot, the engine
// writes a submit intent (Store.PutIntents: the slot, the attempt, the
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
// (Store.PutStates; statedb.Batch): a few file-system syncs per step, not
// per slot.
package engine

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/celos-go/celos/scheduler"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/pool"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/scheduler/trigger"
)

// Options configure an Engine.
type Options struct {
	// WorkflowsDir holds the compiled workflow files (*.json).
	WorkflowsDir string
	// Store is the open state store (a *statedb.DB, or another Store).
	Store Store
	// Registers holds the registers of the API; nil means Store, if it
	// implements Registers (statedb.DB does).
	Registers Registers
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
	// PoolsFile is the installation's pools file (celos server --pools),
	// re-read at every step like the workflows; "" means no pools.
	PoolsFile string
	// OnEvent, if set, receives the events of workflows that have
	// notification targets, once the step's state is recorded. It is called
	// from the step and must not block (scheduler/notify queues).
	OnEvent func(scheduler.Event)
	// Owns, if set, says which workflows this engine may step: several
	// instances share one database and each steps the workflows whose
	// lease it holds (scheduler/cluster, docs/ha.md). It is asked when a
	// step begins and again just before each submission; nil means all.
	Owns func(wf string) bool
}

// Engine is the slot engine. It implements scheduler.Service. Steps and the
// operations that change slots (rerun, kill) are serialized; reads run
// beside them.
type Engine struct {
	opts   Options
	db     Store
	regs   Registers
	fs     trigger.FileSystems
	clock  func() time.Time
	log    *slog.Logger
	stepMu sync.Mutex // held by Step, Rerun, Kill, ClearCache

	loader *loader // guarded by stepMu
	// stateRead is the config for whose workflows a background load of the
	// store has completed: while the config stays the same, a step need
	// not ask the store to load anything (a read loads a workflow on
	// demand). Guarded by stepMu; ClearCache forgets it.
	stateRead *config
	wfBuf     []wfStep // the workflows of a step (gather); guarded by stepMu
	pools     *pool.File
	// out is the outbox of webhook deliveries (EnableOutbox).
	out outboxState
	// runs are the recent submissions of workflows with minInterval or
	// maxRuns, oldest first (runsOf); guarded by stepMu.
	runs map[string][]store.Run
	// started is the engine's start (by Clock): where the store keeps no
	// record of the SLA misses sent, deadlines before it are noted, not
	// sent again.
	started time.Time
	// regCosts is what reading each register bucket cost the last steps:
	// event triggers look keys up or list, whichever costs less.
	regCosts trigger.RegisterCosts
	// slaSince is when the store's records of SLA misses sent begin
	// (zero: not read yet); slaRecorded the slots recorded, per workflow
	// read (slaSent). Guarded by stepMu.
	slaSince    time.Time
	slaRecorded map[string]map[int64]bool
	// slaChecked is, per workflow with an SLA longer than the window,
	// the slot time before which noteSLABeyond looked. Guarded by stepMu.
	slaChecked map[string]time.Time
	// departed are the departures (departed.go) by register key;
	// departedRead: the store's records were read since the last change
	// of the configuration. Guarded by stepMu.
	departed     map[string]*departure
	departedRead bool
	departedErr  string          // the last error reading them, logged once
	departedBad  map[string]bool // the unreadable records, logged once
	// defs: the definitions recorded before submission
	// (departed_defs.go). Guarded by stepMu.
	defs definedState

	mu       sync.RWMutex // guards the fields below
	cfg      *config
	done     map[string]doneMark // per workflow, see stepWorkflow
	problems map[problemKey]scheduler.Problem
	// sla are the slots noted as having missed their SLA (noteSLA).
	sla     map[slot.ID]scheduler.Problem
	poolErr *scheduler.LoadError // the pools file's, at the last step
	last    StepReport
	gone    []string // the departed workflows not deployed (LeasedIDs)
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
	// Fenced counts slot changes and submissions dropped because another
	// instance took the workflow over during the step (see Options.Owns).
	Fenced int
	// Loading is the number of workflows the step did not step because
	// the store was still reading their state (start-up; see
	// backgroundLoader): a later step steps them.
	Loading int
	// Pools is the use of every defined pool (nil when no pool is
	// defined or named).
	Pools map[string]PoolUse
	// SLAMissed counts the slots that missed their SLA at this step, by
	// workflow (nil when none did).
	SLAMissed map[string]int
}

// New loads the workflows directory and returns an engine.
func New(opts Options) (*Engine, error) {
	if opts.Store == nil {
		return nil, errors.New("engine: no state database")
	}
	if opts.WorkflowsDir == "" {
		return nil, errors.New("engine: no workflows directory")
	}
	e := &Engine{
		opts:        opts,
		db:          opts.Store,
		regs:        opts.Registers,
		fs:          opts.FS,
		clock:       opts.Clock,
		log:         opts.Logger,
		loader:      &loader{dir: opts.WorkflowsDir, db: opts.Store, owns: opts.Owns, files: make(map[string]*fileEntry)},
		done:        make(map[string]doneMark),
		problems:    make(map[problemKey]scheduler.Problem),
		sla:         make(map[slot.ID]scheduler.Problem),
		runs:        make(map[string][]store.Run),
		slaRecorded: make(map[string]map[int64]bool),
		slaChecked:  make(map[string]time.Time),
		departed:    make(map[string]*departure),
		pools:       pool.NewFile(opts.PoolsFile),
	}
	if e.regs == nil {
		if r, ok := opts.Store.(Registers); ok {
			e.regs = r
		} else {
			e.regs = noRegisters{}
		}
	}
	if e.fs == nil {
		e.fs = trigger.NewMux("")
	}
	if e.clock == nil {
		e.clock = time.Now
	}
	e.started = e.clock().UTC()
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
	e.noteDepartures(e.cfg, c)
	gone := e.departedIDs(c)
	e.mu.Lock()
	e.cfg, e.gone = c, gone     // (together: LeasedIDs never lacks a workflow that left)
	for k := range e.problems { // workflows that are gone have no problems
		if c.workflows[k.wf] == nil {
			delete(e.problems, k)
		}
	}
	for id := range e.sla {
		if c.workflows[id.Workflow] == nil {
			delete(e.sla, id)
		}
	}
	for id := range e.done {
		if c.workflows[id] == nil {
			delete(e.done, id)
		}
	}
	for id := range e.runs { // (stepMu is held)
		if c.workflows[id] == nil {
			delete(e.runs, id)
		}
	}
	for id := range e.slaRecorded {
		if c.workflows[id] == nil {
			delete(e.slaRecorded, id)
		}
	}
	for id := range e.slaChecked {
		if c.workflows[id] == nil {
			delete(e.slaChecked, id)
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
// slot first. When several instances share the store (problemBoard), those
// of the workflows this engine does not own are the ones their owner
// published, as of the store's last refresh.
func (e *Engine) Problems(wf string) []scheduler.Problem {
	b := e.board()
	mine := func(w string) bool { return (wf == "" || w == wf) && (b == nil || e.owns(w)) }
	e.mu.RLock()
	out := make([]scheduler.Problem, 0, len(e.problems))
	for k, p := range e.problems {
		if mine(k.wf) {
			out = append(out, p)
		}
	}
	for id, p := range e.sla {
		if mine(id.Workflow) {
			out = append(out, p)
		}
	}
	c := e.cfg
	e.mu.RUnlock()
	if b != nil {
		for _, p := range b.PublishedProblems(wf) {
			if c.workflows[p.Workflow] != nil && !e.owns(p.Workflow) {
				out = append(out, p)
			}
		}
	}
	sortProblems(out)
	return out
}

// loadPools re-reads the pools file (stepMu is held): a version that does
// not load is logged when it appears and reported in LoadErrors, and the
// last version that loaded stays in effect.
func (e *Engine) loadPools() pool.Pools {
	p, changed, err := e.pools.Load()
	var le *scheduler.LoadError
	if err != nil {
		le = &scheduler.LoadError{File: e.pools.Path(), Error: err.Error()}
		if changed {
			e.log.Error("pools file not loaded; the last version that loaded stays in effect", "file", e.pools.Path(), "error", err)
		}
	} else if changed {
		e.log.Info("pools loaded", "file", e.pools.Path(), "pools", len(p))
	}
	e.mu.Lock()
	e.poolErr = le
	e.mu.Unlock()
	return p
}

// LastStep returns the report of the last step.
func (e *Engine) LastStep() StepReport {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.last
}

// ClearCache re-reads every workflows file (not only changed ones) and the
// state database's index (in the background when the store can), and
// forgets the per-workflow done marks.
func (e *Engine) ClearCache() error {
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	e.loader.forget()
	e.stateRead = nil
	var err error
	if r, ok := e.db.(reloader); ok {
		err = r.Reload()
	}
	e.mu.Lock()
	e.done = make(map[string]doneMark)
	e.mu.Unlock()
	c := e.reload()
	if bg, ok := e.db.(backgroundLoader); ok {
		bg.LoadInBackground(c.ids, 8) // read again in the background, not view by view
	}
	return err
}
