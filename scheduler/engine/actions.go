package engine

// The operations that change slots or workflows: pause, rerun, kill.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/schema/workflow"
)

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
	if errors.Is(err, store.ErrCorrupt) {
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
func (e *Engine) checkRerun(ctx context.Context, id slot.ID, now time.Time) (slot.State, bool, error) {
	w, st, found, err := e.inSchedule(id)
	if err != nil {
		return slot.State{}, false, err
	}
	if id.Time.Before(w.StartTime) {
		return slot.State{}, false, refusal(scheduler.ErrBeforeStart,
			fmt.Errorf("%w: %s is before the workflow's startTime %s, where the workflow has no slots",
				scheduler.ErrRerunRefused, id, slot.FormatTime(w.StartTime)))
	}
	if id.Time.After(now) {
		return slot.State{}, false, refusal(&scheduler.NotDueError{ServerTime: now},
			fmt.Errorf("%w: %s is not due yet (the server's time is %s); it runs at its time",
				scheduler.ErrRerunRefused, id, slot.FormatTime(now)))
	}
	if found && st.Status != "" && !st.Status.Final() {
		return slot.State{}, false, refusal(scheduler.ErrNotFinal,
			fmt.Errorf("%w: cannot rerun %s, it is %s", slot.ErrIllegalTransition, id, st.Status))
	}
	if found && st.Status == "" {
		if err := e.noRunningJob(ctx, w, id); err != nil {
			return slot.State{}, false, err
		}
	}
	return st, found, nil
}

// noRunningJob checks, for a rerun of slot id whose record cannot be read,
// that its service lists no running attempt of it (scheduler.AttemptLister,
// which only reads: GET /rerun asks this too): that job, which the lost
// record named, would run on beside the rerun. A service that keeps no
// list is taken at its word that nothing runs; an error asking it refuses
// the rerun.
func (e *Engine) noRunningJob(ctx context.Context, w *workflow.Workflow, id slot.ID) error {
	al := attemptLister(e.opts.Services[w.ExternalService.Type])
	if al == nil {
		return nil
	}
	var as []scheduler.Attempt
	err := guard(func() (err error) {
		cctx, cancel := context.WithTimeout(ctx, e.opts.CallTimeout)
		defer cancel()
		as, err = al.Attempts(cctx, w, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("rerun %s: its record cannot be read, and asking its service for a running job failed: %w", id, err)
	}
	for _, a := range as {
		if a.Running {
			return refusal(scheduler.ErrNotFinal, fmt.Errorf("%w: cannot rerun %s: its record cannot be read and its job %s is running; kill the slot first",
				slot.ErrIllegalTransition, id, a.ExternalID))
		}
	}
	return nil
}

// attemptLister is svc's list of attempts, looked for through the
// decorators that wrap it (Unwrap), or nil.
func attemptLister(svc external.Service) scheduler.AttemptLister {
	for svc != nil {
		if al, ok := svc.(scheduler.AttemptLister); ok {
			return al
		}
		u, ok := svc.(interface{ Unwrap() external.Service })
		if !ok {
			return nil
		}
		svc = u.Unwrap()
	}
	return nil
}

// refusal is err, which also wraps kind (a sentinel of package scheduler
// such as ErrNotDue, or an error that Is one) without showing its text:
// the answer's message stays err's, and a client tells the refusal apart
// by kind.
func refusal(kind, err error) error { return &kindError{err: err, kind: kind} }

// unwritable makes a write of a rerun or kill that the store refused
// because something it cannot replace stands where the slot's record goes
// (store.ErrCorrupt: a directory that holds files) a
// scheduler.ErrSlotUnreadable: the operator must remove it.
func unwritable(err error) error {
	if errors.Is(err, store.ErrCorrupt) {
		return refusal(scheduler.ErrSlotUnreadable, err)
	}
	return err
}

type kindError struct{ err, kind error }

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.err, e.kind} }

// CheckRerun returns the state of slot id (WAITING if it has no readable
// record) when Rerun at now would accept it, else Rerun's error; it
// changes nothing (scheduler.RerunChecker: GET /rerun).
func (e *Engine) CheckRerun(ctx context.Context, id slot.ID, now time.Time) (slot.State, error) {
	st, found, err := e.checkRerun(ctx, id, now)
	if err == nil && (!found || st.Status == "") {
		st = slot.NewWaiting(id)
	}
	return st, err
}

// Rerun marks slot id for rerun (stamped with now) and, if it has a final
// state, resets it to WAITING with retryCount 0. A slot that is not final
// gives ErrIllegalTransition and scheduler.ErrNotFinal; a time that is
// neither in the schedule nor stored gives ErrNotInSchedule; a time after
// now or before the workflow's startTime gives scheduler.ErrRerunRefused
// and scheduler.ErrNotDue (a *scheduler.NotDueError) or ErrBeforeStart.
func (e *Engine) Rerun(ctx context.Context, id slot.ID, now time.Time) error {
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	st, found, err := e.checkRerun(ctx, id, now)
	if err != nil {
		return err
	}
	// Marker first: a crash after it leaves a final slot that can be rerun
	// again, never a WAITING slot outside the window that nothing steps.
	if err := e.db.MarkRerun(id, now); err != nil {
		return unwritable(fmt.Errorf("rerun %s: mark: %w", id, err))
	}
	// A leftover submit intent belongs to a job that already ran: a rerun
	// must submit a new one, not recover that one.
	if err := e.db.DeleteIntent(id); err != nil {
		return unwritable(fmt.Errorf("rerun %s: delete submit intent: %w", id, err))
	}
	if found {
		to := slot.State{ID: st.ID, Status: slot.Waiting}
		if err := e.db.Put(to); err != nil {
			return unwritable(fmt.Errorf("rerun %s: %w", id, err))
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
// so that a job submitted just before a crash is killed too, and so is a
// slot whose record cannot be read (its newest job, which may run). A
// final slot gives ErrIllegalTransition. The slot of a workflow no longer
// deployed whose job still ran when it left (a departure) is killed too,
// with the definition the departure keeps (departed_kill.go).
func (e *Engine) Kill(ctx context.Context, id slot.ID) error {
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	w, st, err := e.killable(id) // (a departed workflow's slot too)
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
	// A job the record does not name may exist: one submitted just
	// before a crash (a READY slot with its intent), or the job whose ID
	// an unreadable record held (its newest: the one that may run).
	var since time.Time
	look := false
	switch {
	case left && ext == "" && st.Status == slot.Ready && intentOf(in, st):
		since, look = in.Time, true
	case st.Status == "":
		look = true
	}
	if rec, ok := svc.(external.Recoverer); ok && look {
		var x string
		var found bool
		err := guard(func() (err error) {
			cctx, cancel := context.WithTimeout(ctx, e.opts.CallTimeout)
			defer cancel()
			x, found, err = rec.Recover(cctx, w, id, since)
			return err
		})
		if err != nil {
			return fmt.Errorf("kill %s: look for the slot's job on its service: %w", id, err)
		}
		if found {
			ext = x
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
		return unwritable(fmt.Errorf("kill %s: delete submit intent: %w", id, err))
	}
	to := slot.State{ID: id, Status: slot.Killed, ExternalID: ext}
	if err := e.db.Put(to); err != nil {
		return unwritable(fmt.Errorf("kill %s: %w", id, err))
	}
	e.clearProblem(id.Workflow, id.Time)
	e.log.Info("slot transition", "slot", id.String(), "from", string(st.Status), "to", string(slot.Killed), "externalID", ext, "reason", "kill")
	return nil
}
