package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/schema/workflow"
)

// slaRig starts engines on one store, each with its own clock (set to
// the time of its steps) and the events they emit.
type slaRig struct {
	t    *testing.T
	wdir string
	svc  *fakeService
	mu   sync.Mutex
	sent []string // "engine kind@slot"
}

// slaEngine is one server run.
type slaEngine struct {
	r    *slaRig
	name string
	db   Store
	e    *Engine
	mu   sync.Mutex
	now  time.Time
}

// start starts an engine on db whose clock reads at until its first step.
func (r *slaRig) start(name, at string, db Store, owns func(string) bool) *slaEngine {
	r.t.Helper()
	se := &slaEngine{r: r, name: name, db: db, now: ts(at)}
	clock := func() time.Time { se.mu.Lock(); defer se.mu.Unlock(); return se.now }
	e, err := New(Options{WorkflowsDir: r.wdir, Store: db, Clock: clock, Logger: discard, Owns: owns,
		Services: map[string]external.Service{workflow.ServiceCommand: r.svc},
		OnEvent: func(ev scheduler.Event) {
			r.mu.Lock()
			r.sent = append(r.sent, name+" "+ev.Kind+"@"+ev.Slot.Format("02 15:04"))
			r.mu.Unlock()
		}})
	if err != nil {
		r.t.Fatal(err)
	}
	se.e = e
	return se
}

func (se *slaEngine) step(at string) {
	se.r.t.Helper()
	se.mu.Lock()
	se.now = ts(at)
	se.mu.Unlock()
	if rf, ok := se.db.(interface {
		Refresh(context.Context) (bool, error)
	}); ok {
		if _, err := rf.Refresh(context.Background()); err != nil {
			se.r.t.Fatal(err)
		}
	}
	if err := se.e.Step(context.Background(), ts(at), nil); err != nil {
		se.r.t.Fatal(err)
	}
}

// failThenStop starts an engine on db at 08:00 that steps slaWorkflow's
// 08:00 slot to FAILURE and makes its last step at 10:30, before the
// 3-hour SLA's deadline (11:00): then the server stops.
func (r *slaRig) failThenStop(name string, db Store) *slaEngine {
	r.t.Helper()
	a := r.start(name, "2026-11-24T08:00Z", db, nil)
	a.step("2026-11-24T08:10Z") // READY
	a.step("2026-11-24T08:11Z") // RUNNING
	r.svc.finishAll(false)
	a.step("2026-11-24T08:20Z") // FAILURE
	a.step("2026-11-24T10:30Z") // the last step before the stop
	return a
}

// wantNoResendOf0800 starts an engine on db at 12:30 (after the restart
// that sent the misses of 08:00) and fails if its step sends one again.
func (r *slaRig) wantNoResendOf0800(name string, db Store) {
	r.t.Helper()
	c := r.start(name, "2026-11-24T12:30Z", db, nil)
	c.step("2026-11-24T12:30Z")
	for _, m := range r.slaMisses() {
		if strings.Contains(m, "@24 08:00") {
			r.t.Fatalf("the miss of 08:00 was sent again after a second restart: %s", m)
		}
	}
}

// slaMisses returns and forgets the SLA misses sent so far.
func (r *slaRig) slaMisses() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var misses []string
	for _, s := range r.sent {
		if strings.Contains(s, workflow.EventSLAMissed) {
			misses = append(misses, s)
		}
	}
	r.sent = nil
	return misses
}

// slaWorkflow: hourly from 08:00, a 3-hour SLA, a target for every
// event; its 08:00 slot fails at once.
func slaWorkflow() workflow.Workflow {
	w := fixture.Hourly("feed")
	w.StartTime = ts("2026-11-24T08:00Z")
	w.SLA = &workflow.SLA{SuccessWithinSeconds: 3 * 3600}
	w.Notify = []workflow.Notification{{Type: workflow.NotifyWebhook, URL: "http://127.0.0.1:1/hook", Events: workflow.Events}}
	return w
}

