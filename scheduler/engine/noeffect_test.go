package engine

import (
	"errors"
	"testing"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
)

// TestSubmitNoEffectDropsIntent: a submission that certainly had no effect
// at the service (external.ErrNoEffect) leaves no submit intent, so the next
// attempt does not wait for a job that cannot be in flight; an ambiguous
// failure (unavailable, maybe received) keeps it.
func TestSubmitNoEffectDropsIntent(t *testing.T) {
	w := fixture.Hourly("wf")
	w.StartTime = ts("2024-01-01T00:00Z")
	now := ts("2024-01-01T00:30Z")
	id := slot.ID{Workflow: "wf", Time: ts("2024-01-01T00:00Z")}
	for _, tc := range []struct {
		name string
		err  error
		left bool
	}{
		{"no effect", errors.Join(external.ErrUnavailable, external.ErrNoEffect, errors.New("connection refused")), false},
		{"maybe received", errors.Join(external.ErrUnavailable, errors.New("connection reset")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			r := newRig(t, recoverer{f}, w)
			r.step(now) // READY
			f.submitErr = tc.err
			r.step(now)
			if st := r.state("wf", id.Time); st.Status != slot.Ready {
				t.Fatalf("%+v, want READY", st)
			}
			if _, left, err := r.db.GetIntent(id); err != nil || left != tc.left {
				t.Fatalf("intent left %v (%v), want %v", left, err, tc.left)
			}
		})
	}
}
