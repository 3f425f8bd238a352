package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/servertest"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/schema/workflow"
)

// hookReceiver is a real webhook target that answers 503 while down and
// records the delivery ids of the attempts it saw, and of those it
// accepted.
type hookReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	down     bool
	tried    []string // X-Celos-Delivery of every attempt
	accepted []string // of the attempts answered 200
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{down: true}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		id := r.Header.Get("X-Celos-Delivery")
		h.mu.Lock()
		defer h.mu.Unlock()
		h.tried = append(h.tried, id)
		if h.down {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		h.accepted = append(h.accepted, id)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookReceiver) setDown(down bool) {
	h.mu.Lock()
	h.down = down
	h.mu.Unlock()
}

// wait polls (60 s at most) until ok holds of the ids tried and accepted.
func (h *hookReceiver) wait(t *testing.T, what string, ok func(tried, accepted []string) bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		h.mu.Lock()
		tried, accepted := append([]string(nil), h.tried...), append([]string(nil), h.accepted...)
		h.mu.Unlock()
		if ok(tried, accepted) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 60 s; attempts %q, accepted %q", what, tried, accepted)
		}
	}
}

func (h *hookReceiver) firstTried() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.tried[0]
}

// failingProject writes a workflow whose one slot (this hour's) fails at
// once, with a webhook target for failures at url.
func failingProject(t *testing.T, dir, url string) string {
	t.Helper()
	wdir := filepath.Join(dir, "workflows")
	if err := os.MkdirAll(wdir, 0o755); err != nil {
		t.Fatal(err)
	}
	w := workflow.Workflow{ID: "etl", Schedule: workflow.Schedule{Type: workflow.ScheduleCron, Cron: "0 0 * * * ?", TimeZone: "UTC"},
		Trigger: workflow.Trigger{Type: workflow.TriggerAlways}, SchedulingStrategy: workflow.Strategy{Type: workflow.StrategySerial, Concurrency: 1},
		ExternalService: workflow.ExternalService{Type: workflow.ServiceCommand, Command: []string{"false"}},
		StartTime:       time.Now().UTC().Truncate(time.Hour), WaitTimeoutSeconds: workflow.NeverTimeout,
		Notify: []workflow.Notification{{Type: workflow.NotifyWebhook, URL: url + "/hook", Events: []string{workflow.EventFailure}}}}
	p := &workflow.Project{Format: workflow.FormatVersion, Project: "p", Workflows: []workflow.Workflow{w}}
	data, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wdir, "p.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return wdir
}

// TestFailureNotificationSurvivesAGracefulStop: a slot fails while its
// webhook target is down (503); the server is stopped as SIGTERM stops
// it while the delivery waits for its retry; the target comes up and the
// server starts again on the same state directory: the failure arrives,
// with the delivery id of the first attempt. (Before, the sender kept its
// deliveries in memory only: the delivery was dropped at the stop, and
// the slot, already FAILURE, never produced the event again.)
func TestFailureNotificationSurvivesAGracefulStop(t *testing.T) {
	dir := t.TempDir()
	hook := newHookReceiver(t)
	logs := &servertest.LockedBuffer{}
	cfg := Config{Workflows: failingProject(t, dir, hook.URL), DB: filepath.Join(dir, "db"), AutoSchedule: 20 * time.Millisecond,
		URLFile: filepath.Join(dir, "url"), Stderr: logs, Version: "test"}
	open := func(cfg Config, d deps) (scheduler.Service, io.Closer, error) {
		d.services = map[string]external.Service{workflow.ServiceCommand: &failingService{}}
		return openEngine(cfg, d)
	}
	_, stop := startRun(t, cfg, open)
	hook.wait(t, "a first attempt of the failure", func(tried, _ []string) bool { return len(tried) > 0 })
	id := hook.firstTried()
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	hook.setDown(false)
	os.Remove(cfg.URLFile)
	startRun(t, cfg, open)
	hook.wait(t, "the failure delivered after the restart", func(_, accepted []string) bool {
		for _, a := range accepted {
			if a == id {
				return true
			}
		}
		return false
	})
}
