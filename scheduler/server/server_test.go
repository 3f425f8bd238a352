package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler"
)

func TestDailyFileRolls(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 3, 1, 23, 59, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	f, err := openDailyFile(dir, clock)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "day one\n")
	now = now.Add(2 * time.Minute)
	io.WriteString(f, "day two\n")
	f.Close()
	if got := read(t, filepath.Join(dir, "celos-2026-03-01.log")); got != "day one\n" {
		t.Errorf("rolled file %q", got)
	}
	if got := read(t, filepath.Join(dir, LogFile)); got != "day two\n" {
		t.Errorf("current file %q", got)
	}

	// A celos.log left by an earlier run on an earlier day is rolled at the
	// first write, beside an existing roll of that day.
	old := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(dir, LogFile), old, old); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "celos-2026-03-02.log"), []byte("earlier\n"), 0o644)
	now = time.Date(2026, 3, 5, 8, 0, 0, 0, time.UTC)
	f, err = openDailyFile(dir, clock)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "day five\n")
	f.Close()
	if got := read(t, filepath.Join(dir, "celos-2026-03-02.1.log")); got != "day two\n" {
		t.Errorf("second roll of a day %q", got)
	}
	if got := read(t, filepath.Join(dir, LogFile)); got != "day five\n" {
		t.Errorf("current file %q", got)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLoggerWritesBoth(t *testing.T) {
	dir := t.TempDir()
	var stderr bytes.Buffer
	log, c, err := NewLogger(&stderr, dir, slog.LevelInfo)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("Loading file", "file", "demo.json")
	c.Close()
	for name, got := range map[string]string{"stderr": stderr.String(), "file": read(t, filepath.Join(dir, LogFile))} {
		if !strings.Contains(got, `msg="Loading file" file=demo.json`) || !strings.Contains(got, "level=INFO") {
			t.Errorf("%s: %q", name, got)
		}
	}
}

// stepStub is just enough of a Service for the server's lifecycle: steps
// are counted, and one can be held in flight.
type stepStub struct {
	scheduler.Service
	steps   atomic.Int32
	hold    chan struct{} // when set, the second step waits for it
	started chan struct{}
	closed  atomic.Bool
	once    sync.Once
}

func (s *stepStub) Step(ctx context.Context, now time.Time, ids []string) error {
	if n := s.steps.Add(1); n == 2 && s.hold != nil {
		s.once.Do(func() { close(s.started) })
		<-s.hold
	}
	return nil
}
func (s *stepStub) LoadErrors() []scheduler.LoadError { return nil }
func (s *stepStub) WorkflowIDs() []string             { return nil }
func (s *stepStub) Close() error                      { s.closed.Store(true); return nil }

// open is the stub's opener for run: the stub is the engine and its closer.
func (s *stepStub) open(Config, deps) (scheduler.Service, io.Closer, error) { return s, s, nil }

func TestRunFinishesStepInFlight(t *testing.T) {
	dir := t.TempDir()
	stub := &stepStub{hold: make(chan struct{}), started: make(chan struct{})}
	cfg := Config{
		Workflows: dir, DB: filepath.Join(dir, "db"), Logs: filepath.Join(dir, "logs"),
		AutoSchedule: 10 * time.Millisecond, URLFile: filepath.Join(dir, "url"),
		Stderr: io.Discard, Version: "test",
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, stub.open) }()
	<-stub.started // the second automatic step is in flight
	url := strings.TrimSpace(waitFile(t, cfg.URLFile))
	resp, err := http.Get(url + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()

	cancel() // SIGTERM
	select {
	case err := <-done:
		t.Fatalf("run returned %v with a step in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(stub.hold)
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if n := stub.steps.Load(); n != 2 {
		t.Errorf("%d steps; no step may start after the shutdown began", n)
	}
	if !stub.closed.Load() {
		t.Error("engine not closed")
	}
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Error("still serving after shutdown")
	}
	if log := read(t, filepath.Join(cfg.Logs, LogFile)); !strings.Contains(log, "msg=step") || !strings.Contains(log, "celos server stopped") {
		t.Errorf("log file:\n%s", log)
	}
}

// TestRunLeavesDBOpenForStuckStep: when the shutdown timeout passes with
// the step still running, run returns an error and does not close the
// state database under the step.
func TestRunLeavesDBOpenForStuckStep(t *testing.T) {
	dir := t.TempDir()
	stub := &stepStub{hold: make(chan struct{}), started: make(chan struct{})}
	defer close(stub.hold)
	cfg := Config{
		Workflows: dir, DB: filepath.Join(dir, "db"), Logs: filepath.Join(dir, "logs"),
		AutoSchedule: 10 * time.Millisecond, ShutdownTimeout: time.Millisecond,
		Stderr: io.Discard, Version: "test",
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, stub.open) }()
	<-stub.started // the second automatic step is in flight, and held
	cancel()
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("run: %v, want the step-still-running error", err)
	}
	if stub.closed.Load() {
		t.Error("state database closed while the step still runs")
	}
	if log := read(t, filepath.Join(cfg.Logs, LogFile)); !strings.Contains(log, "state database left open") {
		t.Errorf("log file:\n%s", log)
	}
}

func TestRunNeedsWorkflowsDir(t *testing.T) {
	cfg := Config{Workflows: filepath.Join(t.TempDir(), "missing"), Stderr: io.Discard}
	err := run(context.Background(), cfg, nil)
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("err %v", err)
	}
}

// TestRunHealthzReportsStuckStep: --step-timeout reaches /healthz: with the
// second automatic step held in flight past a 1 ms bound, /healthz answers
// 503 naming the step and the bound, and /metrics shows
// celos_step_timeout_seconds; it is 200 again once the step ends.
func TestRunHealthzReportsStuckStep(t *testing.T) {
	dir := t.TempDir()
	stub := &stepStub{hold: make(chan struct{}), started: make(chan struct{})}
	cfg := Config{
		Workflows: dir, DB: filepath.Join(dir, "db"), Logs: filepath.Join(dir, "logs"),
		AutoSchedule: 10 * time.Millisecond, URLFile: filepath.Join(dir, "url"),
		Stderr: io.Discard, Version: "test", StepTimeout: time.Millisecond,
	}
	url, _ := startRun(t, cfg, stub.open)
	<-stub.started
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := 0, ""
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && code != http.StatusServiceUnavailable; time.Sleep(10 * time.Millisecond) {
		code, body = get("/healthz")
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"status": "stuck"`) || !strings.Contains(body, "longer than its bound of 1ms (--step-timeout)") {
		t.Errorf("healthz with a step held past its bound: %d %s", code, body)
	}
	if _, m := get("/metrics"); !strings.Contains(m, "\ncelos_step_timeout_seconds 0.001\n") {
		t.Errorf("metrics lack celos_step_timeout_seconds 0.001")
	}
	close(stub.hold)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && code != http.StatusOK; time.Sleep(10 * time.Millisecond) {
		code, body = get("/healthz")
	}
	if code != http.StatusOK {
		t.Errorf("healthz after the step ended: %d %s", code, body)
	}
}
