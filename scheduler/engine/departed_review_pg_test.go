package engine

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/schema/workflow"
)

// departedRig is two instances A (owns a) and B (owns b) on one
// PostgreSQL database sharing a workflows directory and pool "etl" of
// limit 1; step refreshes an instance's view of the database first
// unless told not to (an instance sees the others' writes only at its
// next refresh, every lease/3).
type departedRig struct {
	t      *testing.T
	ctx    context.Context
	dsn    string
	wdirs  []string // each instance's view of the workflows directory
	pools  string
	owner  map[string]int
	svc    *poolService
	count  *statepg.DB
	now    time.Time
	start  time.Time
	insts  []*departedInst
	log    *slog.Logger // the instances' logger (nil: none)
	counts func() (int, error)
}

type departedInst struct {
	db *statepg.DB
	e  *Engine
}

func newDepartedRig(t *testing.T) *departedRig {
	t.Helper()
	srv := pgtest.Shared(t)
	r := &departedRig{t: t, ctx: context.Background(), dsn: srv.CreateDB(t), owner: map[string]int{"a": 0, "b": 1},
		now: ts("2026-11-24T09:30:00.000Z"), start: ts("2026-11-24T09:00:00.000Z")}
	var wdir string
	wdir, r.pools = poolOfTwo(t)
	r.wdirs = []string{wdir, wdir}
	var err error
	r.count, err = statepg.Open(r.ctx, r.dsn, statepg.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.count.Close() })
	occupied := func() (int, error) {
		ids, err := r.count.PoolOccupied([]string{"a", "b"})
		return len(ids), err
	}
	r.svc = &poolService{limit: 1, occupied: occupied, live: make(map[string]slot.ID), done: make(map[string]bool)}
	return r
}

func (r *departedRig) open(i int) *departedInst {
	r.t.Helper()
	db, err := statepg.Open(r.ctx, r.dsn, statepg.Options{})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { db.Close() })
	log := discard
	if r.log != nil {
		log = r.log
	}
	e, err := New(Options{WorkflowsDir: r.wdirs[i], Store: db, Logger: log, PoolsFile: r.pools,
		Owns:     func(wf string) bool { return r.owner[wf] == i },
		Services: map[string]external.Service{workflow.ServiceCommand: r.svc}})
	if err != nil {
		r.t.Fatal(err)
	}
	return &departedInst{db: db, e: e}
}

func (r *departedRig) step(i int, refresh bool) {
	r.t.Helper()
	in := r.insts[i]
	if refresh {
		if _, err := in.db.Refresh(r.ctx); err != nil {
			r.t.Fatal(err)
		}
	}
	r.now = r.now.Add(time.Minute)
	if err := in.e.Step(r.ctx, r.now, nil); err != nil {
		r.t.Fatal(err)
	}
}

func (r *departedRig) status(wf string, at time.Time) slot.Status {
	r.t.Helper()
	if _, err := r.count.Refresh(r.ctx); err != nil {
		r.t.Fatal(err)
	}
	st, _, err := r.count.Get(slot.ID{Workflow: wf, Time: at})
	if err != nil {
		r.t.Fatal(err)
	}
	return st.Status
}

func (r *departedRig) violations() {
	r.t.Helper()
	r.svc.mu.Lock()
	defer r.svc.mu.Unlock()
	for _, v := range r.svc.violations {
		r.t.Error(v)
	}
}

// undeployA leaves only b (hourly, pool etl) in the workflows directory
// dir.
func (r *departedRig) undeployA(dir string) {
	w := fixture.Hourly("b")
	w.StartTime, w.Pool = r.start, "etl"
	fixture.WriteProject(r.t, dir, "p", w)
}

