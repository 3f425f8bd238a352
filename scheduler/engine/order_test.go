package engine

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// TestStepDoesNotDependOnVisitingOrder: workflow b has a success trigger on
// workflow a, and a's slot becomes SUCCESS in the step. Every trigger reads
// the state as it was when the step began, so b's slot is not ready in that
// step whichever workflow the step visits first, and is in the next.
func TestStepDoesNotDependOnVisitingOrder(t *testing.T) {
	start := ts("2024-01-01T00:00Z")
	now := ts("2024-01-01T00:30Z")
	a, b := fixture.Hourly("a"), fixture.Hourly("b")
	a.StartTime, b.StartTime = start, start
	b.Trigger = workflow.Trigger{Type: workflow.TriggerSuccess, Workflow: "a"}
	aID := slot.ID{Workflow: "a", Time: start}

	run := func(order []string) []slot.State {
		r := newRig(t, nil, a, b)
		r.step(now) // a's slot is READY, b's waits for it
		r.step(now) // a's slot is submitted
		if st := r.state("a", start); st.Status != slot.Running {
			t.Fatalf("a after the first step: %+v", st)
		}
		r.svc.finish(aID, true)
		if err := r.e.Step(context.Background(), now, order); err != nil {
			t.Fatal(err)
		}
		got := []slot.State{r.state("a", start), r.state("b", start)}
		r.step(now) // now b's trigger sees a's SUCCESS
		return append(got, r.state("b", start))
	}
	ab, ba := run([]string{"a", "b"}), run([]string{"b", "a"})
	if d := cmp.Diff(ab, ba); d != "" {
		t.Fatalf("the step's outcome depends on the visiting order (-a,b +b,a):\n%s", d)
	}
	if ab[0].Status != slot.Success || ab[1].Status != slot.Waiting || ab[2].Status != slot.Ready {
		t.Fatalf("a, then b in the same step, then b in the next: got %s, %s, %s; want SUCCESS, WAITING, READY (%+v)",
			ab[0].Status, ab[1].Status, ab[2].Status, ab)
	}
}
