package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"
)

// TestRerunRefusalKinds: each refusal of a rerun (and of CheckRerun)
// wraps the sentinel a client tells it apart by, beside the one it always
// wrapped (whose text it still has, word for word); a not-due refusal
// carries the server's time; a kill of a final slot is an illegal
// transition but not ErrNotFinal.
func TestRerunRefusalKinds(t *testing.T) {
	w := fixture.Hourly("wf")
	w.StartTime = ts("2024-01-01T00:00Z")
	r := newRig(t, nil, w)
	ctx := context.Background()
	now := ts("2024-01-01T01:30Z")
	s0 := slot.ID{Workflow: "wf", Time: ts("2024-01-01T00:00Z")}
	if err := r.e.Rerun(ctx, s0, now); err != nil { // marked: WAITING
		t.Fatal(err)
	}
	r.step(now) // READY
	cases := []struct {
		name  string
		id    slot.ID
		kind  error
		outer error
		msg   string
	}{
		{"not due", slot.ID{Workflow: "wf", Time: ts("2024-01-01T02:00Z")}, scheduler.ErrNotDue, scheduler.ErrRerunRefused,
			"rerun refused: wf@2024-01-01T02:00:00.000Z is not due yet (the server's time is 2024-01-01T01:30:00.000Z); it runs at its time"},
		{"before startTime", slot.ID{Workflow: "wf", Time: ts("2023-12-31T23:00Z")}, scheduler.ErrBeforeStart, scheduler.ErrRerunRefused,
			"rerun refused: wf@2023-12-31T23:00:00.000Z is before the workflow's startTime 2024-01-01T00:00:00.000Z, where the workflow has no slots"},
		{"not final", s0, scheduler.ErrNotFinal, slot.ErrIllegalTransition,
			"illegal slot transition: cannot rerun wf@2024-01-01T00:00:00.000Z, it is READY"},
	}
	all := []error{scheduler.ErrNotDue, scheduler.ErrBeforeStart, scheduler.ErrNotFinal}
	for _, c := range cases {
		_, cerr := r.e.CheckRerun(ctx, c.id, now)
		for op, err := range map[string]error{"Rerun": r.e.Rerun(ctx, c.id, now), "CheckRerun": cerr} {
			if err == nil {
				t.Errorf("%s %s: accepted", op, c.name)
				continue
			}
			if !errors.Is(err, c.kind) || !errors.Is(err, c.outer) {
				t.Errorf("%s %s: %v is not %v and %v", op, c.name, err, c.kind, c.outer)
			}
			for _, other := range all {
				if other != c.kind && errors.Is(err, other) {
					t.Errorf("%s %s: %v is also %v", op, c.name, err, other)
				}
			}
			if diff := cmp.Diff(c.msg, err.Error()); diff != "" {
				t.Errorf("%s %s: text changed (-want +got):\n%s", op, c.name, diff)
			}
			nd, isNotDue := errors.AsType[*scheduler.NotDueError](err)
			if isNotDue != (c.kind == scheduler.ErrNotDue) || (isNotDue && !nd.ServerTime.Equal(now)) {
				t.Errorf("%s %s: NotDueError %v %+v, want one with the server's time only when not due", op, c.name, isNotDue, nd)
			}
		}
	}
	r.step(now) // RUNNING
	r.svc.finishAll(true)
	r.step(now) // SUCCESS
	if st := r.state("wf", s0.Time); st.Status != slot.Success {
		t.Fatalf("%+v", st)
	}
	err := r.e.Kill(ctx, s0)
	if !errors.Is(err, slot.ErrIllegalTransition) || errors.Is(err, scheduler.ErrNotFinal) {
		t.Errorf("kill of a SUCCESS slot: %v, want an illegal transition that is not ErrNotFinal", err)
	}
}
