package statepg

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/celos-go/celos/scheduler/slot"
)

// TestRefreshReadsOnlyChanges: a Refresh reads the rows of the workflows
// written since the previous one, not every workflow's: 200 loaded
// workflows, two of them written by another instance, cost a handful of
// rows, and both are read again.
func TestRefreshReadsOnlyChanges(t *testing.T) {
	a, dsn := openTest(t)
	b := openDSN(t, dsn)
	ctx := context.Background()
	var sts []slot.State
	var wfs []string
	for i := range 200 {
		wf := fmt.Sprintf("w%03d", i)
		wfs = append(wfs, wf)
		sts = append(sts, slot.State{ID: sid(wf, 0), Status: slot.Waiting})
	}
	if failed := a.PutStates(sts); failed != nil {
		t.Fatal(failed)
	}
	b.Preload(wfs, 1)
	if _, err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Put(slot.State{ID: sid("w007", 0), Status: slot.Ready}); err != nil {
		t.Fatal(err)
	}
	if err := a.SetPaused("w150", true); err != nil {
		t.Fatal(err)
	}
	reads := b.Stats().Reads
	n, err := b.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Stats().Reads - reads; got > 5 {
		t.Fatalf("Refresh read %d rows for 2 workflows written, want at most 5", got)
	}
	if n != 2 {
		t.Fatalf("Refresh dropped %d indexes, want 2 (w007, w150)", n)
	}
	if st, _, _ := b.Get(sid("w007", 0)); st.Status != slot.Ready {
		t.Fatalf("b reads %v after Refresh", st)
	}
	if !b.Paused("w150") {
		t.Fatal("b does not see the pause of w150 after Refresh")
	}
	// Nothing written: nothing dropped, (almost) nothing read.
	reads = b.Stats().Reads
	if n, err := b.Refresh(ctx); err != nil || n != 0 {
		t.Fatalf("Refresh with nothing written: dropped %d, %v", n, err)
	}
	if got := b.Stats().Reads - reads; got > 3 {
		t.Fatalf("Refresh with nothing written read %d rows", got)
	}
}

// TestRefreshOutOfOrderCommit: two real transactions of other writers
// commit in the other order than they began (the first holds its
// workflow's row while the second commits); a Refresh between the two
// commits must not skip the first writer's change when it commits later.
// A change number taken when a transaction writes (a sequence, WHERE seq >
// last) would skip it: the later commit's number is below the one the
// reader has already passed.
func TestRefreshOutOfOrderCommit(t *testing.T) {
	a, dsn := openTest(t)
	r := openDSN(t, dsn)
	ctx := context.Background()
	for _, wf := range []string{"early", "late", "other"} {
		if err := a.Put(slot.State{ID: sid(wf, 0), Status: slot.Waiting}); err != nil {
			t.Fatal(err)
		}
	}
	r.Preload([]string{"early", "late", "other"}, 1)
	if _, err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	conn := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	// write changes a slot of wf and bumps its row, as a store's write
	// transaction does, in tx.
	write := func(tx pgx.Tx, wf string, st slot.Status) {
		t.Helper()
		if _, err := tx.Exec(ctx, "UPDATE celos_slots SET status = $2 WHERE workflow = $1", wf, string(st)); err != nil {
			t.Fatal(err)
		}
		if err := bumpVersions(ctx, tx, []string{wf}, map[string]int64{}); err != nil {
			t.Fatal(err)
		}
	}
	c1, c2 := conn(), conn()
	tx1, err := c1.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback(ctx)
	write(tx1, "early", slot.Ready) // takes its transaction id (and any change number) first
	tx2, err := c2.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	write(tx2, "late", slot.Ready)
	if err := tx2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Refresh(ctx); err != nil || n != 1 {
		t.Fatalf("Refresh after the second writer's commit: dropped %d (want 1: late), %v", n, err)
	}
	if st, _, _ := r.Get(sid("late", 0)); st.Status != slot.Ready {
		t.Fatalf("late reads %v", st)
	}
	if st, _, _ := r.Get(sid("early", 0)); st.Status != slot.Waiting {
		t.Fatalf("early reads %v before its writer committed", st)
	}
	// Refreshes while the first writer is still open: nothing new.
	for range 2 {
		if n, err := r.Refresh(ctx); err != nil || n != 0 {
			t.Fatalf("Refresh with the first writer still open: dropped %d, %v", n, err)
		}
	}
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Refresh(ctx); err != nil || n != 1 {
		t.Fatalf("Refresh after the first writer's late commit: dropped %d (want 1: early), %v", n, err)
	}
	if st, _, _ := r.Get(sid("early", 0)); st.Status != slot.Ready {
		t.Fatalf("the late commit of early was missed: it reads %v", st)
	}
	if st, _, _ := r.Get(sid("other", 0)); st.Status != slot.Waiting {
		t.Fatalf("other reads %v", st)
	}
}

// TestRefreshSeesOlderWriters: a celos without the change column (an
// instance of an older version during a rolling upgrade, or an operator's
// SQL) writes the row with version = version + 1 only; the trigger stamps
// it all the same, and Refresh sees the change.
func TestRefreshSeesOlderWriters(t *testing.T) {
	a, dsn := openTest(t)
	r := openDSN(t, dsn)
	ctx := context.Background()
	if err := a.Put(slot.State{ID: sid("w", 0), Status: slot.Waiting}); err != nil {
		t.Fatal(err)
	}
	r.Preload([]string{"w"}, 1)
	if _, err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Pool().Exec(ctx, `UPDATE celos_slots SET status = 'READY' WHERE workflow = 'w';
UPDATE celos_workflows SET version = version + 1 WHERE workflow = 'w';
INSERT INTO celos_paused (workflow) VALUES ('new');
INSERT INTO celos_workflows (workflow) VALUES ('new')`); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Refresh(ctx); err != nil || n != 1 {
		t.Fatalf("Refresh: dropped %d (want 1), %v", n, err)
	}
	if st, _, _ := r.Get(sid("w", 0)); st.Status != slot.Ready {
		t.Fatalf("w reads %v", st)
	}
	if !r.Paused("new") {
		t.Fatal("the new workflow's pause was not seen")
	}
}

// TestRefreshAfterServerChange: a store whose server's transaction ids went
// backwards (another server restored under it) cannot trust what it has
// passed: Refresh drops every index and reads the paused flags again.
func TestRefreshAfterServerChange(t *testing.T) {
	r, _ := openTest(t)
	ctx := context.Background()
	if err := r.Put(slot.State{ID: sid("w", 0), Status: slot.Waiting}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	r.wmu.Lock()
	r.since += 1 << 40 // as if the previous server had been far ahead
	r.wmu.Unlock()
	if n, err := r.Refresh(ctx); err != nil || n != 1 {
		t.Fatalf("Refresh after the ids went back: dropped %d (want 1, every index), %v", n, err)
	}
	// And it carries on from the new server's ids.
	if _, _, err := r.Get(sid("w", 0)); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Refresh(ctx); err != nil || n != 0 {
		t.Fatalf("the next Refresh: dropped %d (want 0), %v", n, err)
	}
}
