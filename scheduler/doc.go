// Package scheduler is the root of the slot engine: its sub-packages turn
// compiled workflows into time slots, decide from a state snapshot and a
// clock which slots become ready, run or finish, persist the result, and
// serve it over HTTP and in the web UI.
package scheduler
