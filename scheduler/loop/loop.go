// Package loop runs the scheduler's steps for `celos server`: the one place
// a step is timed, counted in the metrics, tracked while in flight (for
// /healthz) and logged, whether the --autoSchedule timer or a POST
// /scheduler asks for it. It sits below the transports (the HTTP API calls
// Stepper.Step; the server runs Stepper.Every) and above the engine's
// contract (scheduler.Service).
package loop

import (
	"context"
	"log/slog"
	"time"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/metrics"
	"github.com/celos-go/celos/scheduler/slot"
)

// Options configure a Stepper.
type Options struct {
	// Metrics receives each step's duration, result and time in flight
	// (default: a new, unserved registry). The HTTP API must be given the
	// same one, so that /metrics and /healthz see the steps.
	Metrics *metrics.Metrics
	// Logger receives one line per step (default: discard).
	Logger *slog.Logger
}

// Stepper steps a scheduler.Service, timing and logging each step.
type Stepper struct {
	svc     scheduler.Service
	metrics *metrics.Metrics
	log     *slog.Logger
}

// New returns the stepper of svc.
func New(svc scheduler.Service, opts Options) *Stepper {
	s := &Stepper{svc: svc, metrics: opts.Metrics, log: opts.Logger}
	if s.metrics == nil {
		s.metrics = metrics.New()
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Metrics returns the registry the stepper records into.
func (s *Stepper) Metrics() *metrics.Metrics { return s.metrics }

// Step runs one scheduler step at now (for the named workflows, or all),
// timing it in the metrics and logging it. A failed step is logged as an
// error and its error returned.
func (s *Stepper) Step(ctx context.Context, now time.Time, ids []string) error {
	defer s.metrics.StepEnded(s.metrics.StepStarted(now))
	start := time.Now()
	err := s.svc.Step(ctx, now, ids)
	took := time.Since(start)
	s.metrics.StepDone(took, err)
	if err != nil {
		s.log.Error("step failed", "time", slot.FormatTime(now), "ids", ids, "took", took, "error", err)
		return err
	}
	s.log.Info("step", "time", slot.FormatTime(now), "ids", ids, "took", took.Round(time.Microsecond),
		"workflows", len(s.svc.WorkflowIDs()), "loadErrors", len(s.svc.LoadErrors()))
	return nil
}

// Every steps at once and then every interval after the previous step
// finished (Celos's fixed delay), with the wall clock as now, until ctx is
// done. A step in flight is not cancelled (it runs under a context without
// cancellation): Every returns once it is done. A failed step is logged by
// Step and the loop goes on.
func (s *Stepper) Every(ctx context.Context, interval time.Duration) {
	for {
		_ = s.Step(context.WithoutCancel(ctx), time.Now(), nil)
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
