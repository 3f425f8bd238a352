// Package faults holds the fault tests of issue 8 that span packages: a
// `celos server` process killed with SIGKILL in the middle of a step and
// restarted, two servers on one state directory, a slow client, a state
// database that turns read-only, Oozie going down, slow, answering 500 or
// garbage while the engine submits, and hostile input against the whole
// HTTP stack. It has no code of its own; see docs/reliability.md.
package faults
