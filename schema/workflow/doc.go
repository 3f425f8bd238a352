// Package workflow is the compiled workflows contract: the Go types of the
// versioned JSON document that `celos export` writes and `celos deploy` and
// `celos server` read, its loader (Load) and its validation. It depends on
// no CUE package, so the scheduler and the deployer link none; the CUE side
// (package schema) compiles a project into these types.
package workflow
