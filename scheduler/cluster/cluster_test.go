package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestTwoInstancesRaceForLeases: two instances that both believe they
// should hold the same workflows (neither sees the other yet) try to take
// them at the same moment, round after round: each lease goes to exactly
// one, with a token no other acquisition had.
func TestTwoInstancesRaceForLeases(t *testing.T) {
	pool := openPool(t, newDB(t))
	a := member(t, pool, "a", time.Minute)
	b := member(t, pool, "b", time.Minute)
	seen := map[int64]string{}
	for round := 0; round < 20; round++ {
		wfs := []string{}
		for i := 0; i < 10; i++ {
			wfs = append(wfs, fmt.Sprintf("r%02d-wf%d", round, i))
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, 2)
		for i, c := range []*Cluster{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = c.acquire(ctxT(t), wfs)
			}()
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		rows := leases(t, pool)
		for _, wf := range wfs {
			ao, bo := a.Owns(wf), b.Owns(wf)
			if ao == bo {
				t.Fatalf("round %d: %s: a owns %v, b owns %v; want exactly one", round, wf, ao, bo)
			}
			holder := "a"
			if bo {
				holder = "b"
			}
			if rows[wf].Holder != holder {
				t.Fatalf("round %d: %s: the database says %s holds it, the instances say %s", round, wf, rows[wf].Holder, holder)
			}
			if prev, dup := seen[rows[wf].Token]; dup {
				t.Fatalf("token %d given to %s and to %s", rows[wf].Token, prev, wf)
			}
			seen[rows[wf].Token] = wf
		}
	}
}

