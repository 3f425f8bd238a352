// Package api serves the Celos-compatible HTTP API of `celos server`
// (/scheduler, /workflow-list, /workflow-slots, /trigger-status, /rerun,
// /kill, /pause, ...) over a scheduler.Service: its routes and handlers,
// its OpenAPI description, /metrics and /healthz (reading the metrics
// package), and the bearer-token check of the requests that change state.
//
// The token check (auth.go) stays here rather than in package server: the
// 401 answer, its WWW-Authenticate challenge and its JSON error body are
// part of the API's contract (openapi.json documents them, and its tests
// check them against the routes), and it is written with the API's error
// writer. The server decides whether a token is required (its policy on
// loopback and public addresses) and wraps its handlers with RequireToken;
// the Prometheus metrics and the step loop live below the API, in packages
// metrics and loop.
package api

import "github.com/celos-go/celos/scheduler/metrics"

// Metrics is metrics.Metrics.
//
// Deprecated: use package metrics. Kept only for scheduler/server's
// engine.go, which another change in flight is rewriting; remove it once
// that file names metrics.Metrics.
type Metrics = metrics.Metrics
