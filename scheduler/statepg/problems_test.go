package statepg

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler"
)

// holderFence lets its instance write while held is set (a lease of every
// workflow, for tests).
type holderFence struct{ held *atomic.Bool }

func (f holderFence) Check(ctx context.Context, tx pgx.Tx, wfs []string) error {
	if !f.held.Load() {
		return ErrFenced
	}
	return nil
}

func problem(wf string, slotTime, op, msg string) scheduler.Problem {
	p := scheduler.Problem{Workflow: wf, Op: op, Error: msg, At: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	if slotTime != "" {
		t, err := time.Parse(time.RFC3339, slotTime)
		if err != nil {
			panic(err)
		}
		p.Slot = t.UTC()
	}
	return p
}

// TestPublishedProblems: problems one instance publishes are read by
// another's Refresh, replaced as a whole, emptied; a fenced instance
// cannot overwrite them; ClearPublished needs no lease; Reload reads them
// all again; a row written by hand that is not readable is shown as a
// problem, not as a Refresh error.
func TestPublishedProblems(t *testing.T) {
	dsn := pgtest.Shared(t).CreateDB(t)
	ctx := context.Background()
	var held atomic.Bool
	held.Store(true)
	a, err := Open(ctx, dsn, Options{Fence: holderFence{&held}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := openDSN(t, dsn)
	refresh := func() {
		t.Helper()
		if _, err := b.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	refresh()

	first := []scheduler.Problem{problem("w", "", "pool", "pool p is not defined"), problem("w", "2026-01-01T10:00:00Z", "trigger", "hdfs: connection refused")}
	if err := a.PublishProblems(map[string][]scheduler.Problem{"w": first, "v": {problem("v", "2026-01-01T11:00:00Z", "submit", "oozie: 503")}}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(first, a.PublishedProblems("w")); d != "" {
		t.Fatalf("the publisher's own view (-want +got):\n%s", d)
	}
	refresh()
	if d := cmp.Diff(first, b.PublishedProblems("w")); d != "" {
		t.Fatalf("another instance's view after Refresh (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"v", "w"}, b.PublishedWorkflows()); d != "" {
		t.Fatalf("workflows with problems (-want +got):\n%s", d)
	}
	if got := b.PublishedProblems(""); len(got) != 3 || got[0].Workflow != "v" {
		t.Fatalf("every published problem: %+v", got)
	}

	// Replaced as a whole, then emptied: another Refresh reads only that.
	second := []scheduler.Problem{problem("w", "2026-01-01T11:00:00Z", "trigger", "hdfs: timeout")}
	if err := a.PublishProblems(map[string][]scheduler.Problem{"w": second}); err != nil {
		t.Fatal(err)
	}
	refresh()
	if d := cmp.Diff(second, b.PublishedProblems("w")); d != "" {
		t.Fatalf("after a replacement (-want +got):\n%s", d)
	}
	if err := a.PublishProblems(map[string][]scheduler.Problem{"w": nil}); err != nil {
		t.Fatal(err)
	}
	reads, queries := b.Stats().Reads, b.Queries()
	refresh()
	if n := b.Queries() - queries; n != 1 {
		t.Fatalf("a Refresh that reads problems took %d round trips, want 1 (one statement)", n)
	}
	if got := b.PublishedProblems("w"); len(got) != 0 {
		t.Fatalf("emptied problems still shown: %+v", got)
	}
	if got := b.Stats().Reads - reads; got > 3 {
		t.Fatalf("Refresh read %d rows for one workflow's problems written, want at most 3", got)
	}

	// Fenced: refused, nothing changes anywhere.
	held.Store(false)
	err = a.PublishProblems(map[string][]scheduler.Problem{"v": nil})
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("a fenced publication: %v, want ErrFenced", err)
	}
	refresh()
	if got := b.PublishedProblems("v"); len(got) != 1 {
		t.Fatalf("a fenced instance emptied v's problems: %+v", got)
	}
	if got := a.PublishedProblems("v"); len(got) != 1 {
		t.Fatalf("the fenced instance's view changed: %+v", got)
	}
	// Removed workflows need no lease.
	if err := a.ClearPublished([]string{"v"}); err != nil {
		t.Fatal(err)
	}
	refresh()
	if got := b.PublishedWorkflows(); len(got) != 0 {
		t.Fatalf("workflows with problems after clearing v: %v", got)
	}

	// Reload reads every row again; an unreadable row is a problem.
	if err := pgtest.Shared(t).Exec(ctx, dbName(dsn), `INSERT INTO celos_problems (workflow, problems) VALUES ('x', '[{"slot": 5}]')`); err != nil {
		t.Fatal(err)
	}
	c := openDSN(t, dsn)
	if _, err := c.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	got := c.PublishedProblems("x")
	if len(got) != 1 || got[0].Op != "state" || got[0].Workflow != "x" {
		t.Fatalf("an unreadable row: %+v", got)
	}
	if err := b.Reload(); err != nil {
		t.Fatal(err)
	}
	refresh()
	if d := cmp.Diff(got, b.PublishedProblems("x")); d != "" {
		t.Fatalf("after Reload (-want +got):\n%s", d)
	}
	if err := a.PublishProblems(map[string][]scheduler.Problem{"../x": nil}); err == nil {
		t.Fatal("a bad workflow id was published")
	}
}

// TestPublishedProblemsOfManyWorkflows: one publication of 1,000
// workflows is one transaction, read back whole by a first Refresh.
func TestPublishedProblemsOfManyWorkflows(t *testing.T) {
	a, dsn := openTest(t)
	set := make(map[string][]scheduler.Problem)
	for i := range 1000 {
		wf := fmt.Sprintf("w%04d", i)
		set[wf] = []scheduler.Problem{problem(wf, "2026-01-01T10:00:00Z", "trigger", "down")}
	}
	q := a.Queries()
	if err := a.PublishProblems(set); err != nil {
		t.Fatal(err)
	}
	if n := a.Queries() - q; n > 4 {
		t.Fatalf("publishing 1,000 workflows' problems took %d round trips, want at most 4", n)
	}
	b := openDSN(t, dsn)
	if _, err := b.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(b.PublishedWorkflows()); got != 1000 {
		t.Fatalf("%d workflows with problems read, want 1000", got)
	}
}

// TestPublishedProblemsAfterServerChange: a Refresh that finds the
// server's transaction ids gone backwards reads every published problem
// again, and forgets those the server does not have.
func TestPublishedProblemsAfterServerChange(t *testing.T) {
	a, dsn := openTest(t)
	b := openDSN(t, dsn)
	ctx := context.Background()
	if _, err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	b.probs.apply(map[string][]scheduler.Problem{"gone": {problem("gone", "", "step", "of the old server")}}, false)
	want := []scheduler.Problem{problem("w", "2026-01-01T10:00:00Z", "trigger", "down")}
	if err := a.PublishProblems(map[string][]scheduler.Problem{"w": want}); err != nil {
		t.Fatal(err)
	}
	b.wmu.Lock()
	b.since += 1 << 40 // as if the previous server had been far ahead
	b.wmu.Unlock()
	if _, err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, b.PublishedProblems("")); d != "" {
		t.Fatalf("published problems after the ids went back (-want +got):\n%s", d)
	}
}