// TestSLAMissWhileTheServerWasDownIsSent: the server stopped at 10:30 and
// started again at 12:00; the 08:00 slot's deadline (11:00) passed
// while it was down. The miss was noted but never sent ("its deadline
// passed before the engine started": taken as sent by the run before,
// which never saw it). It is sent now, once: a second restart does not
// send it again. On a database of an older celos (no record of the misses
// sent) a deadline before the start is still not sent.
func TestSLAMissWhileTheServerWasDownIsSent(t *testing.T) {
	r := &slaRig{t: t, wdir: t.TempDir(), svc: newFake()}
	fixture.WriteProject(t, r.wdir, "p", slaWorkflow())
	db := openDB(t, t.TempDir())
	r.failThenStop("first", db)
	if got := r.slaMisses(); len(got) != 0 {
		t.Fatalf("misses sent before the deadline: %v", got)
	}
	b := r.start("second", "2026-11-24T12:00Z", db, nil)
	b.step("2026-11-24T12:00Z")
	if got := r.slaMisses(); len(got) != 1 || got[0] != "second slaMissed@24 08:00" {
		t.Fatalf("after the restart: sent %v, want the miss of 08:00 (deadline 11:00, the server was down) once", got)
	}
	r.wantNoResendOf0800("third", db)
	v, err := db.GetRegister(slaBucket, slaKey(slot.ID{Workflow: "feed", Time: ts("2026-11-24T08:00Z")}))
	if err != nil || !strings.Contains(string(v), `"deadline":"2026-11-24T11:00:00.000Z"`) {
		t.Errorf("the record of the miss sent: %s, %v", v, err)
	}

	// A database of an older celos: no record of the misses sent. A
	// deadline before the start may have been sent by it: not sent.
	ddir := t.TempDir()
	old := openDB(t, ddir)
	r.failThenStop("older", old)
	if err := os.RemoveAll(filepath.Join(ddir, "register", slaBucket)); err != nil {
		t.Fatal(err)
	}
	upgraded := r.start("upgraded", "2026-11-24T12:00Z", old, nil)
	upgraded.step("2026-11-24T12:00Z")
	if got := r.slaMisses(); len(got) != 0 {
		t.Fatalf("on a database without records, sent %v: a deadline before the start may have been sent before", got)
	}
}

