package trigger

// The failure, sinceLast and event triggers, and the per-step memory of
// what they read.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// Celos-style class names of the triggers of this file and volume.go.
const (
	TypeDataVolume = "DataVolumeTrigger"
	TypeFailure    = "FailureTrigger"
	TypeSinceLast  = "SinceLastTrigger"
	TypeEvent      = "EventTrigger"
)

// History is what States offers for sinceLast triggers: the stored slots
// of workflow wf with times in [start, end), oldest first (statedb.DB's
// Range).
type History interface {
	Range(wf string, start, end time.Time) ([]slot.State, error)
}

// NewStepEnv is the Env of one step: every answer is read once and
// remembered for the rest of the step, so that each distinct hdfsCheck path
// is checked, each distinct directory listed, each workflow's history and
// each register bucket read once however many slots and workflows ask. The
// step must not write states or registers through these while it
// evaluates triggers: every trigger then reads the state of the step's
// beginning.
func NewStepEnv(states States, fsys FileSystems, regs Registers) Env {
	env := Env{States: states, Registers: regs}
	if fsys != nil {
		env.FS = NewMemo(fsys)
	}
	if states != nil {
		env.States = &statesMemo{States: states}
	}
	if regs != nil {
		env.Registers = &registersMemo{regs: regs}
	}
	return env
}

// successes are the times of a workflow's SUCCESS slots, oldest first.
type successes struct {
	times []time.Time
	err   error
}

// statesMemo remembers, per workflow, the times of its SUCCESS slots.
type statesMemo struct {
	States
	mu   sync.Mutex
	succ map[string]successes
}

func (m *statesMemo) lastSuccess(wf string, at time.Time) (time.Time, bool, error) {
	m.mu.Lock()
	s, ok := m.succ[wf]
	m.mu.Unlock()
	if !ok {
		s.times, s.err = successTimes(m.States, wf)
		m.mu.Lock()
		if m.succ == nil { // made on first use: a steady step allocates nothing here
			m.succ = make(map[string]successes)
		}
		m.succ[wf] = s
		m.mu.Unlock()
	}
	if s.err != nil {
		return time.Time{}, false, s.err
	}
	i := sort.Search(len(s.times), func(i int) bool { return s.times[i].After(at) })
	if i == 0 {
		return time.Time{}, false, nil
	}
	return s.times[i-1], true, nil
}

// historyStart and historyEnd bound the history sinceLast reads: every
// slot a store can hold.
var (
	historyStart = time.Unix(0, 0).UTC()
	historyEnd   = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
)

func successTimes(states States, wf string) ([]time.Time, error) {
	h, ok := states.(History)
	if !ok {
		return nil, errors.New("the state store cannot list a workflow's slots")
	}
	all, err := h.Range(wf, historyStart, historyEnd)
	if err != nil {
		return nil, err
	}
	var out []time.Time
	for _, st := range all {
		if st.Status == slot.Success {
			out = append(out, st.ID.Time)
		}
	}
	return out, nil
}

// lastSuccess is the time of wf's last SUCCESS slot at or before at.
func lastSuccess(states States, wf string, at time.Time) (time.Time, bool, error) {
	if m, ok := states.(*statesMemo); ok {
		return m.lastSuccess(wf, at)
	}
	ts, err := successTimes(states, wf)
	if err != nil {
		return time.Time{}, false, err
	}
	i := sort.Search(len(ts), func(i int) bool { return ts[i].After(at) })
	if i == 0 {
		return time.Time{}, false, nil
	}
	return ts[i-1], true, nil
}

// evalNew evaluates the triggers of this file and volume.go; ok is false
// for any other type.
func evalNew(ctx context.Context, env Env, t *workflow.Trigger, slotTime time.Time) (Status, bool) {
	switch t.Type {
	case workflow.TriggerDataVolume:
		return evalDataVolume(ctx, env, t, slotTime), true

	case workflow.TriggerFailure:
		id := slot.ID{Workflow: t.Workflow, Time: slotTime}
		if env.States == nil {
			return failed(TypeFailure, "Workflow slot "+id.String()+" has not failed", errors.New("no state database to read")), true
		}
		st, found, err := env.States.Get(id)
		if err != nil {
			return failed(TypeFailure, "Workflow slot "+id.String()+" has not failed", fmt.Errorf("read %s: %w", id, err)), true
		}
		if found && (st.Status == slot.Failure || st.Status == slot.WaitTimeout) {
			return leaf(TypeFailure, true, "Workflow slot "+id.String()+" is "+string(st.Status)), true
		}
		status := "has no record"
		if found {
			status = "is " + string(st.Status)
		}
		return leaf(TypeFailure, false, "Workflow slot "+id.String()+" has not failed: it "+status), true

	case workflow.TriggerSinceLast:
		d := time.Duration(t.Seconds) * time.Second
		if env.States == nil {
			return failed(TypeSinceLast, "Last success of "+t.Workflow+" unknown", errors.New("no state database to read")), true
		}
		last, found, err := lastSuccess(env.States, t.Workflow, slotTime)
		if err != nil {
			return failed(TypeSinceLast, "Last success of "+t.Workflow+" unknown", fmt.Errorf("read the slots of %s: %w", t.Workflow, err)), true
		}
		if !found {
			return leaf(TypeSinceLast, true, fmt.Sprintf("Ready, workflow %s has no successful slot at or before %s", t.Workflow, slot.FormatTime(slotTime))), true
		}
		since := slotTime.Sub(last)
		if since >= d {
			return leaf(TypeSinceLast, true, fmt.Sprintf("Ready, %s since the last successful slot of %s (%s); at least %s", since, t.Workflow, slot.FormatTime(last), d)), true
		}
		return leaf(TypeSinceLast, false, fmt.Sprintf("Not ready, only %s since the last successful slot of %s (%s); ready from slot %s", since, t.Workflow, slot.FormatTime(last), slot.FormatTime(last.Add(d)))), true

	case workflow.TriggerEvent:
		key := external.Expand(t.Key, slotTime)
		name := "Register " + t.Bucket + "/" + key
		if strings.ContainsAny(key, "/\\.") {
			return failed(TypeEvent, name+" does not exist", fmt.Errorf("register key %q may not contain '/', '\\' or '.'", key)), true
		}
		if env.Registers == nil {
			return failed(TypeEvent, name+" does not exist", errors.New("no registers to read")), true
		}
		ok, err := hasRegister(env.Registers, t.Bucket, key)
		if err != nil {
			return failed(TypeEvent, name+" does not exist", fmt.Errorf("read register bucket %s: %w", t.Bucket, err)), true
		}
		if ok {
			return leaf(TypeEvent, true, name+" exists"), true
		}
		return leaf(TypeEvent, false, name+" does not exist"), true
	}
	return Status{}, false
}
