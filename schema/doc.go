// Package schema is the single source of truth for celos workflows: the
// embedded CUE schema, the compiler from a CUE project to the versioned
// JSON document (the contract between `celos export`, `celos deploy` and
// `celos server`), and the Go types and validation of that document.
package schema
