package engine

import (
	"context"
	"sort"
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

// TestDepartureRecordsOfTwoInstancesMerge: two instances on one
// PostgreSQL database note the departure of workflow a from pool etl at
// the same moment, each with the running slots its own view holds (A's
// view, refreshed before the owner submitted 09:00, has 08:00 only; B's
// has both), A's write last. Every instance — a third that starts then
// included — counts both slots in etl and polls both. (Before, the
// departure had one record per workflow and pool, which the later write
// replaced: 09:00 was lost, counted nowhere and never polled.)
func TestDepartureRecordsOfTwoInstancesMerge(t *testing.T) {
	dsn := pgtest.Shared(t).CreateDB(t)
	ctx := context.Background()
	wdir := t.TempDir()
	fixture.WriteProject(t, wdir, "p") // a no longer deployed
	open := func() *Engine {
		db, err := statepg.Open(ctx, dsn, statepg.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		e, err := New(Options{WorkflowsDir: wdir, Store: db, Logger: discard, Owns: func(string) bool { return true },
			Services: map[string]external.Service{workflow.ServiceCommand: newFake()}})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	a, b := open(), open()
	t8, t9 := ts("2026-11-24T08:00Z"), ts("2026-11-24T09:00Z")
	for _, t0 := range []string{"2026-11-24T08:00Z", "2026-11-24T09:00Z"} {
		if err := a.db.Put(slot.State{ID: slot.ID{Workflow: "a", Time: ts(t0)}, Status: slot.Running, ExternalID: "job-" + t0}); err != nil {
			t.Fatal(err)
		}
	}
	w := pooledHourly("a", "etl")
	b.stepMu.Lock()
	b.addDeparture(departure{Workflow: &w, Pool: "etl", Slots: []time.Time{t8, t9}}, true)
	b.stepMu.Unlock()
	a.stepMu.Lock()
	a.addDeparture(departure{Workflow: &w, Pool: "etl", Slots: []time.Time{t8}}, true) // (its stale view)
	a.stepMu.Unlock()
	want := map[string][]slot.ID{"etl": {{Workflow: "a", Time: t8}, {Workflow: "a", Time: t9}}}
	for name, e := range map[string]*Engine{"A": a, "B": b, "a new instance": open()} {
		if err := e.Step(ctx, ts("2026-11-24T09:30Z"), nil); err != nil {
			t.Fatal(err)
		}
		e.stepMu.Lock()
		got := e.departedInPools(func(string) bool { return true })
		e.stepMu.Unlock()
		for _, ids := range got {
			sort.Slice(ids, func(i, j int) bool { return ids[i].Time.Before(ids[j].Time) })
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: departed slots counted in the pools (-want +got):\n%s", name, d)
		}
	}
	// Both jobs end: the departure ends, and every record of it goes
	// (A read B's).
	for _, t0 := range []time.Time{t8, t9} {
		if err := a.db.Put(slot.State{ID: slot.ID{Workflow: "a", Time: t0}, Status: slot.Success}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Step(ctx, ts("2026-11-24T09:31Z"), nil); err != nil {
		t.Fatal(err)
	}
	if keys, err := a.regs.RegisterKeys(departedBucket, ""); err != nil || len(keys) != 0 {
		t.Errorf("departure records once its slots ended: %q (%v), want none", keys, err)
	}
}
