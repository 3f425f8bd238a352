package external

import (
	"context"
	"time"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// Recoverer is implemented by services that can find a job they accepted
// for a slot, so that a crash between a service accepting a job and the
// engine recording it cannot lead to a second job.
//
// The engine persists a submit intent (slot id, attempt, wall-clock time)
// before it calls Submit and removes it once the slot is recorded as
// RUNNING. When a step finds a READY slot with a leftover intent, the
// previous process died in between; before submitting again it calls
// Recover with the intent's time. found=true means the service holds a job
// for that slot created at or after since: the engine records the slot as
// RUNNING with that external ID instead of submitting a second job.
// found=false means the service never accepted the job, and the engine
// submits. An error leaves the slot READY until a later step.
//
// A service without Recoverer is submitted again after such a crash (at
// least once); the engine logs that it could not check.
type Recoverer interface {
	Recover(ctx context.Context, w *workflow.Workflow, id slot.ID, since time.Time) (externalID string, found bool, err error)
}

// A Recoverer that, finding no job for an intent, answers "may still be in
// flight" until the intent's time plus its call timeout (Oozie: a request
// on the wire may create its job late) relies on no submission under that
// intent being sent later. The engine writes the intents of a step
// before its submissions, so a submission made (or resumed, after the
// process was stopped) long after its intent would break that bound: the
// engine passes the intent's time in the Submit's context (WithIntent),
// and such a service sends nothing once the intent is older than its call
// timeout, failing with ErrNoEffect instead (the slot is submitted again
// under a new intent).

// SubmitWindower is implemented by a service that sends nothing under an
// intent older than its window (the Oozie service: its call timeout). The
// engine writes the intents of a long batch again before they grow older
// than a third of it, so that its last submissions are not refused.
type SubmitWindower interface {
	SubmitWindow() time.Duration
}

type intentKey struct{}

// WithIntent returns ctx carrying the wall-clock time of the submit intent
// a Submit is made under.
func WithIntent(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, intentKey{}, t)
}

// IntentTime returns the time WithIntent put in ctx, if any.
func IntentTime(ctx context.Context) (time.Time, bool) {
	t, ok := ctx.Value(intentKey{}).(time.Time)
	return t, ok
}
