// The scheduler's contract: what the slot engine offers its transports (the
// HTTP API, the UI, metrics) and the errors and values they share.

package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/schema/workflow"
)

// ErrRegisterNotFound is returned (wrapped) by GetRegister when the bucket
// holds no such key; the HTTP API answers 404.
var ErrRegisterNotFound = errors.New("register not found")

// ErrReservedBucket is returned (wrapped) by PutRegister, DeleteRegister
// and DeleteRegistersWithPrefix for a bucket the scheduler keeps its own
// records in (celos-sla-missed, celos-outbox, celos-departed,
// celos-defined: engine.ReservedBuckets), and by GetRegister for all but
// celos-sla-missed (webhook URLs, workflow definitions); the HTTP API
// answers 403.
var ErrReservedBucket = errors.New("reserved register bucket")

// ErrUnschedulable is wrapped by the operations on a workflow whose
// schedule does not resolve (a dependent schedule naming a workflow that is
// not loaded, a cycle of dependent schedules): a fault of the workflows
// configuration, not of the request or the server. The HTTP API answers 409.
var ErrUnschedulable = errors.New("workflow has no usable schedule")

// ErrSlotUnreadable is wrapped by the reads of a slot whose stored record
// cannot be read (a corrupt state file); the error names the record and
// why, never its content. A rerun or kill rewrites the record. The HTTP
// API answers 409.
var ErrSlotUnreadable = errors.New("slot state unreadable")

// ListedSlot is one slot of a listing (Service.Slots): its state, or,
// when its stored record cannot be read, why. A listing carries such a
// slot in its place rather than leaving it out, so that what acts on a
// range (a backfill, the UI's grid) sees it.
type ListedSlot struct {
	// State is the slot's state; of an unreadable slot, only its ID.
	slot.State
	// Unreadable, when not nil, wraps ErrSlotUnreadable: the slot's
	// record does not parse (named, never its content; a rerun or kill
	// rewrites it). Status is then empty.
	Unreadable error
}

// ErrRerunRefused is wrapped by Rerun (and CheckRerun) for a slot the
// workflow does not have yet or at all: a time after the server's clock
// (not due: it runs at its time, a rerun must not run it early) or before
// the workflow's startTime. The HTTP API answers 400.
var ErrRerunRefused = errors.New("rerun refused")

// The refusals a client acts on, told apart by errors.Is (the HTTP API
// answers each with its own code). The engine wraps them beside the error
// whose text it answers (ErrRerunRefused, slot.ErrIllegalTransition), so
// their own text never shows.
var (
	// ErrNotDue: a rerun of a slot after the server's clock. Its error
	// holds a *NotDueError with that time.
	ErrNotDue = errors.New("slot not due yet")
	// ErrBeforeStart: a rerun of a slot before the workflow's startTime.
	ErrBeforeStart = errors.New("slot before the workflow's startTime")
	// ErrNotFinal: a rerun of a slot that is not final (WAITING, READY,
	// RUNNING): it runs anyway, or is running.
	ErrNotFinal = errors.New("slot not final")
)

// NotDueError is the server's time of an ErrNotDue refusal, for a client
// that goes on at that time (errors.As). It is ErrNotDue (errors.Is).
type NotDueError struct {
	ServerTime time.Time
}

func (e *NotDueError) Error() string {
	return "slot not due yet (the server's time is " + slot.FormatTime(e.ServerTime) + ")"
}

// Is makes errors.Is(err, ErrNotDue) true.
func (e *NotDueError) Is(target error) bool { return target == ErrNotDue }

// ErrStoreUnavailable is wrapped by a state store's error when its
// database cannot be reached (PostgreSQL down, restarting or across a
// broken network): no fault of the request, nor a bug. The HTTP API
// answers 503 with a reference to the logged error, whose text (the
// database's host and user) it does not answer.
var ErrStoreUnavailable = errors.New("state database unreachable")

// ErrNoAttempts is wrapped when a workflow's external service keeps no
// list of a slot's attempts (no AttemptLister); the HTTP API answers 501.
var ErrNoAttempts = errors.New("this external service keeps no list of a slot's attempts")

// RerunChecker is implemented by a Service that can say whether Rerun
// would accept a slot without changing anything (GET /rerun, the dry run
// of celos rerun). The slot engine implements it.
type RerunChecker interface {
	// CheckRerun returns the slot's state now (WAITING for a slot with no
	// record) when Rerun(ctx, id, now) would accept it, else the error
	// Rerun would return.
	CheckRerun(ctx context.Context, id slot.ID, now time.Time) (slot.State, error)
}

// LoadError is a workflows file that did not load.
type LoadError struct {
	File  string `json:"file"`
	Error string `json:"error"`
}

// Window is Celos's sliding window: a step looks at the slots of the last
// 168 hours, /workflow-slots returns at most that much, and the UI shows at
// most that much. The state database keeps final slots at least a day
// longer (statedb.MinRetention).
const Window = 7 * 24 * time.Hour

// Problem is an error the slot engine met and kept for display: a workflow that
// could not be stepped, or one slot's trigger, submit, status or state
// file error. It is cleared when the slot (or workflow) next goes well.
type Problem struct {
	Workflow string `json:"workflow"`
	// Slot is the slot time, zero for a workflow-level problem.
	Slot time.Time `json:"slot,omitzero"`
	// Op is what failed: "schedule", "trigger", "submit", "status",
	// "recover", "state", "persist"; or why a slot is held or late:
	// "constraint" (a READY slot a run constraint keeps from running),
	// "pool" (a READY slot waiting for its full pool, or, for a workflow,
	// a pool the pools file does not define), "sla" (a slot that missed
	// its SLA).
	Op    string    `json:"op"`
	Error string    `json:"error"`
	At    time.Time `json:"at"`
}

