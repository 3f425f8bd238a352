package statedb_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/server"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/schema/workflow"
)

// hourlyWorkflow is an hourly workflow with the given trigger that runs
// `true` through the command service.
func hourlyWorkflow(id string, trig workflow.Trigger) workflow.Workflow {
	w := fixture.Hourly(id)
	w.Trigger = trig
	return w
}

// TestStepAndReadsFinishWithAFIFOSlotFile: a FIFO as a slot file in the
// window neither hangs a step nor the reads of the API (slots, counts):
// that slot is reported, the others are stepped.
func TestStepAndReadsFinishWithAFIFOSlotFile(t *testing.T) {
	wfDir, dbDir := t.TempDir(), t.TempDir()
	fixture.WriteProject(t, wfDir, "p", hourlyWorkflow("wf", workflow.Trigger{Type: workflow.TriggerNot, Trigger: &workflow.Trigger{Type: workflow.TriggerAlways}}))
	now := time.Now().UTC().Truncate(time.Hour)
	fifoSlot := now.Add(-3 * time.Hour)
	p := filepath.Join(dbDir, "state", "wf", fifoSlot.Format("2006-01-02"), fifoSlot.Format("15:04:05.000Z"))
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := statedb.Open(dbDir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	eng, err := engine.New(engine.Options{WorkflowsDir: wfDir, Store: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := eng.Step(context.Background(), now, nil); err != nil {
			t.Errorf("step: %v", err)
		}
		sts, err := eng.Slots(context.Background(), "wf", now.Add(-24*time.Hour), now)
		if err != nil || len(sts) < 20 {
			t.Errorf("slots: %d %v", len(sts), err)
		}
		_ = eng.StatusCounts() // /metrics
		if _, err := eng.SlotState(context.Background(), slot.ID{Workflow: "wf", Time: fifoSlot}); err == nil {
			t.Errorf("the FIFO slot read as a state")
		}
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		panic("a step or read with a FIFO slot file still blocked after 60s")
	}
	if probs := db.Problems(); len(probs) != 1 {
		t.Errorf("problems: %v", probs)
	}
}

// TestServerAnswersWithAFIFOSlotFile: through a real server, a FIFO as a
// slot file of the window hangs neither a step (POST /scheduler) nor
// /workflow-slots, /ui or /metrics: each answers within a generous bound.
func TestServerAnswersWithAFIFOSlotFile(t *testing.T) {
	dir := t.TempDir()
	wfDir, dbDir := filepath.Join(dir, "wf"), filepath.Join(dir, "db")
	os.Mkdir(wfDir, 0o755)
	fixture.WriteProject(t, wfDir, "p", hourlyWorkflow("wf", workflow.Trigger{Type: workflow.TriggerNot, Trigger: &workflow.Trigger{Type: workflow.TriggerAlways}}))
	fifoSlot := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	p := filepath.Join(dbDir, "state", "wf", fifoSlot.Format("2006-01-02"), fifoSlot.Format("15:04:05.000Z"))
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	urlFile := filepath.Join(dir, "url")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Config{Workflows: wfDir, DB: dbDir, URLFile: urlFile, Stderr: io.Discard, ShutdownTimeout: 5 * time.Second})
	}()
	var base string
	for deadline := time.Now().Add(30 * time.Second); base == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(urlFile); err == nil && len(b) > 0 {
			base = strings.TrimSpace(string(b))
		}
	}
	if base == "" {
		t.Fatal("the server did not start")
	}
	client := &http.Client{Timeout: 60 * time.Second}
	for _, req := range []struct{ method, path string }{
		{"POST", "/scheduler"},
		{"GET", "/workflow-slots?id=wf"},
		{"GET", "/ui"},
		{"GET", "/metrics"},
		{"GET", "/slot-state?id=wf&time=" + slot.FormatTime(fifoSlot)},
	} {
		r, err := http.NewRequest(req.method, base+req.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Origin", base)
		resp, err := client.Do(r)
		if err != nil {
			// A timeout here is the hang; the server cannot be stopped
			// cleanly then (its step holds the database).
			panic(fmt.Sprintf("%s %s: %v", req.method, req.path, err))
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("%s %s: %s", req.method, req.path, resp.Status)
		// The FIFO slot itself is an unreadable record: /slot-state
		// answers 500 for it, as for any corrupt slot file.
		if resp.StatusCode >= 500 && !strings.HasPrefix(req.path, "/slot-state") {
			t.Errorf("%s %s: %s %s", req.method, req.path, resp.Status, body)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
}
