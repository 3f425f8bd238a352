package statepg

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/store"
)

func claim(limit, rank int, wfs ...string) *store.PoolClaim {
	return &store.PoolClaim{Name: "etl", Limit: limit, Workflows: wfs, Rank: rank}
}

// refusedOf returns the slots of failed whose error wraps ErrPoolFull,
// sorted, and fails on any other error.
func refusedOf(t *testing.T, failed map[slot.ID]error) []string {
	t.Helper()
	var out []string
	for id, err := range failed {
		if !errors.Is(err, store.ErrPoolFull) {
			t.Fatalf("%s: %v, want only pool-full refusals", id, err)
		}
		out = append(out, id.String())
	}
	sort.Strings(out)
	return out
}

// TestPutIntentsPoolAdmission: intents of a pool's workflows are recorded
// while the pool has room, counting the RUNNING slots and open intents of
// every workflow of the pool (another instance's included), in rank
// order; the others are refused with ErrPoolFull and not recorded; an
// intent written again for a slot already counted is admitted even when
// the pool is full; intents without a claim are not limited.
func TestPutIntentsPoolAdmission(t *testing.T) {
	db, dsn := openTest(t)
	other := openDSN(t, dsn) // another instance
	wfs := []string{"a", "b", "c"}
	at := t0.Add(time.Minute)
	// Another instance runs one slot of the pool (b) and is submitting one (c).
	if err := other.Put(slot.State{ID: sid("b", 0), Status: slot.Running, ExternalID: "job-1"}); err != nil {
		t.Fatal(err)
	}
	if failed := other.PutIntents(map[slot.ID]store.Intent{sid("c", 0): {Time: at, Pool: claim(3, 0, wfs...)}}); failed != nil {
		t.Fatalf("the first intent of an empty pool: %v", failed)
	}
	// Limit 3, two occupied: one more, the best ranked; rank 1 and 2 refused.
	failed := db.PutIntents(map[slot.ID]store.Intent{
		sid("a", 2): {Time: at, Pool: claim(3, 1, wfs...)},
		sid("a", 1): {Time: at, Pool: claim(3, 0, wfs...)},
		sid("a", 3): {Time: at, Pool: claim(3, 2, wfs...)},
		sid("x", 0): {Time: at}, // no pool
	})
	if d := cmp.Diff([]string{sid("a", 2).String(), sid("a", 3).String()}, refusedOf(t, failed)); d != "" {
		t.Fatalf("refused (-want +got):\n%s", d)
	}
	want := `pool "etl" is full: 3 of 3 running or being submitted across the instances sharing the database`
	if got := failed[sid("a", 2)].Error(); got != want {
		t.Errorf("refusal: %q, want %q", got, want)
	}
	for id, want := range map[slot.ID]bool{sid("a", 1): true, sid("a", 2): false, sid("a", 3): false, sid("x", 0): true} {
		if _, left, err := db.GetIntent(id); err != nil || left != want {
			t.Errorf("intent of %s recorded: %v (%v), want %v", id, left, err, want)
		}
	}
	fresh := openDSN(t, dsn) // what the database holds
	if _, left, _ := fresh.GetIntent(sid("a", 2)); left {
		t.Error("a refused intent is in the database")
	}
	// Full: the intent of a slot already counted is written again (a
	// recovery, a resubmission), and a RUNNING slot's too.
	failed = db.PutIntents(map[slot.ID]store.Intent{
		sid("a", 1): {Attempt: 1, Time: at, Pool: claim(3, 0, wfs...)},
		sid("b", 0): {Time: at, Pool: claim(3, 1, wfs...)},
		sid("c", 5): {Time: at, Pool: claim(3, 2, wfs...)},
	})
	if d := cmp.Diff([]string{sid("c", 5).String()}, refusedOf(t, failed)); d != "" {
		t.Fatalf("refused when full (-want +got):\n%s", d)
	}
	if in, _, _ := db.GetIntent(sid("a", 1)); in.Attempt != 1 {
		t.Errorf("the intent written again is %+v, want attempt 1", in)
	}
	// Room again once a slot ends and an intent goes.
	if err := other.Put(slot.State{ID: sid("b", 0), Status: slot.Success, ExternalID: "job-1"}); err != nil {
		t.Fatal(err)
	}
	if err := other.DeleteIntents([]slot.ID{sid("c", 0)}); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteIntent(sid("b", 0)); err != nil { // written again above
		t.Fatal(err)
	}
	failed = db.PutIntents(map[slot.ID]store.Intent{
		sid("a", 2): {Time: at, Pool: claim(3, 0, wfs...)},
		sid("a", 3): {Time: at, Pool: claim(3, 1, wfs...)},
		sid("c", 5): {Time: at, Pool: claim(3, 2, wfs...)},
	})
	if d := cmp.Diff([]string{sid("c", 5).String()}, refusedOf(t, failed)); d != "" {
		t.Fatalf("refused after two places freed (-want +got):\n%s", d)
	}
	// A limit the slots of a pool already exceed (lowered in the pools
	// file) refuses every new one.
	failed = db.PutIntents(map[slot.ID]store.Intent{sid("c", 6): {Time: at, Pool: claim(1, 0, wfs...)}})
	if got := failed[sid("c", 6)]; got == nil || !strings.Contains(got.Error(), "is full: 3 of 1 running") {
		t.Errorf("limit below the use: %v", got)
	}
	// A claim whose workflows are not sorted, or lack the intent's own
	// workflow, is counted all the same.
	odd := &store.PoolClaim{Name: "other", Limit: 1, Workflows: []string{"z", "y"}}
	if failed := db.PutIntents(map[slot.ID]store.Intent{sid("y", 0): {Time: at, Pool: odd}}); failed != nil {
		t.Fatalf("the first intent of pool other: %v", failed)
	}
	failed = other.PutIntents(map[slot.ID]store.Intent{sid("q", 0): {Time: at, Pool: odd}})
	if d := cmp.Diff([]string{sid("q", 0).String()}, refusedOf(t, failed)); d != "" {
		t.Fatalf("pool other, full (-want +got):\n%s", d)
	}
}