// Service is what the HTTP API and the UI need from the slot engine.
// Errors wrap the sentinels of package slot (ErrUnknownWorkflow → 404,
// ErrSlotNotFound → 404, ErrNotInSchedule → 404, ErrIllegalTransition → 400,
// ErrBadParameter → 400) or of this package (ErrRerunRefused → 400,
// ErrUnschedulable → 409, ErrRegisterNotFound → 404); anything else is a 500.
// The HTTP API's table (scheduler/api errorKinds) also gives each a code.
type Service interface {
	// Step reloads the workflows directory and runs one scheduler step at
	// now for every workflow, or only the named ones.
	Step(ctx context.Context, now time.Time, ids []string) error
	// WorkflowIDs lists the loaded workflows, sorted.
	WorkflowIDs() []string
	// Workflow returns a loaded workflow's definition.
	Workflow(id string) (*workflow.Workflow, error)
	// LoadErrors lists the workflows files that failed to load at the last reload.
	LoadErrors() []LoadError
	// Slots returns the slots of a workflow in [start, end), newest first,
	// with missing records synthesized as WAITING and unreadable ones
	// marked (ListedSlot.Unreadable). Any other read error fails it: never
	// a partial list.
	Slots(ctx context.Context, id string, start, end time.Time) ([]ListedSlot, error)
	// SlotState returns the stored state of one slot (ErrSlotNotFound if none).
	SlotState(ctx context.Context, id slot.ID) (slot.State, error)
	// Paused reports whether a workflow is paused; SetPaused changes it.
	Paused(id string) (bool, error)
	SetPaused(ctx context.Context, id string, paused bool) error
	// TriggerStatus explains the trigger of one slot at now.
	TriggerStatus(ctx context.Context, id slot.ID, now time.Time) (trigger.Status, error)
	// Rerun resets a final slot to WAITING and marks it for rerun. A slot
	// after now or before the workflow's startTime wraps ErrRerunRefused
	// and ErrNotDue (a *NotDueError) or ErrBeforeStart; a slot that is not
	// final, slot.ErrIllegalTransition and ErrNotFinal.
	Rerun(ctx context.Context, id slot.ID, now time.Time) error
	// Kill marks a slot KILLED and kills its external job.
	Kill(ctx context.Context, id slot.ID) error
	// Registers: Celos's JSON key-value store. GetRegister wraps
	// ErrRegisterNotFound for a missing key; RegisterKeys of an unknown
	// bucket is an empty list. Bad bucket or key names wrap slot.ErrBadParameter.
	GetRegister(ctx context.Context, bucket, key string) (json.RawMessage, error)
	PutRegister(ctx context.Context, bucket, key string, value json.RawMessage) error
	DeleteRegister(ctx context.Context, bucket, key string) error
	DeleteRegistersWithPrefix(ctx context.Context, bucket, prefix string) error
	RegisterKeys(ctx context.Context, bucket, prefix string) ([]string, error)
	// ClearCache drops the cached workflow configuration (POST /clear-cache).
	ClearCache() error
}

// Attempt is one run of a slot on its external service: the first
// submission, each automatic retry and each rerun is one. The slot's state
// keeps only the last external ID and the retry count; the service keeps
// the rest.
type Attempt struct {
	// ExternalID is the job's ID on the service (an Oozie job ID; a
	// command job "<workflow>@<slot>.<nanos>").
	ExternalID string `json:"externalID"`
	// Submitted, Started and Ended are zero when unknown or not yet.
	Submitted time.Time `json:"submitted,omitzero"`
	Started   time.Time `json:"started,omitzero"`
	Ended     time.Time `json:"ended,omitzero"`
	// Running is true while the job has not ended; Success once it has.
	Running bool `json:"running"`
	Success bool `json:"success"`
	// Status is the service's own word: "exit 0", "exit 3", "killed",
	// "timed out", "never started: …" for a command; SUCCEEDED, KILLED,
	// FAILED, RUNNING for Oozie.
	Status string `json:"status"`
	// ExitCode is a command's exit code (absent for Oozie, or when the
	// command did not exit by itself).
	ExitCode *int `json:"exitCode,omitempty"`
	// LogURL is where the service shows the job's log (Oozie's console
	// URL). A command job's log is served by celos (HasLog).
	LogURL string `json:"logURL,omitempty"`
	HasLog bool   `json:"hasLog,omitempty"`
}

// AttemptLister is implemented by an external service that can list every
// attempt of a slot (the command service from its job records, the Oozie
// service from the jobs named after the slot's celosWorkflowName). The
// server hands it to the HTTP API (GET /slot-attempts) and the UI (the
// details drawer). Attempts are oldest first.
type AttemptLister interface {
	Attempts(ctx context.Context, w *workflow.Workflow, id slot.ID) ([]Attempt, error)
}

// FaultReference returns a random reference (16 hex digits) for a request
// that failed on the server's side: the transports log the fault under it
// and answer only the reference (an API 500, a UI error page), since the
// fault's text may name the server's files.
func FaultReference() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
