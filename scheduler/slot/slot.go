// Package slot is the vocabulary of the slot engine: a slot's identity, its
// status and its persisted state, shared by the engine, the state database,
// the HTTP API and the UI.
package slot

import (
	"fmt"
	"time"
)

// Status is the state a slot is in.
type Status string

// The slot statuses, as Celos names them on disk and in the API.
const (
	Waiting     Status = "WAITING"
	Ready       Status = "READY"
	Running     Status = "RUNNING"
	Success     Status = "SUCCESS"
	Failure     Status = "FAILURE"
	WaitTimeout Status = "WAIT_TIMEOUT"
	Killed      Status = "KILLED"
)

// Statuses lists every status, indeterminate ones first.
var Statuses = []Status{Waiting, Ready, Running, Success, Failure, WaitTimeout, Killed}

// Final reports whether a slot in this status is never touched again by the
// engine (only a rerun moves it).
func (s Status) Final() bool {
	switch s {
	case Success, Failure, WaitTimeout, Killed:
		return true
	}
	return false
}

// Valid reports whether s is one of the known statuses.
func (s Status) Valid() bool {
	for _, k := range Statuses {
		if s == k {
			return true
		}
	}
	return false
}

// Type is Celos's coarse grouping of statuses, used by the UI to colour a
// bucket of several slots.
type Type int

// Status types, from best to worst.
const (
	TypeSuccess Type = iota
	TypeIndeterminate
	TypeFailure
)

// Type returns the status type: WAITING, READY and RUNNING are
// indeterminate; FAILURE, WAIT_TIMEOUT and KILLED are failures.
func (s Status) Type() Type {
	switch s {
	case Success:
		return TypeSuccess
	case Failure, WaitTimeout, Killed:
		return TypeFailure
	}
	return TypeIndeterminate
}

// TimeFormat is how slot times are written in file names, JSON and the API:
// UTC with milliseconds, as Celos (2015-09-13T13:40:00.000Z).
const TimeFormat = "2006-01-02T15:04:05.000Z"

// FormatTime writes t in TimeFormat (converted to UTC).
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// ParseTime reads an ISO 8601 / RFC 3339 time as the API accepts it:
// 2015-09-13T13:40Z, 2015-09-13T13:40:00Z, 2015-09-13T13:40:00.000Z, or
// with a numeric offset. The result is in UTC.
func ParseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00"} {
		if t, err := time.Parse(layout, s); err == nil {
			if !validOffset(s) {
				return time.Time{}, fmt.Errorf("bad time %q: the offset is out of range (-23:59 to +23:59)", s)
			}
			// An offset can carry year 0000 or 9999 out of the four-digit
			// years the time is written back with (and slot files named by).
			if t = t.UTC(); t.Year() < 0 || t.Year() > 9999 {
				return time.Time{}, fmt.Errorf("bad time %q: out of range in UTC", s)
			}
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("bad time %q: want ISO 8601 such as 2015-09-13T13:40Z", s)
}

// validOffset reports whether the offset that ends s, if any (±hh:mm,
// two digits each: the layouts checked that), is one ISO 8601 allows: Go's
// parser also takes +24:00 or +00:60.
func validOffset(s string) bool {
	n := len(s)
	if n < 6 || (s[n-6] != '+' && s[n-6] != '-') || s[n-3] != ':' {
		return true
	}
	return s[n-5:n-3] < "24" && s[n-2:] < "60"
}

// ID names one slot: a workflow and a scheduled time.
type ID struct {
	Workflow string
	Time     time.Time
}

// String is Celos's slot id form, "wordcount@2015-09-13T13:40:00.000Z".
func (id ID) String() string { return id.Workflow + "@" + FormatTime(id.Time) }

// State is a slot's persisted state. ExternalID is empty when the slot has
// no external job.
type State struct {
	ID         ID
	Status     Status
	ExternalID string
	RetryCount int
}

// NewWaiting returns the state of a slot that has no record yet.
func NewWaiting(id ID) State { return State{ID: id, Status: Waiting} }