// TestDepartureNotedByTheOtherInstanceLater: the instances' reloads see
// an undeploy at different moments (each reads the workflows directory
// at its own step): B reloads the configuration without a while a's slot
// is still READY (A, whose step began before the undeploy, submits it
// after), so B notes no departure of its own, and A records a's
// departure at its next step. B must learn A's record at a later step:
// otherwise B's admission, and the store's (PoolClaim.Slots comes from
// the asking instance), count nothing for a's running job, and b runs
// beside it in a pool of 1.
func TestDepartureNotedByTheOtherInstanceLater(t *testing.T) {
	r := newDepartedRig(t)
	r.wdirs[1], _ = poolOfTwo(t) // B's copy of the directory: a and b
	r.insts = []*departedInst{r.open(0), r.open(1)}
	r.undeployA(r.wdirs[1])
	r.step(1, true) // B reloads without a, which has no RUNNING slot: nothing to note
	r.step(0, true) // WAITING → READY
	r.step(0, true) // A, which still has a, submits its slot
	if got := r.status("a", r.start); got != slot.Running {
		t.Fatalf("a's slot is %s, want RUNNING", got)
	}
	r.undeployA(r.wdirs[0])
	r.step(0, true) // A notes the departure
	r.step(1, true)
	r.step(1, true)
	if got := r.status("b", r.start); got != slot.Ready {
		t.Errorf("b's slot is %s while undeployed a's job runs (pool limit 1), want READY", got)
	}
	r.svc.finishSome(rand.New(rand.NewPCG(1, 2))) // a's job ends
	r.step(0, true)
	r.step(1, true)
	if got := r.status("b", r.start); got != slot.Running {
		t.Errorf("b's slot is %s once a's job ended, want RUNNING", got)
	}
	r.violations()
}

// lockedBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestDepartedRecordUnreadableLoggedOnceInACluster: an instance of a
// cluster reads the departures at every step; a record that is not the
// engine's is logged once, not at every step, and again once it is
// written anew after it was gone.
func TestDepartedRecordUnreadableLoggedOnceInACluster(t *testing.T) {
	r := newDepartedRig(t)
	var out lockedBuffer
	r.log = slog.New(slog.NewTextHandler(&out, nil))
	r.insts = []*departedInst{r.open(0), r.open(1)}
	if err := r.count.PutRegister(departedBucket, "notjson", []byte(`"just a string"`)); err != nil {
		t.Fatal(err)
	}
	count := func() int { return strings.Count(out.String(), "a record of the store is unreadable") }
	for range 4 {
		r.step(1, true)
	}
	if n := count(); n != 1 {
		t.Errorf("the unreadable record was logged %d times in 4 steps, want once:\n%s", n, out.String())
	}
	if err := r.count.DeleteRegister(departedBucket, "notjson"); err != nil {
		t.Fatal(err)
	}
	r.step(1, true)
	if err := r.count.PutRegister(departedBucket, "notjson", []byte(`3`)); err != nil {
		t.Fatal(err)
	}
	r.step(1, true)
	r.step(1, true)
	if n := count(); n != 2 {
		t.Errorf("the record written anew: logged %d times in all, want 2", n)
	}
}

// TestDepartureTakenOverByTheOtherInstance: as above, B reloads without a
// before a's slot runs and A records a's departure later; then A stops and
// B takes a's lease over. B polls a's job (it knows the departure from
// A's record) and records its end: a's slot is not left RUNNING for ever,
// and B offers a to the cluster's leases meanwhile.
func TestDepartureTakenOverByTheOtherInstance(t *testing.T) {
	r := newDepartedRig(t)
	r.wdirs[1], _ = poolOfTwo(t)
	r.insts = []*departedInst{r.open(0), r.open(1)}
	r.undeployA(r.wdirs[1])
	r.step(1, true) // B reloads without a, which has no RUNNING slot: nothing to note
	r.step(0, true) // WAITING → READY
	r.step(0, true) // A, which still has a, submits its slot
	r.undeployA(r.wdirs[0])
	r.step(0, true)  // A notes the departure
	r.owner["a"] = 1 // A stops; B holds a's lease
	r.step(1, true)
	if d := cmp.Diff([]string{"a", "b"}, r.insts[1].e.LeasedIDs()); d != "" {
		t.Errorf("B's workflows to lease (-want +got):\n%s", d)
	}
	r.svc.finishSome(rand.New(rand.NewPCG(1, 2))) // a's job ends
	r.step(1, true)
	if got := r.status("a", r.start); got != slot.Success {
		t.Errorf("a's slot is %s after its job ended and B took a over, want SUCCESS", got)
	}
	r.violations()
}
