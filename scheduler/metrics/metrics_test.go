package metrics

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// scripted is an external service whose answers the test sets.
type scripted struct {
	submitErr error
	status    external.Status
	statusErr error
}

func (s *scripted) Submit(context.Context, *workflow.Workflow, slot.ID) (string, error) {
	return "job-1", s.submitErr
}
func (s *scripted) Status(context.Context, *workflow.Workflow, string) (external.Status, error) {
	return s.status, s.statusErr
}
func (s *scripted) Kill(context.Context, *workflow.Workflow, string) error { return nil }

type recovering struct{ scripted }

func (*recovering) Recover(context.Context, *workflow.Workflow, slot.ID, time.Time) (string, bool, error) {
	return "", false, errors.New("cannot list jobs")
}

func TestInstrumentServices(t *testing.T) {
	m := New()
	plain, rec := &scripted{}, &recovering{}
	svcs := m.InstrumentServices(map[string]external.Service{"command": plain, "oozie": rec})
	if _, ok := svcs["command"].(external.Recoverer); ok {
		t.Error("a service without Recoverer gained one")
	}
	r, ok := svcs["oozie"].(external.Recoverer)
	if !ok {
		t.Fatal("Recoverer not forwarded: the engine could not recover jobs after a crash")
	}
	ctx := context.Background()
	w := &workflow.Workflow{ID: "w"}
	id := slot.ID{Workflow: "w", Time: t0}

	svcs["command"].Submit(ctx, w, id)
	plain.submitErr = fmt.Errorf("fork: %w", external.ErrUnavailable)
	svcs["command"].Submit(ctx, w, id)
	svcs["command"].Status(ctx, w, "job-1") // finished, failed
	plain.status = external.Status{Running: true}
	svcs["command"].Status(ctx, w, "job-1")
	plain.statusErr = errors.New("no record")
	svcs["command"].Status(ctx, w, "job-1")
	r.Recover(ctx, w, id, t0)

	for name, c := range map[string]struct {
		got  float64
		want float64
	}{
		"submissions":       {value(m.submissions.WithLabelValues("command")), 1},
		"job failures":      {value(m.jobFailures.WithLabelValues("command")), 1},
		"submit errors":     {value(m.serviceErrors.WithLabelValues("command", "submit")), 1},
		"status errors":     {value(m.serviceErrors.WithLabelValues("command", "status")), 1},
		"recover errors":    {value(m.serviceErrors.WithLabelValues("oozie", "recover")), 1},
		"oozie submissions": {value(m.submissions.WithLabelValues("oozie")), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", name, c.got, c.want)
		}
	}
}

func TestRecordStep(t *testing.T) {
	m := New()
	m.RecordStep(map[slot.Status]int{slot.Running: 3, slot.Success: 2}, map[string]int{"trigger": 1}, 5)
	m.RecordStep(map[slot.Status]int{slot.Running: 1}, nil, 0)
	if got := value(m.transitions.WithLabelValues("RUNNING")); got != 4 {
		t.Errorf("RUNNING transitions %v", got)
	}
	if got := value(m.slotErrors.WithLabelValues("trigger")); got != 1 {
		t.Errorf("trigger errors %v", got)
	}
	if got := value(m.writes); got != 5 {
		t.Errorf("writes %v", got)
	}
}

var t0 = time.Date(2015, 9, 13, 13, 40, 0, 0, time.UTC)

// value reads a counter.
func value(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