// TestSpreadJoinLeave: three instances share the workflows by rendezvous
// hashing; each workflow is held by exactly one, the one Owner names; when
// one leaves its workflows move to the others, and when it comes back the
// workflows that hash to it move back.
func TestSpreadJoinLeave(t *testing.T) {
	pool := openPool(t, newDB(t))
	wfs := wfNames(60)
	cs := []*Cluster{
		member(t, pool, "celos-1", time.Minute, wfs...),
		member(t, pool, "celos-2", time.Minute, wfs...),
		member(t, pool, "celos-3", time.Minute, wfs...),
	}
	settle := func(cs []*Cluster, live []string) {
		t.Helper()
		// Two rounds: a workflow given up in round one is taken in round two.
		tick(t, cs...)
		tick(t, cs...)
		got, want := map[string]string{}, map[string]string{}
		for _, wf := range wfs {
			want[wf] = Owner(wf, live)
			for _, c := range cs {
				if c.Owns(wf) {
					if prev, ok := got[wf]; ok {
						t.Fatalf("%s owned by %s and %s", wf, prev, c.ID())
					}
					got[wf] = c.ID()
				}
			}
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("owners (-rendezvous +instances):\n%s", d)
		}
	}
	live := []string{"celos-1", "celos-2", "celos-3"}
	settle(cs, live)
	for _, c := range cs {
		if n := len(c.Owned()); n < 10 {
			t.Errorf("%s owns only %d of 60 workflows", c.ID(), n)
		}
	}
	if err := cs[1].Leave(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if len(cs[1].Owned()) != 0 {
		t.Fatalf("celos-2 owns %v after Leave", cs[1].Owned())
	}
	settle([]*Cluster{cs[0], cs[2]}, []string{"celos-1", "celos-3"})
	back := member(t, pool, "celos-2", time.Minute, wfs...)
	// The others see it at their next tick and give up its workflows; it
	// takes them at its tick after that.
	tick(t, back)
	settle([]*Cluster{cs[0], back, cs[2]}, live)
	if st := back.Stats(); st.Acquired == 0 {
		t.Errorf("the returning instance acquired nothing: %+v", st)
	}
}

// TestFenceAfterTakeOver: a holder that stops renewing loses its lease to
// another instance once it expires (by the database's clock); its writes
// are refused from then on, the new holder's go through.
func TestFenceAfterTakeOver(t *testing.T) {
	pool := openPool(t, newDB(t))
	const lease = 600 * time.Millisecond
	a := member(t, pool, "a", lease, "wf")
	tick(t, a)
	if !a.Owns("wf") {
		t.Fatal("a does not own wf after its tick")
	}
	if err := write(ctxT(t), pool, a, "wf"); err != nil {
		t.Fatalf("the holder's write: %v", err)
	}
	// a stops ticking (it hangs); b arrives and, once a's heartbeat and
	// lease have expired, takes wf over.
	b := member(t, pool, "b", lease, "wf")
	eventually(t, 30*time.Second, "b takes wf over", func() bool {
		tick(t, b)
		return b.Owns("wf")
	})
	if st := b.Stats(); st.TakeOvers != 1 {
		t.Errorf("b's take-overs = %d, want 1", st.TakeOvers)
	}
	if a.Owns("wf") {
		t.Error("a still owns wf after its local deadline")
	}
	err := write(ctxT(t), pool, a, "wf")
	if !errors.Is(err, ErrFenced) {
		t.Fatalf("a's write after the take-over: %v, want ErrFenced", err)
	}
	if err := write(ctxT(t), pool, b, "wf"); err != nil {
		t.Fatalf("the new holder's write: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctxT(t), `SELECT count(*) FROM writes WHERE instance = 'a'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("a's committed writes: %d (%v), want 1 (the one before the take-over)", n, err)
	}
	if a.Stats().Fenced != 1 {
		t.Errorf("a counted %d fenced writes, want 1", a.Stats().Fenced)
	}
	// a's next tick finds the lease gone.
	tick(t, a)
	if st := a.Stats(); st.Lost != 1 {
		t.Errorf("a's lost leases = %d, want 1", st.Lost)
	}
}

// TestCheckHoldsOffTakeOver: a write transaction that passed Check keeps
// the lease row share-locked until it ends, so a take-over (the lease
// expired meanwhile) waits for it and the write is ordered before the new
// holder's first read.
func TestCheckHoldsOffTakeOver(t *testing.T) {
	pool := openPool(t, newDB(t))
	const lease = 600 * time.Millisecond
	a := member(t, pool, "a", lease, "wf")
	tick(t, a)
	ctx := ctxT(t)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := a.Check(ctx, tx, []string{"wf"}); err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	b := member(t, pool, "b", lease, "wf")
	done := make(chan error, 1)
	go func() {
		time.Sleep(lease + 100*time.Millisecond) // a's lease has expired
		done <- b.acquire(ctxT(t), []string{"wf"})
	}()
	// b's take-over blocks on a's lock.
	eventually(t, 30*time.Second, "b waits for a's row lock", func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted AND $1 = ANY(pg_blocking_pids(pid))`, pid).Scan(&n)
		return err == nil && n > 0
	})
	select {
	case err := <-done:
		t.Fatalf("b took the lease over while a's checked write was open: %v", err)
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !b.Owns("wf") {
		t.Fatal("b did not take wf over once a's write committed")
	}
}

// TestOperatorWriteAdvancesToken: an operator's action served by an
// instance that does not hold the workflow goes through and advances the
// token: the holder's writes of the step in progress are refused, and it
// writes again from its next step on.
func TestOperatorWriteAdvancesToken(t *testing.T) {
	pool := openPool(t, newDB(t))
	holder := member(t, pool, "holder", time.Minute, "wf")
	tick(t, holder)
	other := member(t, pool, "other", time.Minute) // shares nothing
	if err := write(ctxT(t), pool, other, "wf"); !errors.Is(err, ErrFenced) {
		t.Fatalf("a plain write by a non-holder: %v, want ErrFenced", err)
	}
	if err := other.Operator(func() error { return write(ctxT(t), pool, other, "wf", "nobody-holds-this") }); err != nil {
		t.Fatalf("an operator write by a non-holder: %v", err)
	}
	if err := write(ctxT(t), pool, holder, "wf"); !errors.Is(err, ErrFenced) {
		t.Fatalf("the holder's write after an operator's write: %v, want ErrFenced", err)
	}
	// (renew, not a whole tick: "other" is live too, and wf may hash to it.)
	if err := holder.renew(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if holder.Owns("wf") {
		t.Fatal("the holder owns wf before its next step")
	}
	if err := holder.BeginStep(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if !holder.Owns("wf") {
		t.Fatal("the holder does not own wf at its next step")
	}
	if err := write(ctxT(t), pool, holder, "wf"); err != nil {
		t.Fatalf("the holder's write at its next step: %v", err)
	}
	// The workflow no one held got an expired row: the first instance to
	// want it takes it over.
	c := member(t, pool, "c", time.Minute)
	if err := c.acquire(ctxT(t), []string{"nobody-holds-this"}); err != nil {
		t.Fatal(err)
	}
	if !c.Owns("nobody-holds-this") || c.Stats().TakeOvers != 1 {
		t.Fatalf("c owns nobody-holds-this: %v, stats %+v", c.Owns("nobody-holds-this"), c.Stats())
	}
}

// TestJoinSameID: a second process under a live instance's id is refused
// (after waiting for the row to go stale); once the first stops, or its
// heartbeat goes stale, the id is taken and the first is told it was
// replaced.
func TestJoinSameID(t *testing.T) {
	pool := openPool(t, newDB(t))
	const lease = 600 * time.Millisecond
	first := member(t, pool, "dup", lease, "wf")
	tick(t, first)
	second, err := New(pool, Options{ID: "dup", Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	keepAlive := make(chan struct{})
	go func() { // first keeps its heartbeat fresh meanwhile
		for {
			select {
			case <-keepAlive:
				return
			case <-time.After(lease / 4):
				_ = first.Tick(ctxT(t))
			}
		}
	}()
	ctx, cancel := contextWithTimeout(2 * lease)
	err = second.Join(ctx)
	cancel()
	close(keepAlive)
	if !errors.Is(err, ErrInstanceInUse) {
		t.Fatalf("joining under a live id: %v, want ErrInstanceInUse", err)
	}
	// first hangs: its row goes stale, second gets the id.
	if err := second.Join(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := first.Tick(ctxT(t)); !errors.Is(err, ErrReplaced) {
		t.Fatalf("the replaced process's tick: %v, want ErrReplaced", err)
	}
	if first.Owns("wf") {
		t.Error("the replaced process still owns wf")
	}
}

func TestMissingSchema(t *testing.T) {
	srvDSN := newDBNoSchema(t)
	pool := openPool(t, srvDSN)
	c, err := New(pool, Options{ID: "x", Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Join(ctxT(t)); !errors.Is(err, ErrNoSchema) {
		t.Fatalf("Join on a database without the cluster tables: %v, want ErrNoSchema", err)
	}
}

func TestOptionsRefused(t *testing.T) {
	if _, err := New(nil, Options{}); err == nil {
		t.Error("New without a database: no error")
	}
	pool := openPool(t, newDBNoSchema(t))
	if _, err := New(pool, Options{ID: "x", Lease: time.Millisecond}); err == nil {
		t.Error("a 1ms lease: no error")
	}
}

func TestDedupe(t *testing.T) {
	got := dedupe([]string{"b", "a", "b", "c", "a"})
	sort.Strings(got)
	if d := cmp.Diff([]string{"a", "b", "c"}, got); d != "" {
		t.Error(d)
	}
}

// TestOwnsFuncStepsOnlyLeasesTakenBeforeTheStep: the engine's view
// (OwnsFunc) of a lease taken while a step runs starts at the next step,
// after the store has been refreshed for it; Owns sees it at once.
func TestOwnsFuncStepsOnlyLeasesTakenBeforeTheStep(t *testing.T) {
	pool := openPool(t, newDB(t))
	a := member(t, pool, "a", time.Minute)
	owns := a.OwnsFunc()
	if err := a.acquire(ctxT(t), []string{"first"}); err != nil {
		t.Fatal(err)
	}
	if !a.Owns("first") || owns("first") {
		t.Fatalf("before the step: Owns %v, OwnsFunc %v; want true, false", a.Owns("first"), owns("first"))
	}
	if err := a.BeginStep(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if !owns("first") {
		t.Fatal("OwnsFunc false for a lease taken before the step")
	}
	if err := a.acquire(ctxT(t), []string{"second"}); err != nil { // during the step
		t.Fatal(err)
	}
	if owns("second") || !owns("first") {
		t.Fatalf("during the step: second %v, first %v; want false, true", owns("second"), owns("first"))
	}
	if err := a.BeginStep(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if !owns("second") {
		t.Fatal("OwnsFunc false at the next step")
	}
	if (*Cluster)(nil).OwnsFunc() != nil {
		t.Fatal("a nil Cluster's OwnsFunc is not nil (one instance steps everything)")
	}
}

// TestBeginStepAdoptsOperatorTokens: a step that begins right after an
// operator's write elsewhere (before any renewal) writes with the new
// token; a write refused for an advanced token makes Owns false at once.
func TestBeginStepAdoptsOperatorTokens(t *testing.T) {
	pool := openPool(t, newDB(t))
	holder := member(t, pool, "holder", time.Minute, "wf")
	tick(t, holder)
	other := member(t, pool, "other", time.Minute)
	operatorWrite := func() {
		t.Helper()
		if err := other.Operator(func() error { return write(ctxT(t), pool, other, "wf") }); err != nil {
			t.Fatal(err)
		}
	}
	operatorWrite()
	if err := holder.BeginStep(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := write(ctxT(t), pool, holder, "wf"); err != nil {
		t.Fatalf("the holder's write in the step after an operator's write: %v", err)
	}
	operatorWrite() // during the holder's step
	if err := write(ctxT(t), pool, holder, "wf"); !errors.Is(err, ErrFenced) {
		t.Fatalf("the holder's write after another operator's write: %v, want ErrFenced", err)
	}
	if holder.Owns("wf") || holder.OwnsFunc()("wf") {
		t.Fatal("Owns true after a write refused for an advanced token")
	}
	if err := holder.BeginStep(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if !holder.Owns("wf") {
		t.Fatal("the lease is not ours again at the next step")
	}
}

// TestStatusJSON: /healthz's "instance" has lists, never null, before the
// first tick too.
func TestStatusJSON(t *testing.T) {
	pool := openPool(t, newDB(t))
	c, err := New(pool, Options{ID: "x", Host: "h", Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(c.Status())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"x","host":"h","lease":"1s","live":[],"owned":[],"leaseRenewals":0,"takeOvers":0,"leasesLost":0,"fencedWrites":0}`
	if string(data) != want {
		t.Fatalf("status JSON\n got %s\nwant %s", data, want)
	}
}
