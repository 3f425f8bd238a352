package engine

import (
	"testing"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/schema/workflow"
)

// TestRunConstraintsLongerThanTheWindow: minIntervalSeconds and
// maxRuns.periodSeconds may be up to 100 years (celos vet accepts them),
// but the engine kept a workflow's submissions for at most the 7-day
// window: "at most once in 30 days" ran again 7 days after its last
// submission, with or without a restart. The submissions now count for
// the whole period, in memory and in the store's record.
func TestRunConstraintsLongerThanTheWindow(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    *workflow.Constraints
	}{
		{"maxRuns 1 per 30d", &workflow.Constraints{MaxRuns: &workflow.MaxRuns{Count: 1, PeriodSeconds: 30 * 86400},
			TimeoutSeconds: workflow.NeverTimeout, OnTimeout: workflow.OnTimeoutGiveUp}},
		{"minInterval 30d", &workflow.Constraints{MinIntervalSeconds: 30 * 86400,
			TimeoutSeconds: workflow.NeverTimeout, OnTimeout: workflow.OnTimeoutGiveUp}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := fixture.Hourly("monthly")
			w.StartTime = ts("2026-11-01T00:00Z")
			w.Constraints = tc.c
			rr := newRestartRig(t, nil, w)
			rr.step("2026-11-01T00:30Z")    // 00:00 READY
			rr.step("2026-11-01T00:30:30Z") // 00:00 submitted
			rr.r.svc.finishAll(true)
			rr.step("2026-11-01T00:40Z")
			rr.wantSubmitted("01 00:00", "submitted %v, want 01 00:00")
			for _, at := range []string{"2026-11-05T00:00Z", "2026-11-08T00:31Z", "2026-11-08T01:00Z", "2026-11-12T00:00Z"} {
				rr.step(at)
			}
			rr.wantSubmitted("01 00:00", "without a restart: submitted %v within 30 days of the first submission, want 01 00:00 only")
			rr.restart()
			rr.step("2026-11-20T00:00Z")
			rr.step("2026-12-01T00:30:29Z")
			rr.wantSubmitted("01 00:00", "after a restart: submitted %v within 30 days of the first submission, want 01 00:00 only")
			rr.step("2026-12-01T00:30:30Z")
			if got := submittedTimes(rr.r.svc); len(got) != 2 {
				t.Fatalf("submitted %v once 30 days passed, want a second submission", got)
			}
		})
	}
}
