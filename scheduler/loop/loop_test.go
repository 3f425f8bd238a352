package loop

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/metrics"
)

// stepCounter is a service whose steps the test counts (and fails on
// demand); the rest of scheduler.Service is not used by a Stepper.
type stepCounter struct {
	scheduler.Service
	mu    sync.Mutex
	times []time.Time
	fail  error
	// inStep, when set, is called inside each step.
	inStep func()
}

func (s *stepCounter) Step(_ context.Context, now time.Time, _ []string) error {
	if s.inStep != nil {
		s.inStep()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.times = append(s.times, now)
	return s.fail
}

func (s *stepCounter) WorkflowIDs() []string             { return []string{"a", "b"} }
func (s *stepCounter) LoadErrors() []scheduler.LoadError { return nil }

func (s *stepCounter) steps() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.times)
}

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// TestStepTimesAndLogs: each step is counted by result, is in flight
// (for /healthz) while it runs and not after, and is logged.
func TestStepTimesAndLogs(t *testing.T) {
	svc := &stepCounter{}
	m := metrics.New()
	var logBuf bytes.Buffer
	s := New(svc, Options{Metrics: m, Logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
	at := time.Date(2015, 9, 13, 13, 40, 0, 0, time.UTC)
	svc.inStep = func() {
		if run, _, ok := m.OldestStep(); !ok || !run.At.Equal(at) {
			t.Errorf("step not in flight while it runs: %+v %v", run, ok)
		}
	}
	if err := s.Step(context.Background(), at, nil); err != nil {
		t.Fatal(err)
	}
	svc.fail = errors.New("disk full")
	if err := s.Step(context.Background(), at, []string{"a"}); !errors.Is(err, svc.fail) {
		t.Fatalf("step error %v, want %v", err, svc.fail)
	}
	if _, _, ok := m.OldestStep(); ok {
		t.Error("a step is still in flight after both returned")
	}
	body := scrape(t, m)
	for _, want := range []string{`celos_steps_total{result="ok"} 1`, `celos_steps_total{result="error"} 1`, "celos_step_duration_seconds_count 2"} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	log := logBuf.String()
	for _, want := range []string{"msg=step time=2015-09-13T13:40:00.000Z", "workflows=2", `msg="step failed"`, `error="disk full"`} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

// TestEveryStepsAtOnceAndStops: the loop steps at once, again after the
// interval, and returns when its context is cancelled.
func TestEveryStepsAtOnceAndStops(t *testing.T) {
	svc := &stepCounter{}
	s := New(svc, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Every(ctx, 10*time.Millisecond) }()
	deadline := time.Now().Add(10 * time.Second)
	for svc.steps() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d steps after 10 s", svc.steps())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return after cancel")
	}
}
