package trigger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// Celos's trigger class names, the Type of a Status.
const (
	TypeAlways    = "AlwaysTrigger"
	TypeHDFSCheck = "HDFSCheckTrigger"
	TypeSuccess   = "SuccessTrigger"
	TypeAnd       = "AndTrigger"
	TypeOr        = "OrTrigger"
	TypeNot       = "NotTrigger"
	TypeOffset    = "OffsetTrigger"
	TypeDelay     = "DelayTrigger"
)

// States reads the stored state of a slot of any workflow (the success
// trigger). found is false when the slot has no record. In a step, the
// engine's States is its store, which the step does not write before it
// has observed every trigger: a trigger reads the state as it was when the
// step began, whatever the order in which workflows are stepped.
type States interface {
	Get(id slot.ID) (st slot.State, found bool, err error)
}

// FileSystems answers the existence checks of hdfsCheck triggers. fsURI is
// the trigger's fs ("file:///", "hdfs://nn:8020"); an empty fsURI means the
// installation default. A file and a directory both count as existing.
// Implementations are safe for concurrent use.
type FileSystems interface {
	Exists(ctx context.Context, fsURI, path string) (bool, error)
}

// Env is what triggers read. A step uses NewStepEnv, which reads each
// thing once per step.
type Env struct {
	// States are read by success and failure triggers, and by sinceLast
	// when they are also a History.
	States States
	// FS answers hdfsCheck triggers, and dataVolume when it is a Lister.
	FS FileSystems
	// Registers answer event triggers.
	Registers Registers
}

// Evaluate evaluates trigger t for the slot at slotTime, at now. It never
// panics and never returns an error: a trigger that cannot be evaluated (an
// unreachable file system, a missing reader) is not ready and its Status
// carries the error; and/or/not/offset propagate an unknown child only where
// it decides the result (an "and" with a child that is definitely not ready
// is not ready, without error).
func Evaluate(ctx context.Context, env Env, t *workflow.Trigger, slotTime, now time.Time) (st Status) {
	defer func() {
		if p := recover(); p != nil {
			st = failed("Trigger", "Trigger could not be evaluated", fmt.Errorf("internal error: %v", p))
		}
	}()
	return eval(ctx, env, t, slotTime.UTC(), now.UTC(), 0)
}

// Ready is Evaluate reduced to its verdict: ready, or not ready with the
// error that kept it from being decided (nil when it is simply not ready).
func Ready(ctx context.Context, env Env, t *workflow.Trigger, slotTime, now time.Time) (bool, error) {
	st := Evaluate(ctx, env, t, slotTime, now)
	if st.Error != "" {
		return false, errors.New(st.Error)
	}
	return st.Ready, nil
}

func leaf(typ string, ready bool, desc string) Status {
	return Status{Type: typ, Ready: ready, Description: desc, SubStatuses: []Status{}}
}

func failed(typ, desc string, err error) Status {
	st := leaf(typ, false, desc)
	st.Error = err.Error()
	return st
}

