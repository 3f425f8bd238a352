package engine

// The read-only operations of scheduler.Service: workflows, slots,
// trigger status, status counts.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/schedule"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/schema/workflow"
)

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
// The pools file is one of them when its current version does not load.
func (e *Engine) LoadErrors() []scheduler.LoadError {
	out := append([]scheduler.LoadError(nil), e.config().loadErrs...)
	e.mu.RLock()
	if e.poolErr != nil {
		out = append(out, *e.poolErr)
	}
	e.mu.RUnlock()
	return out
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
// that range, with missing records synthesized as WAITING. A slot whose
// record does not parse is listed in its place, marked Unreadable (as
// SlotState answers it); any other read error fails the listing, naming
// the slot, rather than leave the slot out of a list that looks complete.
func (e *Engine) Slots(ctx context.Context, id string, start, end time.Time) ([]scheduler.ListedSlot, error) {
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
		return []scheduler.ListedSlot{}, nil
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
	out := make([]scheduler.ListedSlot, 0, len(times))
	for i := len(times) - 1; i >= 0; i-- {
		sid := slot.ID{Workflow: id, Time: times[i]}
		st, found, err := e.db.Get(sid)
		switch {
		case errors.Is(err, store.ErrCorrupt):
			out = append(out, scheduler.ListedSlot{State: slot.State{ID: sid}, Unreadable: unreadable(sid, err)})
			continue
		case err != nil:
			return nil, fmt.Errorf("list the slots of %s: read %s: %w", id, sid, err)
		case !found:
			st = slot.NewWaiting(sid)
		}
		out = append(out, scheduler.ListedSlot{State: st})
	}
	return out, nil
}

// unreadable is the error of slot id whose record does not parse (err
// wraps store.ErrCorrupt).
func unreadable(id slot.ID, err error) error {
	return fmt.Errorf("%w: %s: %v (a rerun or kill of the slot rewrites it)", scheduler.ErrSlotUnreadable, id, err)
}

// SlotState returns the stored state of one slot (ErrSlotNotFound if none).
// As in Celos, the workflow need not be loaded.
func (e *Engine) SlotState(ctx context.Context, id slot.ID) (slot.State, error) {
	st, found, err := e.db.Get(id)
	if errors.Is(err, store.ErrBadName) {
		return slot.State{}, fmt.Errorf("%w: %v", slot.ErrBadParameter, err)
	}
	if errors.Is(err, store.ErrCorrupt) {
		return slot.State{}, unreadable(id, err)
	}
	if err != nil {
		return slot.State{}, err
	}
	if !found {
		return slot.State{}, fmt.Errorf("%w: %s", slot.ErrSlotNotFound, id)
	}
	return st, nil
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
	st := trigger.Evaluate(tctx, trigger.Env{States: e.db, FS: e.fs, Registers: e.regs}, &w.Trigger, id.Time, now)
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
