package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/schema/workflow"
)

// losingStore is a store whose instance loses its ownership of every
// workflow at a chosen write (as when a lease is taken over mid-step).
type losingStore struct {
	*statedb.DB
	owned        atomic.Bool
	loseAtIntent bool // ownership ends once the intents are written
	refuseStates bool // PutStates refuses every state and ownership ends
}

func (s *losingStore) PutIntents(ins map[slot.ID]store.Intent) map[slot.ID]error {
	failed := s.DB.PutIntents(ins)
	if s.loseAtIntent {
		s.owned.Store(false)
	}
	return failed
}

func (s *losingStore) PutStates(sts []slot.State) map[slot.ID]error {
	if !s.refuseStates {
		return s.DB.PutStates(sts)
	}
	s.owned.Store(false)
	out := make(map[slot.ID]error)
	for _, st := range sts {
		out[st.ID] = errors.New("fenced: lease taken over")
	}
	return out
}

func ownsEngine(t *testing.T, wdir string, db Store, svc external.Service, owns func(string) bool) *Engine {
	t.Helper()
	e, err := New(Options{WorkflowsDir: wdir, Store: db, Logger: discard, Owns: owns,
		Services: map[string]external.Service{workflow.ServiceCommand: svc}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func openDB(t *testing.T, dir string) *statedb.DB {
	t.Helper()
	db, err := statedb.OpenWith(dir, statedb.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestOwnsFiltersWorkflows: an engine steps only the workflows it owns;
// the others are left to their instance.
func TestOwnsFiltersWorkflows(t *testing.T) {
	wdir := t.TempDir()
	a, b := fixture.Hourly("a"), fixture.Hourly("b")
	a.StartTime, b.StartTime = ts("2026-01-01T10:00:00.000Z"), ts("2026-01-01T10:00:00.000Z")
	fixture.WriteProject(t, wdir, "p", a, b)
	db := openDB(t, t.TempDir())
	svc := newFake()
	e := ownsEngine(t, wdir, db, svc, func(wf string) bool { return wf == "a" })
	now := ts("2026-01-01T11:30:00.000Z")
	for range 2 { // READY, then submitted
		if err := e.Step(context.Background(), now, nil); err != nil {
			t.Fatal(err)
		}
	}
	want := []slot.ID{{Workflow: "a", Time: ts("2026-01-01T10:00:00.000Z")}}
	if d := cmp.Diff(want, svc.submitted()); d != "" {
		t.Fatalf("submissions (-want +got):\n%s", d)
	}
	if _, found, _ := db.Get(slot.ID{Workflow: "b", Time: ts("2026-01-01T10:00:00.000Z")}); found {
		t.Fatal("the engine wrote a slot of b, which it does not own")
	}
	if rep := e.LastStep(); rep.Workflows != 1 {
		t.Fatalf("stepped %d workflows, want 1", rep.Workflows)
	}
}

// TestOwnershipLostBeforeSubmit: the instance loses the workflow between
// writing the submit intent and calling the service: it submits nothing,
// the intent stays, the step is not a failure; the new owner recovers the
// intent and the slot is submitted exactly once in all.
func TestOwnershipLostBeforeSubmit(t *testing.T) {
	wdir, ddir := t.TempDir(), t.TempDir()
	w := fixture.Hourly("wf")
	w.StartTime = ts("2026-01-01T10:00:00.000Z")
	fixture.WriteProject(t, wdir, "p", w)
	db := &losingStore{DB: openDB(t, ddir), loseAtIntent: true}
	db.owned.Store(true)
	svc := recoverer{newFake()}
	old := ownsEngine(t, wdir, db, svc, func(string) bool { return db.owned.Load() })
	now := ts("2026-01-01T10:30:00.000Z")
	if err := old.Step(context.Background(), now, nil); err != nil { // READY
		t.Fatal(err)
	}
	if err := old.Step(context.Background(), now, nil); err != nil {
		t.Fatalf("a step that lost its workflow is not a failure: %v", err)
	}
	if n := len(svc.submitted()); n != 0 {
		t.Fatalf("submitted %d jobs after losing the workflow", n)
	}
	rep := old.LastStep()
	if rep.Fenced != 1 || rep.Errors["persist"] != 0 || rep.Transitions[slot.Running] != 0 {
		t.Fatalf("report: fenced %d, persist errors %d, submissions %d; want 1, 0, 0", rep.Fenced, rep.Errors["persist"], rep.Transitions[slot.Running])
	}
	id := slot.ID{Workflow: "wf", Time: ts("2026-01-01T10:00:00.000Z")}
	if _, left, err := db.GetIntent(id); err != nil || !left {
		t.Fatalf("the submit intent is not left for the new owner: %v %v", left, err)
	}
	// The new owner (same database) resolves the intent: no job was made,
	// so it submits once.
	taker := ownsEngine(t, wdir, db.DB, svc, func(string) bool { return true })
	if err := taker.Step(context.Background(), now.Add(time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	if got := svc.submitted(); len(got) != 1 {
		t.Fatalf("submissions after the take-over: %v, want one", got)
	}
	if st, _, _ := db.Get(id); st.Status != slot.Running {
		t.Fatalf("slot %s after the take-over, want RUNNING", st.Status)
	}
}

// TestFencedWriteIsNotAPersistFailure: the store refuses a step's write
// because the instance lost the workflow: the step reports the changes
// as fenced, not as a failed write (POST /scheduler does not answer 500),
// while the same refusal for an owned workflow is ErrPersist.
func TestFencedWriteIsNotAPersistFailure(t *testing.T) {
	for _, lose := range []bool{true, false} {
		wdir := t.TempDir()
		w := fixture.Hourly("wf")
		w.StartTime = ts("2026-01-01T10:00:00.000Z")
		fixture.WriteProject(t, wdir, "p", w)
		db := &losingStore{DB: openDB(t, t.TempDir()), refuseStates: true}
		db.owned.Store(true)
		e := ownsEngine(t, wdir, db, newFake(), func(string) bool { return !lose || db.owned.Load() })
		err := e.Step(context.Background(), ts("2026-01-01T10:30:00.000Z"), nil)
		rep := e.LastStep()
		if lose {
			if err != nil || rep.Fenced == 0 || rep.Errors["persist"] != 0 {
				t.Fatalf("lost the workflow: step error %v, fenced %d, persist errors %d; want nil, >0, 0", err, rep.Fenced, rep.Errors["persist"])
			}
		} else if !errors.Is(err, ErrPersist) || rep.Fenced != 0 {
			t.Fatalf("still owns the workflow: step error %v, fenced %d; want ErrPersist, 0", err, rep.Fenced)
		}
	}
}

// flakyRecoverer is a recoverer whose Recover fails while down is set.
type flakyRecoverer struct {
	recoverer
	down atomic.Bool
}

func (f *flakyRecoverer) Recover(ctx context.Context, w *workflow.Workflow, id slot.ID, since time.Time) (string, bool, error) {
	if f.down.Load() {
		return "", false, fmt.Errorf("%w: Oozie unreachable", external.ErrUnavailable)
	}
	return f.recoverer.Recover(ctx, w, id, since)
}

// TestUnresolvedIntentHoldsNewSubmissions: a workflow taken over (or
// restarted) with a submit intent the service cannot resolve yet gets no
// new submission until it is resolved: the job the intent may stand for
// would not count against the workflow's concurrency.
func TestUnresolvedIntentHoldsNewSubmissions(t *testing.T) {
	wdir := t.TempDir()
	w := fixture.Hourly("wf")
	w.StartTime = ts("2026-01-01T10:00:00.000Z")
	w.SchedulingStrategy.Concurrency = 2
	fixture.WriteProject(t, wdir, "p", w)
	db := openDB(t, t.TempDir())
	svc := &flakyRecoverer{recoverer: recoverer{newFake()}}
	e := ownsEngine(t, wdir, db, svc, nil)
	now := ts("2026-01-01T11:30:00.000Z")
	if err := e.Step(context.Background(), now, nil); err != nil { // both READY
		t.Fatal(err)
	}
	// The previous owner wrote the 10:00 slot's intent and died.
	first := slot.ID{Workflow: "wf", Time: ts("2026-01-01T10:00:00.000Z")}
	if failed := db.PutIntents(map[slot.ID]store.Intent{first: {Time: now}}); len(failed) > 0 {
		t.Fatal(failed)
	}
	svc.down.Store(true)
	if err := e.Step(context.Background(), now, nil); err != nil {
		t.Fatal(err)
	}
	if got := svc.submitted(); len(got) != 0 {
		t.Fatalf("submitted %v while the 10:00 intent was unresolved", got)
	}
	svc.down.Store(false)
	if err := e.Step(context.Background(), now, nil); err != nil {
		t.Fatal(err)
	}
	want := []slot.ID{first, {Workflow: "wf", Time: ts("2026-01-01T11:00:00.000Z")}}
	if d := cmp.Diff(want, svc.submitted()); d != "" {
		t.Fatalf("submissions once resolved (-want +got):\n%s", d)
	}
}

// TestRunsRecordForgottenWithOwnership: an instance that gives a workflow
// up and takes it back later reads the workflow's submissions again from
// the stored slots (as a new owner does), rather than keeping its own
// record, which lacks those the other instance made meanwhile.
func TestRunsRecordForgottenWithOwnership(t *testing.T) {
	wdir := t.TempDir()
	w := fixture.Hourly("m")
	w.StartTime = ts("2026-01-01T08:00:00.000Z")
	w.Constraints = &workflow.Constraints{MaxRuns: &workflow.MaxRuns{Count: 2, PeriodSeconds: 86400},
		TimeoutSeconds: workflow.NeverTimeout, OnTimeout: workflow.OnTimeoutGiveUp}
	fixture.WriteProject(t, wdir, "p", w)
	db := openDB(t, t.TempDir())
	svc := newFake()
	var mine atomic.Bool
	mine.Store(true)
	e := ownsEngine(t, wdir, db, svc, func(string) bool { return mine.Load() })
	step := func(at string) {
		t.Helper()
		if err := e.Step(context.Background(), ts(at), nil); err != nil {
			t.Fatal(err)
		}
	}
	step("2026-01-01T10:30:00.000Z") // 08:00, 09:00, 10:00 READY
	step("2026-01-01T10:31:00.000Z") // 08:00 submitted: one run of two
	svc.finishAll(true)
	step("2026-01-01T10:32:00.000Z") // 08:00 SUCCESS
	// Another instance owns the workflow for a while and runs 09:00.
	mine.Store(false)
	step("2026-01-01T10:33:00.000Z")
	if err := db.Put(slot.State{ID: slot.ID{Workflow: "m", Time: ts("2026-01-01T09:00:00.000Z")}, Status: slot.Success, ExternalID: "job-at-b"}); err != nil {
		t.Fatal(err)
	}
	mine.Store(true)
	step("2026-01-01T10:34:00.000Z")
	ten := slot.ID{Workflow: "m", Time: ts("2026-01-01T10:00:00.000Z")}
	if st, _, _ := db.Get(ten); st.Status != slot.Ready {
		t.Fatalf("10:00 is %s after two runs in 24 hours (one by each instance), want READY, held by maxRuns 2", st.Status)
	}
	if p := problemsOf(e, "m", opConstraint); len(p) != 1 || !strings.Contains(p[0].Error, "maxRuns 2 per 24h") {
		t.Fatalf("problems %+v, want the maxRuns hold", e.Problems("m"))
	}
}
