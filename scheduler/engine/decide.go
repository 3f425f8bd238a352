package engine

import (
	"time"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// Policy is what the decision needs from a workflow's definition.
type Policy struct {
	// Concurrency is the serial strategy's limit on RUNNING slots.
	Concurrency int
	// MaxRetryCount is the number of extra attempts after a failure.
	MaxRetryCount int
	// WaitTimeoutSeconds is measured from the slot time; workflow.NeverTimeout
	// (or more) means never.
	WaitTimeoutSeconds int64
	// Constraints, if set, are checked before a READY slot is submitted
	// (CheckConstraints).
	Constraints *workflow.Constraints
	// Runs are the times of the workflow's recent submissions, oldest
	// first (what minInterval and maxRuns count); see Engine.runsOf.
	Runs []time.Time
}

// PolicyOf returns the policy of a workflow.
func PolicyOf(w *workflow.Workflow) Policy {
	return Policy{
		Concurrency:        w.SchedulingStrategy.Concurrency,
		MaxRetryCount:      w.MaxRetryCount,
		WaitTimeoutSeconds: w.WaitTimeoutSeconds,
		Constraints:        w.Constraints,
	}
}

// Observation is what the engine learned about one slot before deciding:
// the trigger's verdict for a WAITING slot, the job's status for a RUNNING
// one. An error means "could not find out": the slot is left as it was.
type Observation struct {
	TriggerReady bool
	TriggerErr   error
	Job          external.Status
	JobErr       error
	// Intent: a READY slot has a submit intent left by a submission that
	// may have reached the service (a crash). Its run constraints let it
	// through then; they are not checked again (a job may exist, so it is
	// neither held nor given up: the submission asks the service first).
	Intent bool
}

// Needs says which observation a slot in state st needs: its trigger
// (WAITING) or its job's status (RUNNING).
func Needs(st slot.State) (trigger, status bool) {
	return st.Status == slot.Waiting, st.Status == slot.Running
}

// Change is a decided transition of one slot.
type Change struct {
	// Index is the slot's position in the decision's input.
	Index int
	To    slot.State
}

// Decision is the outcome of one workflow's step.
type Decision struct {
	// Submit lists the READY slots to submit, oldest first (indexes into
	// the input); each becomes RUNNING with the external ID the service
	// returns, or stays READY if submission fails.
	Submit []int
	// Changes are the transitions of WAITING and RUNNING slots, and of
	// READY slots whose constraints timed out (→ WAIT_TIMEOUT).
	Changes []Change
	// Held are the READY slots that stay READY because a run constraint
	// does not hold, and why.
	Held []Hold
}

// Hold is a READY slot kept from submission, and why.
type Hold struct {
	Index int
	Why   string
}

// Decide is the step of one workflow as a pure function, Celos's rules:
//
//   - The serial strategy picks the oldest READY slots, at most
//     Concurrency minus the number of RUNNING slots, for submission.
//   - WAITING → READY when the trigger is ready; else → WAIT_TIMEOUT when
//     now is strictly after slot time + WaitTimeoutSeconds.
//   - RUNNING → SUCCESS when the job succeeded; → KILLED (retryCount 0,
//     as a kill) when the service's Kill ended it (external.Status.Killed); on failure →
//     WAITING with retryCount+1 while retryCount < MaxRetryCount, else →
//     FAILURE.
//   - Final slots (SUCCESS, FAILURE, WAIT_TIMEOUT, KILLED) never change.
//   - A READY slot whose run constraints do not hold at now
//     (CheckConstraints, with p.Runs and the submissions chosen before it)
//     stays READY, held, and takes no place of the concurrency; once the
//     constraints' timeout (from the slot time) has passed, it becomes
//     WAIT_TIMEOUT or is submitted anyway, as the constraints say.
//
// Every rule reads the state at the start of the step, so a slot makes at
// most one transition per step. An observation error (a trigger or a
// service that could not answer) leaves that slot as it was and does not
// affect the others; a trigger error never times a slot out. slots must be
// sorted oldest first; obs[i] belongs to slots[i] (only the field that
// Needs asks for is read).
func Decide(p Policy, slots []slot.State, now time.Time, obs []Observation) Decision {
	var d Decision
	running := 0
	for i := range slots {
		if slots[i].Status == slot.Running {
			running++
		}
	}
	capacity := p.Concurrency - running
	runs := p.Runs[:len(p.Runs):len(p.Runs)] // appends copy: p.Runs is the caller's
	for i := range slots {
		st := slots[i]
		switch st.Status {
		case slot.Ready:
			if p.Constraints != nil && !obs[i].Intent {
				if why := CheckConstraints(p.Constraints, now, runs); why != "" {
					switch {
					case !constraintTimedOut(p.Constraints, st.ID.Time, now):
						d.Held = append(d.Held, Hold{i, why})
						continue
					case p.Constraints.OnTimeout != workflow.OnTimeoutRun:
						d.Changes = append(d.Changes, Change{i, slot.State{ID: st.ID, Status: slot.WaitTimeout, RetryCount: st.RetryCount}})
						continue
					}
					// OnTimeoutRun: submitted like any READY slot.
				}
			}
			if capacity > 0 {
				d.Submit = append(d.Submit, i)
				capacity--
				if p.Constraints != nil {
					runs = append(runs, now)
				}
			}
		case slot.Waiting:
			o := obs[i]
			switch {
			case o.TriggerErr != nil:
			case o.TriggerReady:
				d.Changes = append(d.Changes, Change{i, slot.State{ID: st.ID, Status: slot.Ready, RetryCount: st.RetryCount}})
			case timedOut(p, st.ID.Time, now):
				d.Changes = append(d.Changes, Change{i, slot.State{ID: st.ID, Status: slot.WaitTimeout, RetryCount: st.RetryCount}})
			}
		case slot.Running:
			o := obs[i]
			switch {
			case o.JobErr != nil, o.Job.Running:
			case o.Job.NeverStarted:
				// Nothing ran: submitted again, not a retry.
				d.Changes = append(d.Changes, Change{i, slot.State{ID: st.ID, Status: slot.Ready, RetryCount: st.RetryCount}})
			case o.Job.Success:
				d.Changes = append(d.Changes, Change{i, slot.State{ID: st.ID, Status: slot.Success, ExternalID: st.ExternalID, RetryCount: st.RetryCount}})
			case o.Job.Killed:
				// An operator's kill whose KILLED state was not written: as
				// the kill writes it (Celos's transitionToKill: ID kept,
				// retryCount reset).
				d.Changes = append(d.Changes, Change{i, slot.State{ID: st.ID, Status: slot.Killed, ExternalID: st.ExternalID}})
			case st.RetryCount < p.MaxRetryCount:
				d.Changes = append(d.Changes, Change{i, slot.State{ID: st.ID, Status: slot.Waiting, RetryCount: st.RetryCount + 1}})
			default:
				d.Changes = append(d.Changes, Change{i, slot.State{ID: st.ID, Status: slot.Failure, ExternalID: st.ExternalID, RetryCount: st.RetryCount}})
			}
		}
	}
	return d
}

func timedOut(p Policy, slotTime, now time.Time) bool {
	if p.WaitTimeoutSeconds >= workflow.NeverTimeout {
		return false
	}
	return now.After(slotTime.Add(time.Duration(p.WaitTimeoutSeconds) * time.Second))
}
