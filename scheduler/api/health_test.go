package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/api"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/schema/workflow"
)

// blockingFS is a trigger file system whose Exists blocks, ignoring its
// context, until released: a read that hangs (a FIFO, a dead mount).
type blockingFS struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (f *blockingFS) Exists(context.Context, string, string) (bool, error) {
	f.once.Do(func() { close(f.entered) })
	<-f.release
	return true, nil
}

// fakeClock is an injected clock moved by hand.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// health is GET /healthz's answer.
type health struct {
	Status             string  `json:"status"`
	Error              string  `json:"error,omitempty"`
	Code               string  `json:"code,omitempty"`
	StepRunningSeconds float64 `json:"stepRunningSeconds,omitempty"`
	StepTimeoutSeconds float64 `json:"stepTimeoutSeconds,omitempty"`
}

// TestHealthzFailsWhileStepHangs: a step blocked in a trigger's file system
// (which ignores its deadline) makes /healthz answer 503, naming how long
// the step has run, once it has run longer than its bound, and
// celos_step_running_seconds says the same; /healthz is 200 again when the
// step ends. The clock is injected: no test waits for minutes.
func TestHealthzFailsWhileStepHangs(t *testing.T) {
	dir := t.TempDir()
	wf := filepath.Join(dir, "workflows")
	if err := os.Mkdir(wf, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Date(2015, 9, 13, 12, 0, 0, 0, time.UTC)
	fixture.WriteProject(t, wf, "demo", newWorkflow("in", fixture.HourlyCron, start, workflow.Trigger{Type: workflow.TriggerHDFSCheck, FS: "file:///", Path: "/in/_READY"}, 0))
	db, err := statedb.Open(filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	fs := &blockingFS{entered: make(chan struct{}), release: make(chan struct{})}
	eng, err := engine.New(engine.Options{WorkflowsDir: wf, Store: db, FS: fs, Logger: slogDiscard(),
		Services: map[string]external.Service{workflow.ServiceCommand: &jobs{}}})
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{}
	clock.ns.Store(time.Date(2015, 9, 13, 13, 40, 0, 0, time.UTC).UnixNano())
	h := api.New(eng, api.Options{Now: clock.now, StepTimeout: 5 * time.Minute})

	get := func(target string) *httptest.ResponseRecorder {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		api.CheckAnswer(t, "GET", target, rec)
		return rec
	}
	healthz := func() (int, health) {
		t.Helper()
		rec := get("/healthz")
		var hz health
		if err := json.Unmarshal(rec.Body.Bytes(), &hz); err != nil {
			t.Fatalf("healthz body %q: %v", rec.Body, err)
		}
		return rec.Code, hz
	}
	metric := func(name string) float64 {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(get("/metrics").Body.String())
		if m == nil {
			t.Fatalf("no %s in /metrics", name)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}

	if code, hz := healthz(); code != 200 || hz.Status != "ok" {
		t.Fatalf("healthz before any step: %d %+v", code, hz)
	}
	stepDone := make(chan int)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/scheduler?time=2015-09-13T13:40Z", nil))
		stepDone <- rec.Code
	}()
	select {
	case <-fs.entered:
	case <-time.After(2 * time.Minute):
		t.Fatal("the step never reached the trigger's file system")
	}

	var got []string
	probe := func() {
		code, hz := healthz()
		got = append(got, strconv.Itoa(code)+" "+hz.Status+" "+hz.Code+" "+hz.Error+" "+
			strconv.FormatFloat(hz.StepRunningSeconds, 'f', -1, 64)+" "+strconv.FormatFloat(metric("celos_step_running_seconds"), 'f', -1, 64))
	}
	probe()                        // just started
	clock.advance(4 * time.Minute) // within the bound
	probe()
	clock.advance(time.Minute) // at the bound: still fine
	probe()
	clock.advance(90 * time.Second) // over it
	probe()
	want := []string{
		"200 ok   0 0",
		"200 ok   240 240",
		"200 ok   300 300",
		"503 stuck step_stuck a scheduler step (time 2015-09-13T13:40:00.000Z) has been running for 6m30s since 2015-09-13T13:40:00.000Z, longer than its bound of 5m0s (--step-timeout) 390 390",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("healthz and celos_step_running_seconds while the step hangs (-want +got):\n%s", diff)
	}
	if v := metric("celos_step_timeout_seconds"); v != 300 {
		t.Errorf("celos_step_timeout_seconds %v, want 300", v)
	}

	close(fs.release)
	select {
	case code := <-stepDone:
		if code != http.StatusOK {
			t.Errorf("the step answered %d", code)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the step did not end after the file system answered")
	}
	if code, hz := healthz(); code != 200 || hz.Status != "ok" {
		t.Errorf("healthz after the step: %d %+v", code, hz)
	}
	if v := metric("celos_step_running_seconds"); v != 0 {
		t.Errorf("celos_step_running_seconds after the step: %v", v)
	}
}
