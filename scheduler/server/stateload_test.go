package server

import (
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/schema/workflow"
)

// TestRunReadsStateAtStart: a server on the file store starts reading
// every workflow's state at start-up, before any step (here there is
// none: no --autoSchedule, no POST /scheduler) and any request, so that
// the UI's counts fill in while it answers (docs/ui.md).
func TestRunReadsStateAtStart(t *testing.T) {
	dir := t.TempDir()
	wdir, dbDir := filepath.Join(dir, "workflows"), filepath.Join(dir, "db")
	start := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	var wfs []workflow.Workflow
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		w := fixture.Hourly(id)
		w.ExternalService = fixture.Command("true")
		w.StartTime = start
		wfs = append(wfs, w)
	}
	fixture.WriteProject(t, wdir, "p", wfs...)
	db, err := statedb.Open(dbDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if err := db.Put(slot.State{ID: slot.ID{Workflow: id, Time: start}, Status: slot.Success}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	cfg := Config{Workflows: wdir, DB: dbDir, URLFile: filepath.Join(dir, "url"), Stderr: io.Discard, Version: "test"}
	stores := make(chan *statedb.DB, 1)
	startRun(t, cfg, func(cfg Config, d deps) (scheduler.Service, io.Closer, error) {
		svc, closer, err := openEngine(cfg, d)
		if db, ok := closer.(*statedb.DB); ok {
			stores <- db
		}
		return svc, closer, err
	})
	var store *statedb.DB
	select {
	case store = <-stores:
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not open a file store")
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		left := 0
		for _, id := range ids {
			if !store.Loaded(id) {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d workflows' state not read 30 s after the start without a step: no background load at start-up", left, len(ids))
		}
	}
}
