// Package api serves the Celos-compatible HTTP API of `celos server`
// (/scheduler, /workflow-list, /workflow-slots, /trigger-status, /rerun,
// /kill, /pause, ...), its OpenAPI description, metrics and health, over a
// Service.
package api