// TestPutIntentsPoolConcurrent: instances recording intents of one pool
// at the same time (each sure the pool is empty) never record more than
// its limit together, and fill it.
func TestPutIntentsPoolConcurrent(t *testing.T) {
	const instances, limit, rounds = 4, 3, 20
	_, dsn := openTest(t)
	var dbs []*DB
	var wfs []string
	for i := range instances {
		dbs = append(dbs, openDSN(t, dsn))
		for j := range 3 {
			wfs = append(wfs, fmt.Sprintf("w%d-%d", i, j))
		}
	}
	sort.Strings(wfs)
	ctx := context.Background()
	// In the first round the pool's lock is held elsewhere: every
	// instance must wait for it (none may count the pool's slots before
	// it has the lock), then they go one by one.
	holder, err := dbs[0].Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock($1::int4, $2::int4)", int32(poolLockClass), poolLockKey("etl")); err != nil {
		t.Fatal(err)
	}
	for r := range rounds {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var recorded []slot.ID
		begin := make(chan struct{})
		for i, db := range dbs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ins := make(map[slot.ID]store.Intent)
				for j := range 3 {
					ins[sid(fmt.Sprintf("w%d-%d", i, j), r)] = store.Intent{Time: t0, Pool: claim(limit, j, wfs...)}
				}
				<-begin
				failed := db.PutIntents(ins)
				mu.Lock()
				defer mu.Unlock()
				for id := range ins {
					if err := failed[id]; err == nil {
						recorded = append(recorded, id)
					} else if !errors.Is(err, store.ErrPoolFull) {
						t.Errorf("round %d: %s: %v", r, id, err)
					}
				}
			}()
		}
		close(begin)
		if r == 0 {
			waitForLockWaiters(t, holder.Conn().PgConn().PID(), dbs[0], instances)
			mu.Lock()
			if len(recorded) != 0 {
				t.Errorf("intents recorded while the pool's lock was held elsewhere: %v", recorded)
			}
			mu.Unlock()
			if _, err := holder.Exec(ctx, "SELECT pg_advisory_unlock($1::int4, $2::int4)", int32(poolLockClass), poolLockKey("etl")); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
		if len(recorded) != limit {
			t.Fatalf("round %d: %d intents recorded by %d instances at once, want the limit %d: %v", r, len(recorded), instances, limit, recorded)
		}
		// The jobs end: the next round starts from an empty pool.
		for _, id := range recorded {
			for _, db := range dbs {
				if err := db.DeleteIntent(id); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	var n int
	if err := dbs[0].Pool().QueryRow(ctx, "SELECT count(*) FROM celos_intents").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d intents left (%v)", n, err)
	}
}

// waitForLockWaiters waits (generously) until n sessions wait for the
// advisory lock that session holder holds.
func waitForLockWaiters(t *testing.T, holder uint32, db *DB, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var waiting int
		err := db.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_locks w JOIN pg_locks h
ON h.locktype = 'advisory' AND h.granted AND h.pid = $1 AND w.classid = h.classid AND w.objid = h.objid AND w.objsubid = h.objsubid
WHERE w.locktype = 'advisory' AND NOT w.granted`, int32(holder)).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d instances wait for the pool's lock after a minute", waiting, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPoolOccupied: the slots of the given workflows that are RUNNING or
// have an open submit intent in the database, whichever instance wrote
// them and whatever this instance's index says (it has not refreshed),
// each once (a RUNNING slot with an intent left too); slots of other
// workflows and other statuses are not.
func TestPoolOccupied(t *testing.T) {
	db, dsn := openTest(t)
	other := openDSN(t, dsn) // another instance
	if got, err := db.PoolOccupied([]string{"a", "b"}); err != nil || len(got) != 0 {
		t.Fatalf("empty database: %v, %v", got, err)
	}
	// This instance loads a's index before the other writes.
	if _, err := db.Active("a"); err != nil {
		t.Fatal(err)
	}
	for _, st := range []slot.State{
		{ID: sid("a", 0), Status: slot.Running, ExternalID: "job-1"},
		{ID: sid("a", 1), Status: slot.Success, ExternalID: "job-2"},
		{ID: sid("b", 0), Status: slot.Ready},
		{ID: sid("b", 1), Status: slot.Running, ExternalID: "job-3"},
		{ID: sid("x", 0), Status: slot.Running, ExternalID: "job-4"}, // not asked about
	} {
		if err := other.Put(st); err != nil {
			t.Fatal(err)
		}
	}
	at := t0.Add(time.Minute)
	if failed := other.PutIntents(map[slot.ID]store.Intent{
		sid("b", 0): {Time: at}, // being submitted
		sid("b", 1): {Time: at}, // RUNNING, its intent not removed yet
		sid("x", 1): {Time: at},
	}); failed != nil {
		t.Fatal(failed)
	}
	if act, _ := db.Active("a"); len(act) != 0 {
		t.Fatalf("this instance's index of a already shows the other's write (%v): the test needs a stale view", act)
	}
	got, err := db.PoolOccupied([]string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, id := range got {
		names = append(names, id.String())
	}
	sort.Strings(names)
	want := []string{sid("a", 0).String(), sid("b", 0).String(), sid("b", 1).String()}
	if d := cmp.Diff(want, names); d != "" {
		t.Errorf("occupied (-want +got):\n%s", d)
	}
}

// TestPutIntentsPoolCountsDepartedSlots: slots of workflows that left the
// pool while they ran (store.PoolClaim.Slots: "gone" undeployed, "moved"
// now another pool's) count against its limit while RUNNING, and only
// those: another RUNNING slot of "moved" (admitted by its new pool) does
// not, nor a listed slot that ended.
func TestPutIntentsPoolCountsDepartedSlots(t *testing.T) {
	db, _ := openTest(t)
	at := t0.Add(time.Minute)
	for _, st := range []slot.State{
		{ID: sid("gone", 0), Status: slot.Running, ExternalID: "job-1"},
		{ID: sid("moved", 0), Status: slot.Running, ExternalID: "job-2"},
		{ID: sid("moved", 1), Status: slot.Running, ExternalID: "job-3"}, // its new pool's
		{ID: sid("gone", 1), Status: slot.Success, ExternalID: "job-4"},
	} {
		if err := db.Put(st); err != nil {
			t.Fatal(err)
		}
	}
	departed := []slot.ID{sid("gone", 0), sid("gone", 1), sid("moved", 0)}
	mk := func(limit, rank int) *store.PoolClaim {
		c := claim(limit, rank, "a")
		c.Slots = departed
		return c
	}
	// Limit 3: two departed slots run, one place left.
	failed := db.PutIntents(map[slot.ID]store.Intent{
		sid("a", 0): {Time: at, Pool: mk(3, 0)},
		sid("a", 1): {Time: at, Pool: mk(3, 1)},
	})
	if d := cmp.Diff([]string{sid("a", 1).String()}, refusedOf(t, failed)); d != "" {
		t.Fatalf("refused (-want +got):\n%s", d)
	}
	// The undeployed job ends: its place is free.
	if err := db.Put(slot.State{ID: sid("gone", 0), Status: slot.Success, ExternalID: "job-1"}); err != nil {
		t.Fatal(err)
	}
	if failed := db.PutIntents(map[slot.ID]store.Intent{sid("a", 1): {Time: at, Pool: mk(3, 0)}}); failed != nil {
		t.Fatalf("a place freed by a departed slot's end: %v", failed)
	}
}
