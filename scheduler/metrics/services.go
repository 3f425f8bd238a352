package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// InstrumentServices wraps each external service so that its submissions,
// failed jobs and errors are counted under its type (the map's key).
func (m *Metrics) InstrumentServices(svcs map[string]external.Service) map[string]external.Service {
	out := make(map[string]external.Service, len(svcs))
	for typ, s := range svcs {
		out[typ] = m.instrument(typ, s)
	}
	return out
}

func (m *Metrics) instrument(typ string, s external.Service) external.Service {
	in := &instrumented{Service: s, typ: typ, m: m}
	if r, ok := s.(external.Recoverer); ok {
		return &instrumentedRecoverer{instrumented: in, r: r}
	}
	return in
}

// instrumented counts calls to an external service.
type instrumented struct {
	external.Service
	typ string
	m   *Metrics
}

func (s *instrumented) fail(op string, err error) {
	if err != nil && !errors.Is(err, context.Canceled) {
		s.m.serviceErrors.WithLabelValues(s.typ, op).Inc()
	}
}

func (s *instrumented) Submit(ctx context.Context, w *workflow.Workflow, id slot.ID) (string, error) {
	x, err := s.Service.Submit(ctx, w, id)
	s.fail("submit", err)
	if err == nil {
		s.m.submissions.WithLabelValues(s.typ).Inc()
	}
	return x, err
}

func (s *instrumented) Status(ctx context.Context, w *workflow.Workflow, externalID string) (external.Status, error) {
	st, err := s.Service.Status(ctx, w, externalID)
	s.fail("status", err)
	if err == nil && !st.Running && !st.Success {
		s.m.jobFailures.WithLabelValues(s.typ).Inc()
	}
	return st, err
}

func (s *instrumented) Kill(ctx context.Context, w *workflow.Workflow, externalID string) error {
	err := s.Service.Kill(ctx, w, externalID)
	s.fail("kill", err)
	return err
}

// Unwrap returns the wrapped service (for optional interfaces a caller
// looks for beyond the ones forwarded here).
func (s *instrumented) Unwrap() external.Service { return s.Service }

// instrumentedRecoverer also forwards external.Recoverer, which the engine
// looks for after a crash between submit and record.
type instrumentedRecoverer struct {
	*instrumented
	r external.Recoverer
}

func (s *instrumentedRecoverer) Recover(ctx context.Context, w *workflow.Workflow, id slot.ID, since time.Time) (string, bool, error) {
	x, found, err := s.r.Recover(ctx, w, id, since)
	s.fail("recover", err)
	return x, found, err
}
