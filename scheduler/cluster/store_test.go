package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/scheduler/store"
)

// TestStoreWritesFencedAfterTakeOver is the contract of PG.md end to end:
// two PostgreSQL state stores on one database, each fenced by its
// instance's membership. Once b has taken the workflow over, a's slot
// states and submit intents are refused (ErrFenced, counted) and nothing
// of them is committed; b reads the state as a left it and writes on.
func TestStoreWritesFencedAfterTakeOver(t *testing.T) {
	dsn := pgtest.Shared(t).CreateDB(t)
	const lease = 600 * time.Millisecond
	open := func(id string) (*Cluster, *statepg.DB) {
		t.Helper()
		c, err := New(openPool(t, dsn), Options{ID: id, Lease: lease, Workflows: func() []string { return []string{"wf"} }})
		if err != nil {
			t.Fatal(err)
		}
		db, err := statepg.Open(ctxT(t), dsn, statepg.Options{Fence: c}) // migrates: 0002_cluster too
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if err := c.Join(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		return c, db
	}
	ca, dba := open("a")
	tick(t, ca)
	id := slot.ID{Workflow: "wf", Time: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}
	if failed := dba.PutStates([]slot.State{{ID: id, Status: slot.Ready}}); len(failed) > 0 {
		t.Fatalf("the holder's write: %v", failed)
	}
	cb, dbb := open("b")
	eventually(t, time.Minute, "b takes wf over", func() bool {
		tick(t, cb)
		return cb.Owns("wf")
	})
	failed := dba.PutStates([]slot.State{{ID: id, Status: slot.Running, ExternalID: "zombie-job"}})
	if !errors.Is(failed[id], statepg.ErrFenced) {
		t.Fatalf("a's write after the take-over: %v, want ErrFenced", failed[id])
	}
	if failed := dba.PutIntents(map[slot.ID]store.Intent{id: {Time: time.Now()}}); !errors.Is(failed[id], statepg.ErrFenced) {
		t.Fatalf("a's submit intent after the take-over: %v, want ErrFenced", failed[id])
	}
	if n := dba.FencedWrites(); n != 2 {
		t.Errorf("a's store counted %d fenced writes, want 2", n)
	}
	if err := cb.BeginStep(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := dbb.Refresh(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	st, found, err := dbb.Get(id)
	if err != nil || !found || st.Status != slot.Ready {
		t.Fatalf("b reads %+v (found %v, %v), want READY as a left it", st, found, err)
	}
	if _, left, _ := dbb.GetIntent(id); left {
		t.Fatal("a's refused intent was committed")
	}
	if failed := dbb.PutStates([]slot.State{{ID: id, Status: slot.Running, ExternalID: "job-1"}}); len(failed) > 0 {
		t.Fatalf("the new holder's write: %v", failed)
	}
}
