package engine

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/schema/workflow"
)

// TestUndeployedRunningSlotKeepsItsPoolPlaceAcrossInstances: two
// instances on one PostgreSQL database, pool "etl" of limit 1, a owned
// by instance A and b by B. a's slot runs when a is undeployed. The job
// still runs on the cluster: B holds b's slot, and so does a new
// instance that replaces B and never loaded a (it reads the departure
// the others recorded in the database). A polls a's job until it ends
// and records SUCCESS; then b runs. At no submission does the service
// see more than one job of the pool running.
func TestUndeployedRunningSlotKeepsItsPoolPlaceAcrossInstances(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.CreateDB(t)
	ctx := context.Background()
	owner := map[string]int{"a": 0, "b": 1}
	wdir, poolsFile := poolOfTwo(t)
	start := ts("2026-11-24T09:00:00.000Z")
	counter, err := statepg.Open(ctx, dsn, statepg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { counter.Close() })
	occupied := func() (int, error) {
		ids, err := counter.PoolOccupied([]string{"a", "b"})
		return len(ids), err
	}
	svc := &poolService{limit: 1, occupied: occupied, live: make(map[string]slot.ID), done: make(map[string]bool)}
	type inst struct {
		db *statepg.DB
		e  *Engine
	}
	open := func(i int) *inst {
		db, err := statepg.Open(ctx, dsn, statepg.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		e, err := New(Options{WorkflowsDir: wdir, Store: db, Logger: discard, PoolsFile: poolsFile,
			Owns:     func(wf string) bool { return owner[wf] == i },
			Services: map[string]external.Service{workflow.ServiceCommand: svc}})
		if err != nil {
			t.Fatal(err)
		}
		return &inst{db: db, e: e}
	}
	a, b := open(0), open(1)
	now := ts("2026-11-24T09:30:00.000Z")
	step := func(in *inst) {
		t.Helper()
		if _, err := in.db.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Minute)
		if err := in.e.Step(ctx, now, nil); err != nil {
			t.Fatal(err)
		}
	}
	status := func(wf string) slot.Status {
		t.Helper()
		if _, err := counter.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		st, _, err := counter.Get(slot.ID{Workflow: wf, Time: start})
		if err != nil {
			t.Fatal(err)
		}
		return st.Status
	}
	step(a) // WAITING → READY
	step(b)
	step(a) // a's slot submitted: the pool is full
	step(b) // b's held
	if sa, sb := status("a"), status("b"); sa != slot.Running || sb != slot.Ready {
		t.Fatalf("a %s, b %s; want RUNNING, READY", sa, sb)
	}
	w := fixture.Hourly("b")
	w.StartTime, w.Pool = start, "etl"
	fixture.WriteProject(t, wdir, "p", w) // a undeployed
	step(a)
	step(b)
	if got := status("b"); got != slot.Ready {
		t.Fatalf("b's slot is %s while undeployed a's job runs, want READY (pool limit 1)", got)
	}
	b = open(1) // B restarted: it never loaded a
	step(b)
	if got := status("b"); got != slot.Ready {
		t.Fatalf("b's slot is %s at a new instance's step while undeployed a's job runs, want READY", got)
	}
	for i, in := range []*inst{a, b} {
		// Every instance offers the cluster the same workflows to lease:
		// a's drain writes its state under a's lease.
		if d := cmp.Diff([]string{"a", "b"}, in.e.LeasedIDs()); d != "" {
			t.Errorf("instance %d: the workflows to lease (-want +got):\n%s", i, d)
		}
	}
	svc.finishSome(rand.New(rand.NewPCG(1, 2))) // a's job ends (the only one)
	step(a)                                     // A polls and records it
	if got := status("a"); got != slot.Success {
		t.Fatalf("undeployed a's slot is %s after its job ended, want SUCCESS", got)
	}
	step(b)
	if got := status("b"); got != slot.Running {
		t.Fatalf("b's slot is %s once a's job ended, want RUNNING", got)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	for _, v := range svc.violations {
		t.Error(v)
	}
}
