// Package celosjs converts Celos JavaScript workflow files to a celos CUE
// package, and proves the conversion: it evaluates each file with an
// embedded JavaScript engine (goja: no cgo, no Node) that provides Celos's
// JavaScript API (celos.defineWorkflow, importDefaults, the trigger,
// schedule, strategy and Oozie builders, property functions), records the
// workflows each file defines (Evaluate), writes them as CUE that reads as
// if a person wrote it (Generate), and compares the compiled CUE with what
// the JavaScript defined, workflow by workflow (Check). It is what
// `celos import-js` runs.
package celosjs
