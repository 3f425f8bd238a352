package engine

// Several instances on one database (scheduler/cluster, docs/ha.md): an
// engine steps only the workflows Options.Owns gives it, asks again just
// before each submission, and counts what it had to drop because another
// instance took a workflow over during the step (fenced), rather than
// reporting a failed write.

import (
	"fmt"

	"github.com/celos-go/celos/scheduler/slot"
)

// owns reports whether this engine may step and submit for workflow wf now.
func (e *Engine) owns(wf string) bool { return e.opts.Owns == nil || e.opts.Owns(wf) }

// owned returns the workflows of todo this engine owns, and forgets the
// done marks, problems and records of submissions (runsOf) of the others:
// another instance steps them, and if one comes back here its state is
// read afresh — its submissions too, from the store's record (runsOf),
// since this engine's memory lacks those the other instance made (stepMu
// is held).
func (e *Engine) owned(todo []string) []string {
	if e.opts.Owns == nil {
		return todo
	}
	out := make([]string, 0, len(todo))
	var gone []string
	for _, wf := range todo {
		if e.opts.Owns(wf) {
			out = append(out, wf)
		} else {
			gone = append(gone, wf)
		}
	}
	if len(gone) > 0 {
		for wf := range e.runs { // (the workflows with run constraints)
			if !e.opts.Owns(wf) {
				delete(e.runs, wf)
			}
		}
		for wf := range e.slaRecorded { // read again from the store: the owner records its misses
			if !e.opts.Owns(wf) {
				delete(e.slaRecorded, wf)
			}
		}
		for wf := range e.slaChecked {
			if !e.opts.Owns(wf) {
				delete(e.slaChecked, wf)
			}
		}
		e.mu.Lock()
		for _, wf := range gone {
			delete(e.done, wf)
		}
		for k := range e.problems {
			if !e.opts.Owns(k.wf) {
				delete(e.problems, k)
			}
		}
		for id := range e.sla { // (noted again from the store's records if it comes back)
			if !e.opts.Owns(id.Workflow) {
				delete(e.sla, id)
			}
		}
		e.mu.Unlock()
	}
	return out
}

// lostOwnership reports whether a change of slot id that the store
// refused (err), or a submission about to be made (err nil), is moot
// because this engine no longer owns the workflow; if so it is counted in
// StepReport.Fenced and logged, not reported as a failure: the new owner
// steps the slot and resolves its submit intent.
func (s *stepper) lostOwnership(id slot.ID, what string, err error) bool {
	if s.e.owns(id.Workflow) {
		return false
	}
	s.rep.Fenced++
	if err == nil {
		err = fmt.Errorf("workflow %s is no longer owned by this instance", id.Workflow)
	}
	s.e.log.Warn("dropped: another instance owns the workflow now", "slot", id.String(), "what", what, "error", err)
	return true
}