func eval(ctx context.Context, env Env, t *workflow.Trigger, slotTime, now time.Time, depth int) Status {
	if t == nil {
		return failed("Trigger", "Undefined trigger", errors.New("no trigger"))
	}
	if depth > workflow.MaxTriggerDepth {
		return failed("Trigger", "Trigger nests too deeply", fmt.Errorf("triggers nest deeper than %d levels", workflow.MaxTriggerDepth))
	}
	switch t.Type {
	case workflow.TriggerAlways:
		return leaf(TypeAlways, true, "Always ready")

	case workflow.TriggerHDFSCheck:
		p := external.Expand(t.Path, slotTime)
		notReady := "HDFS path " + p + " is not ready"
		if env.FS == nil {
			return failed(TypeHDFSCheck, notReady, errors.New("no file system configured for hdfsCheck triggers"))
		}
		if err := ctx.Err(); err != nil {
			return failed(TypeHDFSCheck, notReady, err)
		}
		ok, err := env.FS.Exists(ctx, t.FS, p)
		if err != nil {
			return failed(TypeHDFSCheck, notReady, fmt.Errorf("check %s: %w", p, err))
		}
		if ok {
			return leaf(TypeHDFSCheck, true, "HDFS path "+p+" is ready")
		}
		return leaf(TypeHDFSCheck, false, notReady)

	case workflow.TriggerSuccess:
		id := slot.ID{Workflow: t.Workflow, Time: slotTime}
		desc := func(ok bool) string {
			if ok {
				return "Workflow slot " + id.String() + " is ready"
			}
			return "Workflow slot " + id.String() + " is not ready"
		}
		if env.States == nil {
			return failed(TypeSuccess, desc(false), errors.New("no state database to read"))
		}
		st, found, err := env.States.Get(id)
		if err != nil {
			return failed(TypeSuccess, desc(false), fmt.Errorf("read %s: %w", id, err))
		}
		ok := found && st.Status == slot.Success
		return leaf(TypeSuccess, ok, desc(ok))

	case workflow.TriggerAnd, workflow.TriggerOr:
		return evalAndOr(ctx, env, t, slotTime, now, depth)

	case workflow.TriggerNot:
		sub := eval(ctx, env, t.Trigger, slotTime, now, depth+1)
		st := Status{Type: TypeNot, SubStatuses: []Status{sub}}
		switch {
		case sub.Error != "":
			st.Description, st.Error = "Not ready, nested trigger could not be evaluated", sub.Error
		case sub.Ready:
			st.Description = "Not ready, nested trigger is ready"
		default:
			st.Ready, st.Description = true, "Ready, nested trigger isn't ready"
		}
		return st

	case workflow.TriggerOffset:
		sub := eval(ctx, env, t.Trigger, slotTime.Add(time.Duration(t.Seconds)*time.Second), now, depth+1)
		st := Status{Type: TypeOffset, Ready: sub.Ready, Error: sub.Error, SubStatuses: []Status{sub}}
		if sub.Ready {
			st.Description = fmt.Sprintf("Nested trigger offset by %d seconds ready", t.Seconds)
		} else {
			st.Description = fmt.Sprintf("Nested trigger offset by %d seconds not ready", t.Seconds)
		}
		return st

	case workflow.TriggerDelay:
		at := slotTime.Add(time.Duration(t.Seconds) * time.Second)
		if now.After(at) {
			return leaf(TypeDelay, true, "Ready since "+slot.FormatTime(at))
		}
		return leaf(TypeDelay, false, "Delayed until "+slot.FormatTime(at))
	}
	if st, ok := evalNew(ctx, env, t, slotTime); ok {
		return st
	}
	return failed("Trigger", "Unknown trigger type "+t.Type, fmt.Errorf("unknown trigger type %q", t.Type))
}

// evalAndOr evaluates an and or an or trigger.
func evalAndOr(ctx context.Context, env Env, t *workflow.Trigger, slotTime, now time.Time, depth int) Status {
	and := t.Type == workflow.TriggerAnd
	subs := make([]Status, len(t.Triggers))
	anyTrue, anyFalse := false, false
	var unknown string
	for i := range t.Triggers {
		subs[i] = eval(ctx, env, &t.Triggers[i], slotTime, now, depth+1)
		switch {
		case subs[i].Error != "":
			if unknown == "" {
				unknown = subs[i].Error
			}
		case subs[i].Ready:
			anyTrue = true
		default:
			anyFalse = true
		}
	}
	var st Status
	if and {
		// Zero children: ready (Celos).
		ready := !anyFalse && unknown == ""
		st = Status{Type: TypeAnd, Ready: ready, Description: "Not all nested triggers are ready"}
		if ready {
			st.Description = "All nested triggers are ready"
		} else if !anyFalse {
			st.Error = unknown
		}
	} else {
		// Zero children: not ready (Celos).
		ready := anyTrue
		st = Status{Type: TypeOr, Ready: ready, Description: "None of the nested triggers are ready"}
		if ready {
			st.Description = "One or more nested triggers are ready"
		} else if unknown != "" {
			st.Error = unknown
		}
	}
	st.SubStatuses = subs
	return st
}
