package engine

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/schema/workflow"
)

// TestMinIntervalAcrossATakeOver: two instances on one PostgreSQL
// database. A submits slot 00:00 at 03:00:30 (its data came late); B takes
// the workflow over at 03:30 and counts that submission at 03:00:30, not
// at the slot time: nothing runs before 07:00:30 (the slot-time count let
// 01:00 run at 04:30, with 00:00 outside the 4-hour look-back). When A
// takes the workflow back, it counts B's submission too.
func TestMinIntervalAcrossATakeOver(t *testing.T) {
	srv := pgtest.StartT(t, pgtest.Options{})
	if err := srv.Exec(context.Background(), "postgres", "CREATE DATABASE takeover"); err != nil {
		t.Fatal(err)
	}
	wdir := t.TempDir()
	w := spacedWorkflow("spaced")
	fixture.WriteProject(t, wdir, "p", w)
	var owner atomic.Value
	owner.Store("A")
	a := startPGInstance(t, srv.DSN("takeover"), wdir, "A", &owner)
	b := startPGInstance(t, srv.DSN("takeover"), wdir, "B", &owner)
	a.step(t, ts("2026-11-24T03:00Z"))    // 00:00, 01:00, 02:00 READY
	a.step(t, ts("2026-11-24T03:00:30Z")) // 00:00 submitted
	a.svc.finishAll(true)
	a.step(t, ts("2026-11-24T03:10Z")) // 00:00 SUCCESS
	if got := submittedTimes(a.svc); strings.Join(got, ",") != "24 00:00" {
		t.Fatalf("A submitted %v, want 00:00", got)
	}

	owner.Store("B")
	b.step(t, ts("2026-11-24T03:30Z"))
	b.step(t, ts("2026-11-24T04:30Z"))
	b.step(t, ts("2026-11-24T07:00:29Z"))
	if got := submittedTimes(b.svc); len(got) != 0 {
		t.Fatalf("after the take-over B submitted %v within 4h of A's submission at 03:00:30", got)
	}
	wantConstraintHold(t, b.e, "spaced", "the last submission was at 2026-11-24T03:00:30.000Z")
	b.step(t, ts("2026-11-24T07:00:30Z"))
	if got := submittedTimes(b.svc); strings.Join(got, ",") != "24 01:00" {
		t.Fatalf("B submitted %v once minInterval passed, want 01:00", got)
	}
	b.svc.finishAll(true)
	b.step(t, ts("2026-11-24T07:10Z")) // 01:00 SUCCESS
	a.step(t, ts("2026-11-24T07:10Z")) // A steps too, not owning it

	// Back to A, which had counted only its own submission.
	owner.Store("A")
	a.step(t, ts("2026-11-24T11:00Z"))
	if got := submittedTimes(a.svc); len(got) != 1 {
		t.Fatalf("A, back in charge, submitted %v within 4h of B's submission at 07:00:30", got)
	}
	a.step(t, ts("2026-11-24T11:00:30Z"))
	if got := submittedTimes(a.svc); strings.Join(got, ",") != "24 00:00,24 02:00" {
		t.Fatalf("A submitted %v, want 02:00 at 11:00:30", got)
	}
}

// countingRuns counts the reads of records of submissions a PostgreSQL
// store answers: one workflow's (Runs) and many workflows' (RunsOf).
type countingRuns struct {
	*statepg.DB
	one, many atomic.Int32
}

func (c *countingRuns) Runs(wf string) ([]store.Run, error) {
	c.one.Add(1)
	return c.DB.Runs(wf)
}

func (c *countingRuns) RunsOf(wfs []string) (map[string][]store.Run, error) {
	c.many.Add(1)
	return c.DB.RunsOf(wfs)
}

// TestTakeOverReadsTheRecordsInOneQuery: an instance that takes over
// several workflows with run constraints reads their records of
// submissions in one query in its first step (RunsOf), not one per
// workflow, and counts each workflow's submissions as the previous owner
// recorded them; a constrained workflow that never ran (no record) runs.
func TestTakeOverReadsTheRecordsInOneQuery(t *testing.T) {
	srv := pgtest.StartT(t, pgtest.Options{})
	dsn := srv.CreateDB(t)
	wdir := t.TempDir()
	var ws []workflow.Workflow
	for _, id := range []string{"x", "y", "z"} {
		w := spacedWorkflow(id)
		ws = append(ws, w)
	}
	fresh := fixture.Hourly("fresh") // no submission before the take-over
	fresh.StartTime = ts("2026-11-24T04:00Z")
	fresh.Constraints = minInterval4h()
	ws = append(ws, fresh)
	fixture.WriteProject(t, wdir, "p", ws...)
	var owner atomic.Value
	owner.Store("A")
	a := startPGInstance(t, dsn, wdir, "A", &owner)
	a.step(t, ts("2026-11-24T03:00Z"))
	a.step(t, ts("2026-11-24T03:00:30Z")) // x, y, z 00:00 submitted
	a.svc.finishAll(true)
	a.step(t, ts("2026-11-24T03:10Z"))
	if got := len(a.svc.submitted()); got != 3 {
		t.Fatalf("A submitted %d jobs, want 3 (00:00 of x, y and z)", got)
	}

	pg, err := statepg.Open(context.Background(), dsn, statepg.Options{Fence: ownerFence{"B", &owner}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Close() })
	counted := &countingRuns{DB: pg}
	svc := newFake()
	b := &pgInstance{db: pg, svc: svc,
		e: ownsEngine(t, wdir, counted, svc, func(string) bool { return owner.Load().(string) == "B" })}
	owner.Store("B")
	b.step(t, ts("2026-11-24T04:30Z"))
	if one, many := counted.one.Load(), counted.many.Load(); one != 0 || many != 1 {
		t.Errorf("the take-over step read the records with %d Runs and %d RunsOf, want 0 and 1", one, many)
	}
	for _, id := range []string{"x", "y", "z"} {
		wantConstraintHold(t, b.e, id, "the last submission was at 2026-11-24T03:00:30.000Z")
	}
	b.step(t, ts("2026-11-24T04:40Z"))
	if got := submittedTimes(svc); strings.Join(got, ",") != "24 04:00" {
		t.Errorf("B submitted %v by 04:40, want only fresh's 04:00 (x, y and z ran at 03:00:30)", got)
	}
	if one, many := counted.one.Load(), counted.many.Load(); one != 0 || many != 1 {
		t.Errorf("after the take-over step, %d Runs and %d RunsOf, want no more reads", one, many-1)
	}
}
