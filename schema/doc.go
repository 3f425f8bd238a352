// Package schema is the single source of truth for celos workflows: the
// embedded CUE schema and the compiler from a CUE project to the versioned
// JSON document whose Go types live in schema/workflow (the contract between
// `celos export`, `celos deploy` and `celos server`).
package schema
