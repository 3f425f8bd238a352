package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/schema/workflow"
)

// heldLoader is a statedb that reads every workflow's state in the
// background at once except hold, which it reads when release is closed.
type heldLoader struct {
	*statedb.DB
	hold    string
	release chan struct{}
	once    sync.Once
	done    chan struct{}
}

func (h *heldLoader) LoadInBackground(wfs []string, workers int) <-chan struct{} {
	h.once.Do(func() {
		h.done = make(chan struct{})
		go func() {
			defer close(h.done)
			var others []string
			for _, wf := range wfs {
				if wf != h.hold {
					others = append(others, wf)
				}
			}
			h.DB.Preload(others, workers)
			<-h.release
			h.DB.Preload([]string{h.hold}, 1)
		}()
	})
	return h.done
}

// TestStepStepsWorkflowsWhoseStateIsRead: after a restart, a step does not
// wait for the state of every workflow: it steps those read within
// loadWait, reports the others as loading, and a later step steps them
// once read. A step of named workflows waits for them.
func TestStepStepsWorkflowsWhoseStateIsRead(t *testing.T) {
	defer func(w time.Duration) { loadWait = w }(loadWait)
	loadWait = 50 * time.Millisecond
	wdir, ddir := t.TempDir(), t.TempDir()
	a, b := fixture.Hourly("a"), fixture.Hourly("b")
	a.StartTime, b.StartTime = ts("2024-01-01T00:00Z"), ts("2024-01-01T00:00Z")
	fixture.WriteProject(t, wdir, "p", a, b)
	db, err := statedb.OpenWith(ddir, statedb.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	h := &heldLoader{DB: db, hold: "b", release: make(chan struct{})}
	svc := newFake()
	e, err := New(Options{WorkflowsDir: wdir, Store: h, Services: map[string]external.Service{workflow.ServiceCommand: svc}, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	slot0 := ts("2024-01-01T00:00Z")
	get := func(wf string) (slot.State, bool) {
		t.Helper()
		st, found, err := db.Get(slot.ID{Workflow: wf, Time: slot0})
		if err != nil {
			t.Fatal(err)
		}
		return st, found
	}
	if err := e.Step(context.Background(), ts("2024-01-01T00:30Z"), nil); err != nil {
		t.Fatal(err)
	}
	if rep := e.LastStep(); rep.Loading != 1 || rep.Workflows != 1 {
		t.Fatalf("first step: %d workflows stepped, %d loading; want 1 and 1", rep.Workflows, rep.Loading)
	}
	if st, found := get("a"); !found || st.Status != slot.Ready {
		t.Fatalf("a's slot after the first step: %+v (found %v), want READY", st, found)
	}
	if _, found := get("b"); found {
		t.Fatal("b was stepped before its state was read")
	}
	// A step that names b waits for it.
	if err := e.Step(context.Background(), ts("2024-01-01T00:30Z"), []string{"b"}); err != nil {
		t.Fatal(err)
	}
	if st, found := get("b"); !found || st.Status != slot.Ready {
		t.Fatalf("b's slot after a step naming it: %+v (found %v), want READY", st, found)
	}
	close(h.release)
	<-h.done
	if err := e.Step(context.Background(), ts("2024-01-01T00:30Z"), nil); err != nil {
		t.Fatal(err)
	}
	if rep := e.LastStep(); rep.Loading != 0 || rep.Workflows != 2 {
		t.Fatalf("step after the load: %d workflows stepped, %d loading; want 2 and 0", rep.Workflows, rep.Loading)
	}
}
