package engine

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// TestFailureAndSinceLastReadTheStepsSnapshot: like
// TestStepDoesNotDependOnVisitingOrder for the failure and sinceLast
// triggers. Workflow a's slot ends in the step; b's failure trigger on a
// sees the FAILURE in the next step only, and b's sinceLast on a does not
// see the SUCCESS in the step it happens, whichever workflow the step
// visits first.
func TestFailureAndSinceLastReadTheStepsSnapshot(t *testing.T) {
	start := ts("2024-01-01T00:00Z")
	for _, tc := range []struct {
		name    string
		ok      bool // how a's job ends
		other   workflow.Trigger
		otherAt string // the other workflow's slot
		want    []slot.Status
	}{
		// a FAILURE; b WAITING in that step, READY in the next.
		{"failure", false, workflow.Trigger{Type: workflow.TriggerFailure, Workflow: "a"}, "2024-01-01T00:00Z",
			[]slot.Status{slot.Failure, slot.Waiting, slot.Ready}},
		// a SUCCESS at 00:00; b's 01:00 slot, first seen in that step,
		// sees no success of a (ready: a never succeeded); with a's
		// success it would not be (1h < 2h).
		{"sinceLast", true, workflow.Trigger{Type: workflow.TriggerSinceLast, Workflow: "a", Seconds: 7200}, "2024-01-01T01:00Z",
			[]slot.Status{slot.Success, slot.Ready, slot.Running}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := fixture.Hourly("a"), fixture.Hourly("b")
			a.StartTime, b.StartTime = start, ts(tc.otherAt)
			b.Trigger = tc.other
			aID := slot.ID{Workflow: "a", Time: start}
			bAt := ts(tc.otherAt)
			run := func(order []string) []slot.State {
				r := newRig(t, nil, a, b)
				r.step(ts("2024-01-01T00:30Z")) // a's slot is READY
				r.step(ts("2024-01-01T00:30Z")) // a's slot is submitted
				r.svc.finish(aID, tc.ok)
				now := ts("2024-01-01T01:30Z")
				if err := r.e.Step(context.Background(), now, order); err != nil {
					t.Fatal(err)
				}
				got := []slot.State{r.state("a", start), r.state("b", bAt)}
				r.step(now)
				return append(got, r.state("b", bAt))
			}
			ab, ba := run([]string{"a", "b"}), run([]string{"b", "a"})
			if d := cmp.Diff(ab, ba); d != "" {
				t.Fatalf("the step's outcome depends on the visiting order (-a,b +b,a):\n%s", d)
			}
			got := []slot.Status{ab[0].Status, ab[1].Status, ab[2].Status}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatalf("a, then b in the same step, then b in the next (-want +got):\n%s", d)
			}
		})
	}
}