// TestSLAMissNotSentAgainAfterATakeOver: two instances on one PostgreSQL
// database. A sends the miss of 08:00 at 11:00:30; B, running since
// 08:00, takes the workflow over at 11:30. B sent the miss again (its
// engine started before the deadline and had noted nothing), under
// another delivery id, so a receiver that deduplicates could not tell.
func TestSLAMissNotSentAgainAfterATakeOver(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.CreateDB(t)
	r := &slaRig{t: t, wdir: t.TempDir(), svc: newFake()}
	fixture.WriteProject(t, r.wdir, "p", slaWorkflow())
	var owner atomic.Value
	owner.Store("A")
	open := func(id string) Store {
		db, err := statepg.Open(context.Background(), dsn, statepg.Options{Fence: ownerFence{id, &owner}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	a := r.start("A", "2026-11-24T08:00Z", open("A"), func(string) bool { return owner.Load() == "A" })
	b := r.start("B", "2026-11-24T08:00Z", open("B"), func(string) bool { return owner.Load() == "B" })
	a.step("2026-11-24T08:10Z")
	a.step("2026-11-24T08:11Z")
	r.svc.finishAll(false)
	a.step("2026-11-24T08:20Z") // FAILURE
	b.step("2026-11-24T08:20Z") // B steps too, owning nothing
	a.step("2026-11-24T11:00:30Z")
	if got := r.slaMisses(); len(got) != 1 || got[0] != "A slaMissed@24 08:00" {
		t.Fatalf("A sent %v, want the miss of 08:00", got)
	}
	owner.Store("B")
	b.step("2026-11-24T11:30Z")
	b.step("2026-11-24T11:31Z")
	for _, m := range r.slaMisses() {
		if strings.Contains(m, "@24 08:00") {
			t.Fatalf("the miss of 08:00 was sent again by the instance that took the workflow over: %s", m)
		}
	}
	if st := b.e.Problems("feed"); !hasOp(st, opSLA) {
		t.Errorf("B does not show the miss of 08:00: %+v", st)
	}
}

func hasOp(ps []scheduler.Problem, op string) bool {
	for _, p := range ps {
		if p.Op == op {
			return true
		}
	}
	return false
}

// TestSLALongerThanTheWindow: a daily workflow whose slots must succeed
// within 8 days (vet accepts up to 100 years). Its 1 November slot failed
// at once and left the 7-day window before its deadline: the miss was
// never noted nor sent, whatever the steps. It is now, at the first step
// after the deadline, once, also when that step comes after a restart.
func TestSLALongerThanTheWindow(t *testing.T) {
	r := dailySLARig(t, 8*86400)
	db := openDB(t, t.TempDir())
	a := r.start("a", "2026-11-01T00:00Z", db, nil)
	a.step("2026-11-01T00:10Z") // READY
	a.step("2026-11-01T00:11Z") // RUNNING
	r.svc.finishAll(false)
	a.step("2026-11-01T00:20Z") // FAILURE
	for d := 2; d <= 8; d++ {   // every slot fails
		a.step(fmt.Sprintf("2026-11-%02dT12:00Z", d))
		r.svc.finishAll(false)
	}
	a.step("2026-11-09T00:00Z")
	if got := r.slaMisses(); len(got) != 0 {
		t.Fatalf("sent %v before the deadline of 1 November (9 November 00:00)", got)
	}
	a.step("2026-11-09T00:00:01Z")
	if got := r.slaMisses(); len(got) != 1 || got[0] != "a slaMissed@01 00:00" {
		t.Fatalf("sent %v after the deadline of the slot of 1 November, want its miss once", got)
	}
	if !hasOp(a.e.Problems("feed"), opSLA) {
		t.Errorf("the miss is not shown: %+v", a.e.Problems("feed"))
	}
	a.step("2026-11-09T01:00Z")
	// The slot of 2 November failed too; the server is down when its
	// deadline passes, and sends its miss at its first step after.
	if st, _, _ := db.Get(slot.ID{Workflow: "feed", Time: ts("2026-11-02T00:00Z")}); st.Status != slot.Failure {
		t.Fatalf("the slot of 2 November is %s, want FAILURE", st.Status)
	}
	b := r.start("b", "2026-11-10T06:00Z", db, nil)
	b.step("2026-11-10T06:00Z")
	b.step("2026-11-10T07:00Z")
	got := r.slaMisses()
	if len(got) != 1 || got[0] != "b slaMissed@02 00:00" {
		t.Fatalf("after a restart: sent %v, want the miss of 2 November only", got)
	}
}

// TestSLALongerThanTheWindowAfterAPrune: a slot of a workflow with an SLA
// longer than the window that has no record when its deadline passes may
// have been pruned after it succeeded (a prune keeps 8 days): no miss is
// noted for it. One that never had a record (it waited) and is within 8
// days of its slot time cannot have been pruned: its miss is sent.
func TestSLALongerThanTheWindowAfterAPrune(t *testing.T) {
	r := dailySLARig(t, 10*86400)
	ddir := t.TempDir()
	db := openDB(t, ddir)
	a := r.start("a", "2026-11-01T00:00Z", db, nil)
	a.step("2026-11-01T00:10Z")
	a.step("2026-11-01T00:11Z")
	r.svc.finishAll(true)
	a.step("2026-11-01T00:20Z") // SUCCESS
	if st, _, _ := db.Get(slot.ID{Workflow: "feed", Time: ts("2026-11-01T00:00Z")}); st.Status != slot.Success {
		t.Fatalf("1 November is %s, want SUCCESS", st.Status)
	}
	// Pruned (what a prune of final slots older than 8 days deletes).
	if err := os.Remove(filepath.Join(ddir, "state", "feed", "2026-11-01", "00:00:00.000Z")); err != nil {
		t.Fatal(err)
	}
	db.Close() // (a restart: the store reads the directory again)
	db = openDB(t, ddir)
	b := r.start("b", "2026-11-11T00:00:01Z", db, nil)
	b.step("2026-11-11T00:00:01Z")
	b.step("2026-11-11T01:00Z")
	for _, m := range r.slaMisses() {
		if strings.Contains(m, "@01 00:00") {
			t.Fatalf("a miss was sent for the pruned slot of 1 November, which succeeded: %s", m)
		}
	}
}

// TestSLALongerThanTheWindowOfASlotThatWaited: a slot whose trigger was
// never ready has no record; with an SLA of 7.5 days its deadline comes
// before any prune may remove a record (8 days): its miss is sent.
func TestSLALongerThanTheWindowOfASlotThatWaited(t *testing.T) {
	r := dailySLARig(t, 7*86400+12*3600, func(w *workflow.Workflow) {
		w.Trigger = workflow.Trigger{Type: workflow.TriggerNot, Trigger: &workflow.Trigger{Type: workflow.TriggerAlways}}
	})
	db := openDB(t, t.TempDir())
	a := r.start("a", "2026-11-01T00:00Z", db, nil)
	for d := 1; d <= 8; d++ {
		a.step(fmt.Sprintf("2026-11-%02dT06:00Z", d))
	}
	if got := r.slaMisses(); len(got) != 0 {
		t.Fatalf("sent %v before the deadline of 1 November (8 November 12:00)", got)
	}
	a.step("2026-11-08T12:00:01Z")
	if got := r.slaMisses(); len(got) != 1 || got[0] != "a slaMissed@01 00:00" {
		t.Fatalf("sent %v, want the miss of the slot of 1 November, which waited", got)
	}
}

// TestSLALongerThanTheWindowSentOnceAcrossRestarts: a miss of an SLA of
// 10 days sent, then a restart 5 days later: the record of the miss is
// kept (its slot is 15 days old, beyond the 14 days the records of
// shorter SLAs are kept) and the miss is not sent again.
func TestSLALongerThanTheWindowSentOnceAcrossRestarts(t *testing.T) {
	r := dailySLARig(t, 10*86400)
	db := openDB(t, t.TempDir())
	a := r.start("a", "2026-11-01T00:00Z", db, nil)
	a.step("2026-11-01T00:10Z")
	a.step("2026-11-01T00:11Z")
	r.svc.finishAll(false)
	a.step("2026-11-01T00:20Z") // FAILURE
	a.step("2026-11-11T00:00:01Z")
	if got := r.slaMisses(); len(got) != 1 || got[0] != "a slaMissed@01 00:00" {
		t.Fatalf("sent %v, want the miss of 1 November", got)
	}
	b := r.start("b", "2026-11-16T00:00Z", db, nil)
	b.step("2026-11-16T00:00Z")
	for _, m := range r.slaMisses() {
		if strings.Contains(m, "@01 00:00") {
			t.Fatalf("the miss of 1 November was sent again after a restart: %s", m)
		}
	}
}

// dailySLARig is a rig of slaWorkflow made daily from 1 November 2026,
// with an SLA of success within seconds, edited by edit.
func dailySLARig(t *testing.T, within int64, edit ...func(*workflow.Workflow)) *slaRig {
	w := slaWorkflow()
	w.Schedule.Cron = "0 0 0 * * ?"
	w.StartTime = ts("2026-11-01T00:00Z")
	w.SLA.SuccessWithinSeconds = within
	for _, e := range edit {
		e(&w)
	}
	r := &slaRig{t: t, wdir: t.TempDir(), svc: newFake()}
	fixture.WriteProject(t, r.wdir, "p", w)
	return r
}

// slaListingDB is the file store counting the listings of the SLA
// records' bucket.
type slaListingDB struct {
	*statedb.DB
	listings atomic.Int64
}

func (d *slaListingDB) RegisterKeys(bucket, prefix string) ([]string, error) {
	if bucket == slaBucket {
		d.listings.Add(1)
	}
	return d.DB.RegisterKeys(bucket, prefix)
}

// TestSLARecordsListedOncePerStep: after a restart, every workflow whose
// SLA deadline has passed asks whether its miss was sent. Each asked with
// a listing of the bucket (on the file store a read of the whole register
// directory, which holds every workflow's records): 10,000 workflows
// missing their SLA in an outage listed a 10,000-entry directory 10,000
// times in the first step. The step lists it once, and sends each miss
// once.
func TestSLARecordsListedOncePerStep(t *testing.T) {
	const n = 30
	r := &slaRig{t: t, wdir: t.TempDir(), svc: newFake()}
	var ws []workflow.Workflow
	for i := range n {
		w := slaWorkflow()
		w.ID = fmt.Sprintf("feed%02d", i)
		ws = append(ws, w)
	}
	fixture.WriteProject(t, r.wdir, "p", ws...)
	db := &slaListingDB{DB: openDB(t, t.TempDir())}
	r.failThenStop("first", db)
	b := r.start("second", "2026-11-24T12:00Z", db, nil)
	db.listings.Store(0)
	b.step("2026-11-24T12:00Z")
	if got := db.listings.Load(); got != 1 {
		t.Errorf("the step after the restart listed the SLA records %d times, want 1 (one step, %d workflows)", got, n)
	}
	if got := r.slaMisses(); len(got) != n {
		t.Fatalf("sent %d misses, want %d: %v", len(got), n, got)
	}
	r.wantNoResendOf0800("third", db)
}
