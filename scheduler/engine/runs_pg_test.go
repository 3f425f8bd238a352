package engine

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
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
	w := fixture.Hourly("spaced")
	w.StartTime = ts("2026-11-24T00:00Z")
	w.SchedulingStrategy.Concurrency = 5
	w.Constraints = minInterval4h()
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
	held := problemsOf(b.e, "spaced", opConstraint)
	if len(held) == 0 || !strings.Contains(held[0].Error, "the last submission was at 2026-11-24T03:00:30.000Z") {
		t.Errorf("B's holds %+v, want minInterval's from A's submission", held)
	}
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
