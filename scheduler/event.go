package scheduler

import (
	"time"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// Event is something a workflow's notification targets hear of: a slot
// that failed, timed out waiting, missed its SLA, or succeeded after
// retries. The slot engine emits it once the step's state is recorded; a
// sender (scheduler/notify) delivers it without holding up the step.
type Event struct {
	// Kind is one of workflow.EventFailure, EventSLAMissed,
	// EventWaitTimeout, EventSuccessAfterRetries.
	Kind     string
	Workflow string
	Slot     time.Time
	// Status, ExternalID and RetryCount are the slot's state after the
	// step.
	Status     slot.Status
	ExternalID string
	RetryCount int
	// At is the step's time.
	At time.Time
	// Detail says more: the service's reason of a failure, the SLA's
	// deadline.
	Detail string
	// Targets are the workflow's targets that want this kind of event.
	Targets []workflow.Notification
	// Deliveries, if set, are the delivery ids of Targets (same order)
	// under which the engine recorded them in the state database's outbox:
	// the sender delivers under these ids and tells the outbox what became
	// of each (scheduler/notify's Outbox). An empty id: not recorded.
	Deliveries []string
}
