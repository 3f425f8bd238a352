package statedb_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/schema"
)

// hourlyWorkflow is an hourly workflow with the given trigger that runs
// `true` through the command service.
func hourlyWorkflow(id string, trig schema.Trigger) schema.Workflow {
	return schema.Workflow{
		ID:                 id,
		Schedule:           schema.Schedule{Type: schema.ScheduleCron, Cron: "0 0 * * * ?", TimeZone: "UTC"},
		Trigger:            trig,
		SchedulingStrategy: schema.Strategy{Type: schema.StrategySerial, Concurrency: 1},
		ExternalService:    schema.ExternalService{Type: schema.ServiceCommand, Command: []string{"true"}},
		StartTime:          schema.DefaultStartTime,
		WaitTimeoutSeconds: schema.NeverTimeout,
	}
}

func writeWorkflows(t *testing.T, dir string, ws ...schema.Workflow) {
	t.Helper()
	p := &schema.Project{Format: schema.FormatVersion, Project: "p", Workflows: ws}
	data, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestStepAndReadsFinishWithAFIFOSlotFile: a FIFO as a slot file in the
// window neither hangs a step nor the reads of the API (slots, counts):
// that slot is reported, the others are stepped.
func TestStepAndReadsFinishWithAFIFOSlotFile(t *testing.T) {
	wfDir, dbDir := t.TempDir(), t.TempDir()
	writeWorkflows(t, wfDir, hourlyWorkflow("wf", schema.Trigger{Type: schema.TriggerNot, Trigger: &schema.Trigger{Type: schema.TriggerAlways}}))
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
	eng, err := engine.New(engine.Options{WorkflowsDir: wfDir, DB: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
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
