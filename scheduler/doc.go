// Package scheduler is the root of the slot engine and its contract: its
// sub-packages turn compiled workflows into time slots, decide from a state
// snapshot and a clock which slots become ready, run or finish, persist the
// result, and serve it over HTTP and in the web UI. This package holds what
// the engine offers those transports (Service, LoadError, Problem, the
// sentinel errors) and the one sliding window they share (Window), so that
// the engine imports neither the API nor the UI, and they only this.
package scheduler
