package cluster

// The PostgreSQL outage sweep (docs/reliability.md, "PostgreSQL outage
// sweep (November 2026)"): instances whose clocks differ.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/statepg"
)

// TestPgsweepSkewedClockTakesNoWorkflow runs two instances on one
// database, a's clock five minutes ahead: a holds no lease (its Tick says
// why, naming the offset), is not counted live, and b steps every
// workflow; once a's clock agrees again, a takes its share.
func TestPgsweepSkewedClockTakesNoWorkflow(t *testing.T) {
	pool := openPool(t, newDB(t))
	var ahead atomic.Int64
	ahead.Store(int64(5 * time.Minute))
	wfs := make([]string, 20)
	for i := range wfs {
		wfs[i] = fmt.Sprintf("wf%02d", i)
	}
	a, err := New(pool, Options{ID: "a", Host: "host-a", Lease: time.Second, Workflows: func() []string { return wfs },
		Clock: func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Join(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	b := member(t, pool, "b", time.Second, wfs...)
	for range 3 {
		err := a.Tick(ctxT(t))
		if !errors.Is(err, ErrClockSkew) {
			t.Fatalf("tick of a, its clock 5 minutes ahead: %v, want ErrClockSkew", err)
		}
		if !strings.Contains(err.Error(), "5m0s ahead of the database's") {
			t.Errorf("the error does not say by how much: %v", err)
		}
		tick(t, b)
	}
	if got := a.Owned(); len(got) != 0 {
		t.Errorf("a, its clock 5 minutes ahead, holds the leases of %v", got)
	}
	if off, far := a.ClockOffset(); !far || off < 4*time.Minute || off > 6*time.Minute {
		t.Errorf("a's ClockOffset: %v, %v; want about 5m, too far", off, far)
	}
	if off, far := b.ClockOffset(); far || off.Abs() > MaxClockSkew {
		t.Errorf("b's ClockOffset: %v, %v; want under a second", off, far)
	}
	if diff := cmp.Diff(wfs, b.Owned()); diff != "" {
		t.Errorf("b's leases (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b"}, b.Live()); diff != "" {
		t.Errorf("live instances as b sees them (-want +got):\n%s", diff)
	}

	ahead.Store(0)
	eventually(t, time.Minute, "a takes its share once its clock agrees", func() bool {
		if err := a.Tick(ctxT(t)); err != nil {
			t.Logf("tick of a: %v", err)
		}
		tick(t, b)
		return len(a.Owned()) > 0 && len(a.Owned())+len(b.Owned()) == len(wfs)
	})
	if _, far := a.ClockOffset(); far {
		t.Error("a's ClockOffset still says too far once its clock agrees")
	}
}

// TestPgsweepOwnerStoppedInATransactionIsTakenOver: the owner's process
// stops (SIGSTOP, a VM paused) in the middle of a write of the state
// store, after the fence locked its lease row: its backend waits, idle in
// the transaction, holding the lock. Another instance takes the workflow
// over once the store's call timeout has passed (PostgreSQL ends the
// session), not only when the stopped process comes back.
func TestPgsweepOwnerStoppedInATransactionIsTakenOver(t *testing.T) {
	dsn := pgtest.Shared(t).CreateDB(t)
	const lease = 600 * time.Millisecond
	wfs := func() []string { return []string{"wf"} }
	a, err := New(openPool(t, dsn), Options{ID: "a", Lease: lease, Workflows: wfs})
	if err != nil {
		t.Fatal(err)
	}
	db, err := statepg.Open(ctxT(t), dsn, statepg.Options{Fence: a, OpTimeout: 3 * time.Second}) // migrates
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := a.Join(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	tick(t, a)
	// a's write stops after the fence's check: the transaction stays
	// open on the store's connection, as a stopped process leaves it.
	tx, err := db.Pool().Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if err := a.Check(ctxT(t), tx, []string{"wf"}); err != nil {
		t.Fatal(err)
	}
	b := member(t, openPool(t, dsn), "b", lease, "wf")
	t0 := time.Now()
	eventually(t, 2*time.Minute, "b takes wf over from a, stopped in a transaction", func() bool {
		if err := b.Tick(ctxT(t)); err != nil {
			t.Logf("tick of b: %v", err)
		}
		return len(b.Owned()) == 1
	})
	t.Logf("b took wf over %s after a stopped", time.Since(t0).Round(100*time.Millisecond))
}
