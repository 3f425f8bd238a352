// Package archtest enforces the import rules of the design (§3 "Layout":
// the compiled contract depends on nothing of ours, the scheduler and
// deploy never on the CUE side, the scheduler's core below its transports,
// nothing on cmd/, internal/ below scheduler/). It has no code: its test
// reads the import graph with `go list` and fails naming the import that
// breaks a rule, so a broken rule cannot come back silently.
package archtest
