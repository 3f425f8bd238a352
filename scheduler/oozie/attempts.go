package oozie

// Every attempt of a slot: the Oozie jobs named after its celosWorkflowName
// (scheduler.AttemptLister).

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

var _ scheduler.AttemptLister = (*Service)(nil)

// maxAttempts bounds the jobs listed for one slot; maxFailureDetails the
// failed ones among the newest whose action error is fetched (one call
// each).
const (
	maxAttempts       = 200
	maxFailureDetails = 10
)

// Attempts lists the slot's jobs, oldest first, with the first failed
// action's error for a failed job (as Status gives it): the workflow jobs whose
// application name is the slot's celosWorkflowName
// (GET /jobs?filter=name=<workflow>@<time>), which every attempt of the slot
// has when workflow.xml is named "${celosWorkflowName}", as Celos's
// examples are. A workflow.xml with a fixed name gives no list (Oozie
// filters by application name only): the UI then shows the slot's last
// external ID alone.
func (s *Service) Attempts(ctx context.Context, w *workflow.Workflow, id slot.ID) ([]scheduler.Attempt, error) {
	c, err := s.client(w)
	if err != nil {
		return nil, err
	}
	jobs, err := c.Jobs(ctx, Filter{Name: WorkflowName(id)}, maxAttempts)
	if err != nil {
		return nil, fmt.Errorf("attempts of %s: %w", id, err)
	}
	// Oozie lists the newest first; jobs created in the same second keep
	// the order of their IDs (a sequence number, zero-padded).
	slices.SortStableFunc(jobs, func(a, b Job) int {
		if c := a.CreatedTime.Compare(b.CreatedTime.Time); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	out := make([]scheduler.Attempt, 0, len(jobs))
	details := 0
	for _, j := range jobs {
		// A failed job's list entry has no actions: ask for the newest
		// few, so that the first failed action's error shows.
		if (j.Status == StatusFailed || j.Status == StatusKilled) && len(jobs)-len(out) <= maxFailureDetails && details < maxFailureDetails {
			details++
			if info, err := c.JobInfo(ctx, j.ID); err == nil {
				j.Status, j.Actions = info.Status, info.Actions
			}
		}
		a := scheduler.Attempt{
			ExternalID: j.ID, Submitted: j.CreatedTime.Time, Started: j.StartTime.Time,
			Status: detail(&j), LogURL: j.ConsoleURL,
		}
		if st, err := MapStatus(j.Status); err == nil {
			a.Running, a.Success = st.Running, st.Success
		}
		if !a.Running {
			a.Ended = j.EndTime.Time
		}
		out = append(out, a)
	}
	return out, nil
}
