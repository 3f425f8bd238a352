package engine

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/schema/workflow"
)

// countedDB is an instance's PostgreSQL store that counts the reads of
// the database's pool occupancy (PoolOccupied); every other method is the
// store's own.
type countedDB struct {
	*statepg.DB
	n *atomic.Int32
}

func (d countedDB) PoolOccupied(wfs []string) ([]slot.ID, error) {
	d.n.Add(1)
	return d.DB.PoolOccupied(wfs)
}

// poolOfTwo writes a project of hourly workflows a and b, both in pool
// "etl", from 2026-11-24T09:00Z, and a pools file giving "etl" a limit of
// 1; it returns the workflows directory and the pools file.
func poolOfTwo(t *testing.T) (wdir, poolsFile string) {
	t.Helper()
	wdir = t.TempDir()
	var ws []workflow.Workflow
	for _, id := range []string{"a", "b"} {
		w := fixture.Hourly(id)
		w.StartTime, w.Pool = ts("2026-11-24T09:00:00.000Z"), "etl"
		ws = append(ws, w)
	}
	fixture.WriteProject(t, wdir, "p", ws...)
	poolsFile = filepath.Join(t.TempDir(), "pools.json")
	if err := os.WriteFile(poolsFile, []byte(`{"pools": {"etl": {"limit": 1}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return wdir, poolsFile
}

// TestPoolPlaceFreedAcrossInstances: two instances on one PostgreSQL
// database, pool "etl" of limit 1, workflow a owned by instance A and b
// by instance B, each with one READY slot. A's job runs; B's slot is held
// (the pool is full). A's job ends and A records it at its next step.
// B's next step submits b's slot — without waiting for B's store to
// refresh its view of a (a clustered server refreshes every lease/3,
// which is when the place was taken before). The engine asks the
// database only when its own view would hold a slot of a pool that has
// workflows of other instances: steps where nothing waits ask nothing.
func TestPoolPlaceFreedAcrossInstances(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.CreateDB(t)
	ctx := context.Background()
	owner := map[string]int{"a": 0, "b": 1}
	wdir, poolsFile := poolOfTwo(t)
	start := ts("2026-11-24T09:00:00.000Z") // the slot of a and b that runs
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
		db    *statepg.DB
		e     *Engine
		asked atomic.Int32
	}
	ins := make([]*inst, 2)
	for i := range ins {
		db, err := statepg.Open(ctx, dsn, statepg.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		in := &inst{db: db}
		in.e, err = New(Options{WorkflowsDir: wdir, Store: countedDB{db, &in.asked}, Logger: discard, PoolsFile: poolsFile,
			Owns:     func(wf string) bool { return owner[wf] == i },
			Services: map[string]external.Service{workflow.ServiceCommand: svc}})
		if err != nil {
			t.Fatal(err)
		}
		ins[i] = in
	}
	a, b := ins[0], ins[1]
	now := ts("2026-11-24T09:30:00.000Z")
	step := func(in *inst, refresh bool) {
		t.Helper()
		if refresh {
			if _, err := in.db.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
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

	step(a, true) // WAITING → READY
	step(b, true)
	step(a, true) // a's slot submitted: the pool is full
	if got := status("a"); got != slot.Running {
		t.Fatalf("a's slot is %s, want RUNNING", got)
	}
	step(b, true) // b's slot held: its view and the database agree
	if got := status("b"); got != slot.Ready {
		t.Fatalf("b's slot is %s while a's runs, want READY (pool limit 1)", got)
	}
	if p := problemsOf(b.e, "b", opPool); len(p) == 0 || !strings.Contains(p[0].Error, `pool "etl" is full`) {
		t.Errorf("b's held slot: problems %+v, want one of op pool", b.e.Problems("b"))
	}
	svc.finishSome(rand.New(rand.NewPCG(1, 2))) // a's job ends (the only one)
	step(a, false)                              // a records it
	if got := status("a"); got != slot.Success {
		t.Fatalf("a's slot is %s after its job ended, want SUCCESS", got)
	}
	if n := a.asked.Load(); n != 0 {
		t.Errorf("instance A asked the database for the pool's occupancy %d times; nothing of A's waited", n)
	}
	askedBefore := b.asked.Load()
	step(b, false) // B's store has not refreshed since a ran
	if got := status("b"); got != slot.Running {
		t.Errorf("b's slot is %s at B's first step after a's end was recorded, want RUNNING (the place is free)", got)
	}
	if n := b.asked.Load() - askedBefore; n != 1 {
		t.Errorf("B's step asked the database %d times for the pool's occupancy, want 1 (its view held b's slot)", n)
	}
	if p := problemsOf(b.e, "b", opPool); len(p) != 0 {
		t.Errorf("b's slot runs but keeps its pool problem: %+v", p)
	}
	askedBefore = b.asked.Load()
	step(b, false) // nothing waits any more
	if n := b.asked.Load() - askedBefore; n != 0 {
		t.Errorf("a step with nothing waiting asked the database %d times", n)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	for _, v := range svc.violations {
		t.Error(v)
	}
}

// TestPoolHeldOneInstanceAsksNothing: one instance on PostgreSQL (no
// Owns: its view is the database's) holds a pool's slot without asking
// the database for the pool's occupancy.
func TestPoolHeldOneInstanceAsksNothing(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.CreateDB(t)
	ctx := context.Background()
	wdir, poolsFile := poolOfTwo(t)
	db, err := statepg.Open(ctx, dsn, statepg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var asked atomic.Int32
	svc := &poolService{limit: 1, occupied: func() (int, error) { return 0, nil }, live: make(map[string]slot.ID), done: make(map[string]bool)}
	e, err := New(Options{WorkflowsDir: wdir, Store: countedDB{db, &asked}, Logger: discard, PoolsFile: poolsFile,
		Services: map[string]external.Service{workflow.ServiceCommand: svc}})
	if err != nil {
		t.Fatal(err)
	}
	now := ts("2026-11-24T09:30:00.000Z")
	for range 3 {
		now = now.Add(time.Minute)
		if err := e.Step(ctx, now, nil); err != nil {
			t.Fatal(err)
		}
	}
	if held := len(problemsOf(e, "a", opPool)) + len(problemsOf(e, "b", opPool)); held != 1 || svc.liveJobs() != 1 {
		t.Fatalf("%d slots held, %d jobs running; want 1 and 1", held, svc.liveJobs())
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("one instance asked the database for the pool's occupancy %d times", n)
	}
}
