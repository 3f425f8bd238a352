package engine

// Kill of a departed workflow's slot: a workflow no longer deployed whose
// job still runs (a departure) is not in the configuration, so Kill finds
// its slot through the departure, and kills its job with the definition
// the departure keeps.

import (
	"errors"
	"fmt"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/schema/workflow"
)

// killable returns what Kill needs of slot id: the workflow's definition
// and the slot's state. A loaded workflow's slot is inSchedule's; a slot
// of a departure of a workflow that is not loaded (undeployed while it
// ran) is found through the departure, polled with its definition: its
// job can be killed and its slot recorded KILLED, which ends its part of
// the departure at the next step (stepMu is held).
func (e *Engine) killable(id slot.ID) (*workflow.Workflow, slot.State, error) {
	w, st, _, err := e.inSchedule(id)
	if !errors.Is(err, slot.ErrUnknownWorkflow) {
		return w, st, err
	}
	dw := e.departedSlot(id)
	if dw == nil {
		return nil, slot.State{}, err
	}
	st, found, gerr := e.db.Get(id)
	switch {
	case errors.Is(gerr, store.ErrCorrupt):
		e.log.Warn("slot file unreadable; kill rewrites it", "slot", id.String(), "error", gerr)
		return dw, slot.State{ID: id}, nil
	case gerr != nil:
		return nil, slot.State{}, fmt.Errorf("kill %s: read the slot of a workflow no longer deployed: %w", id, gerr)
	case !found:
		return nil, slot.State{}, fmt.Errorf("%w: %s (workflow %s is no longer deployed)", slot.ErrSlotNotFound, id, id.Workflow)
	}
	return dw, st, nil
}

// departedSlot returns the definition the departures keep of id's
// workflow if id is one of their slots and the workflow is not loaded
// (stepMu is held).
func (e *Engine) departedSlot(id slot.ID) *workflow.Workflow {
	if e.config().workflows[id.Workflow] != nil {
		return nil
	}
	for _, d := range e.departed {
		if d.Workflow.ID != id.Workflow {
			continue
		}
		for _, t := range d.Slots {
			if t.Equal(id.Time) {
				return d.Workflow
			}
		}
	}
	return nil
}
