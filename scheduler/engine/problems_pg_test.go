package engine

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jackc/pgx/v5"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/statepg"
)

// ownerFence lets instance id write only while it is the owner (a lease
// of the whole database, for tests).
type ownerFence struct {
	id    string
	owner *atomic.Value
}

func (f ownerFence) Check(ctx context.Context, tx pgx.Tx, wfs []string) error {
	if f.owner.Load().(string) != f.id {
		return statepg.ErrFenced
	}
	return nil
}

// pgInstance is an engine with its own PostgreSQL store, one of several
// instances on one database.
type pgInstance struct {
	db  *statepg.DB
	e   *Engine
	svc *fakeService
}

func startPGInstance(t *testing.T, dsn, wdir, id string, owner *atomic.Value) *pgInstance {
	t.Helper()
	db, err := statepg.Open(context.Background(), dsn, statepg.Options{Fence: ownerFence{id, owner}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	svc := newFake()
	e := ownsEngine(t, wdir, db, svc, func(string) bool { return owner.Load().(string) == id })
	return &pgInstance{db: db, e: e, svc: svc}
}

// step refreshes the instance's store (as a clustered server does before
// every step) and steps.
func (in *pgInstance) step(t *testing.T, now time.Time) {
	t.Helper()
	in.refresh(t)
	if err := in.e.Step(context.Background(), now, nil); err != nil {
		t.Fatal(err)
	}
}

// refresh is the store's Refresh of a clustered server (every lease/3).
func (in *pgInstance) refresh(t *testing.T) {
	t.Helper()
	if _, err := in.db.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// ignoreAt compares problems but for At (when the instance showing
// them learnt of them).
var ignoreAt = cmpopts.IgnoreFields(scheduler.Problem{}, "At")

// TestProblemsShownByEveryInstance: a problem met by the instance that
// owns a workflow is shown by another instance (its Problems, behind
// /trigger-status, /workflow-slots and the UI) once that one refreshed
// its store; it goes on both when cleared, and a take-over replaces it
// with the new owner's.
func TestProblemsShownByEveryInstance(t *testing.T) {
	srv := pgtest.StartT(t, pgtest.Options{})
	ctx := context.Background()
	if err := srv.Exec(ctx, "postgres", "CREATE DATABASE probs"); err != nil {
		t.Fatal(err)
	}
	wdir := t.TempDir()
	w := fixture.Hourly("a")
	w.StartTime = ts("2026-01-01T10:00:00.000Z")
	fixture.WriteProject(t, wdir, "p", w)
	var owner atomic.Value
	owner.Store("A")
	a := startPGInstance(t, srv.DSN("probs"), wdir, "A", &owner)
	b := startPGInstance(t, srv.DSN("probs"), wdir, "B", &owner)
	now := ts("2026-01-01T11:30:00.000Z")

	a.svc.submitErr = errors.New("oozie at A: connection refused")
	a.step(t, now) // READY
	a.step(t, now) // not submitted
	met := a.e.Problems("a")
	if len(met) == 0 || met[0].Op != "submit" {
		t.Fatalf("the owner met no submit problem: %+v", met)
	}
	b.refresh(t)
	if d := cmp.Diff(met, b.e.Problems("a"), ignoreAt); d != "" {
		t.Fatalf("instance B does not show A's problems of workflow a (-A +B):\n%s", d)
	}
	if d := cmp.Diff(met, b.e.Problems(""), ignoreAt); d != "" {
		t.Fatalf("instance B's list of every problem (-A +B):\n%s", d)
	}

	// Cleared on the owner: gone on both.
	a.svc.submitErr = nil
	a.step(t, now.Add(time.Minute))
	if p := a.e.Problems("a"); len(p) != 0 {
		t.Fatalf("problems left on A after the submission worked: %+v", p)
	}
	b.refresh(t)
	if p := b.e.Problems("a"); len(p) != 0 {
		t.Fatalf("B still shows problems A cleared: %+v", p)
	}

	// A take-over: the new owner's problems replace the old one's, on
	// both instances.
	a.svc.finishAll(true)
	a.svc.submitErr = errors.New("oozie at A: connection refused")
	a.step(t, now.Add(time.Hour)) // SUCCESS
	a.step(t, now.Add(time.Hour)) // the next slot not submitted
	b.refresh(t)
	if len(b.e.Problems("a")) == 0 {
		t.Fatal("B does not show A's new problem")
	}
	owner.Store("B")
	b.svc.submitErr = errors.New("oozie at B: no route to host")
	b.step(t, now.Add(time.Hour+time.Minute))
	fromB := b.e.Problems("a")
	if len(fromB) == 0 || fromB[0].Error != "oozie at B: no route to host" {
		t.Fatalf("the new owner's problems: %+v", fromB)
	}
	a.step(t, now.Add(time.Hour+2*time.Minute)) // no longer its to step
	if d := cmp.Diff(fromB, a.e.Problems("a"), ignoreAt); d != "" {
		t.Fatalf("A does not show the new owner's problems (-B +A):\n%s", d)
	}
}

// TestSharedProblemsBounded: a workflow with many failing slots and a
// long error publishes at most maxPublished problems, each cut, and a last
// one that counts the others; a step that meets the same problems again
// writes nothing; the problems of a removed workflow go from the store.
func TestSharedProblemsBounded(t *testing.T) {
	srv := pgtest.StartT(t, pgtest.Options{})
	ctx := context.Background()
	if err := srv.Exec(ctx, "postgres", "CREATE DATABASE bounds"); err != nil {
		t.Fatal(err)
	}
	wdir := t.TempDir()
	w := fixture.Minutely("many")
	w.StartTime = ts("2026-01-01T10:00:00.000Z")
	w.SchedulingStrategy.Concurrency = 1000
	fixture.WriteProject(t, wdir, "p", w)
	var owner atomic.Value
	owner.Store("A")
	a := startPGInstance(t, srv.DSN("bounds"), wdir, "A", &owner)
	b := startPGInstance(t, srv.DSN("bounds"), wdir, "B", &owner)
	long := strings.Repeat("é", 3000) // 6,000 bytes
	a.svc.submitErr = errors.New(long)
	now := ts("2026-01-01T13:00:30.000Z")
	a.step(t, now) // READY
	a.step(t, now) // 181 slots not submitted
	if n := len(a.e.Problems("many")); n != 181 {
		t.Fatalf("the owner lists %d problems, want 181", n)
	}
	b.refresh(t)
	got := b.e.Problems("many")
	if len(got) != maxPublished+1 {
		t.Fatalf("another instance shows %d problems, want %d", len(got), maxPublished+1)
	}
	var more int
	for _, p := range got {
		if len(p.Error) > maxPublishedError || !utf8.ValidString(p.Error) {
			t.Fatalf("a shared problem's error of %d bytes (valid UTF-8: %v), want at most %d", len(p.Error), utf8.ValidString(p.Error), maxPublishedError)
		}
		if p.Op == opMore {
			more++
			if want := "81 more problems"; !strings.Contains(p.Error, want) {
				t.Fatalf("the last shared problem %q does not say %q", p.Error, want)
			}
		}
	}
	if more != 1 {
		t.Fatalf("%d problems of op %q, want 1", more, opMore)
	}

	// The same problems met again: not written again.
	writer := func() string {
		t.Helper()
		var x string
		if err := a.db.Pool().QueryRow(ctx, "SELECT changed_by::text FROM celos_problems WHERE workflow = 'many'").Scan(&x); err != nil {
			t.Fatal(err)
		}
		return x
	}
	before := writer()
	a.step(t, now.Add(10*time.Second))
	if after := writer(); after != before {
		t.Fatalf("a step meeting the same problems wrote them again (transaction %s, then %s)", before, after)
	}

	// Removed: cleared from the store, not shown anywhere.
	fixture.WriteProject(t, wdir, "p", fixture.Hourly("other"))
	a.step(t, now.Add(20*time.Second))
	b.refresh(t)
	if got := b.db.PublishedWorkflows(); len(got) != 0 {
		t.Fatalf("problems of the removed workflow still published: %v", got)
	}
}
