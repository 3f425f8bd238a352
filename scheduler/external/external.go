// Package external defines how the slot engine runs a slot on an external
// service (Oozie, or a local command) and the statuses it reads back.
package external

import (
	"context"
	"errors"
	"time"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// ErrUnavailable marks a failure of the service itself (unreachable,
// timing out, answering 5xx or garbage), as opposed to a verdict about the
// job. The engine never turns such an error into a FAILURE: a READY slot
// stays READY and a RUNNING slot stays RUNNING until the service answers.
var ErrUnavailable = errors.New("external service unavailable")

// ErrNoEffect marks a failed call that certainly had no effect at the
// service: its request never reached it (the connection was refused, a
// lookup needed before the request failed), or the service refused it
// before acting on it (Oozie in safe mode). It comes with ErrUnavailable.
// The engine forgets the submit intent of a Submit that fails so: no job
// of it can be in flight, so the next attempt need not wait for one (see
// Recoverer).
var ErrNoEffect = errors.New("the call had no effect at the service")

// Status is what a service says about one job.
type Status struct {
	// Running is true while the job has not finished (Oozie PREP, RUNNING,
	// SUSPENDED; a command still running).
	Running bool
	// Success is meaningful once Running is false.
	Success bool
	// Detail is the service's own word for the status (SUCCEEDED, exit 3, ...).
	Detail string
	// NeverStarted, with Running false, says the job never started and
	// never will: nothing of it ran (a command job recorded by an instance
	// that stopped before starting it, scheduler/cluster). The engine puts
	// the slot back to READY, without counting a retry, and submits it
	// again. A job killed before it started is not such a job: it failed.
	NeverStarted bool
	// Killed, with Running false, says the service's own Kill ended the
	// job (an operator's kill through celos), as far as the service can
	// tell it from other ends (the command service can; Oozie cannot). The
	// engine makes the slot KILLED, as the kill does once it has killed
	// the job: a kill whose state was not written (the server stopped in
	// between) is not a failure to retry.
	Killed bool
}

// Service runs slots. Implementations are safe for concurrent use.
type Service interface {
	// Submit submits and starts a job for the slot and returns its external ID.
	Submit(ctx context.Context, w *workflow.Workflow, id slot.ID) (string, error)
	// Status reports on a job by its external ID.
	Status(ctx context.Context, w *workflow.Workflow, externalID string) (Status, error)
	// Kill stops a job; killing a finished job is not an error.
	Kill(ctx context.Context, w *workflow.Workflow, externalID string) error
}

// TimeVars returns the slot-time variables Celos substitutes into paths,
// properties and commands: year, month, day, hour, minute, second (zero
// padded, from the slot time in UTC).
func TimeVars(t time.Time) map[string]string {
	t = t.UTC()
	return map[string]string{
		"year":   t.Format("2006"),
		"month":  t.Format("01"),
		"day":    t.Format("02"),
		"hour":   t.Format("15"),
		"minute": t.Format("04"),
		"second": t.Format("05"),
	}
}
