package slot

import "errors"

// Sentinel errors of the engine's operations; the HTTP API maps the first
// two to 404 and the others to 400. Wrap them with the details.
var (
	ErrUnknownWorkflow   = errors.New("workflow not found")
	ErrSlotNotFound      = errors.New("slot not found")
	ErrNotInSchedule     = errors.New("time is not a slot of the workflow's schedule")
	ErrIllegalTransition = errors.New("illegal slot transition")
	ErrBadParameter      = errors.New("bad parameter")
)
