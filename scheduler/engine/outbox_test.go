package engine

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/schema/workflow"
)

// outboxEngine is an engine with its outbox on and the deliveries its
// events carried ("kind delivery-id").
type outboxEngine struct {
	e   *Engine
	db  Store
	mu  sync.Mutex
	got []string
	now time.Time // its clock: the time of its last step (at first, of its start)
}

func startOutboxEngine(t *testing.T, wdir, at string, svc external.Service, db Store, owns func(string) bool, o OutboxOptions) *outboxEngine {
	t.Helper()
	oe := &outboxEngine{db: db, now: ts(at)}
	clock := func() time.Time { oe.mu.Lock(); defer oe.mu.Unlock(); return oe.now }
	e, err := New(Options{WorkflowsDir: wdir, Store: db, Logger: discard, Owns: owns, Clock: clock,
		Services: map[string]external.Service{workflow.ServiceCommand: svc},
		OnEvent: func(ev scheduler.Event) {
			oe.mu.Lock()
			defer oe.mu.Unlock()
			for _, id := range ev.Deliveries {
				oe.got = append(oe.got, ev.Kind+" "+id)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	e.EnableOutbox(o)
	oe.e = e
	return oe
}

func (oe *outboxEngine) step(t *testing.T, at string) {
	t.Helper()
	if rf, ok := oe.db.(interface {
		Refresh(context.Context) (bool, error)
	}); ok {
		if _, err := rf.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	oe.mu.Lock()
	oe.now = ts(at)
	oe.mu.Unlock()
	if err := oe.e.Step(context.Background(), ts(at), nil); err != nil {
		t.Fatal(err)
	}
}

// taken returns and forgets the deliveries handed out so far.
func (oe *outboxEngine) taken() []string {
	oe.mu.Lock()
	defer oe.mu.Unlock()
	got := oe.got
	oe.got = nil
	return got
}

func outboxKeys(t *testing.T, regs Registers) []string {
	t.Helper()
	keys, err := regs.RegisterKeys(outboxBucket, "")
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// feedOnFailure writes, in a new workflows directory, the project of
// feed: hourly from 2026-11-24T08:00Z, a webhook for its failures (to a
// port nobody listens on: the tests hand deliveries out, they do not
// post them).
func feedOnFailure(t *testing.T) (wdir string) {
	t.Helper()
	wdir = t.TempDir()
	w := fixture.Hourly("feed")
	w.StartTime = ts("2026-11-24T08:00Z")
	w.Notify = []workflow.Notification{{Type: workflow.NotifyWebhook, URL: "http://127.0.0.1:1/hook", Events: []string{workflow.EventFailure}}}
	fixture.WriteProject(t, wdir, "p", w)
	return wdir
}

// pgPair is two engines, A and B, with their outboxes on, on one new
// PostgreSQL database, stepping feedOnFailure's project; the workflows
// are owner's ("A" at first), each store fenced by it.
type pgPair struct {
	wdir  string
	a, b  *outboxEngine
	svc   *fakeService
	owner *atomic.Value
}

func newPGPair(t *testing.T, oa, ob OutboxOptions) *pgPair {
	t.Helper()
	dsn := pgtest.Shared(t).CreateDB(t)
	p := &pgPair{wdir: feedOnFailure(t), svc: newFake(), owner: &atomic.Value{}}
	p.owner.Store("A")
	open := func(id string) Store {
		db, err := statepg.Open(context.Background(), dsn, statepg.Options{Fence: ownerFence{id, p.owner}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	p.a = startOutboxEngine(t, p.wdir, "2026-11-24T08:00Z", p.svc, open("A"), func(string) bool { return p.owner.Load() == "A" }, oa)
	p.b = startOutboxEngine(t, p.wdir, "2026-11-24T08:00Z", p.svc, open("B"), func(string) bool { return p.owner.Load() == "B" }, ob)
	return p
}

// failOn steps feed's 08:00 slot on oe to READY, RUNNING and FAILURE at
// the three times given and returns what it handed out: one failure.
func failOn(t *testing.T, oe *outboxEngine, svc *fakeService, ready, running, failed string) []string {
	t.Helper()
	oe.step(t, ready)
	oe.step(t, running)
	svc.finishAll(false)
	oe.step(t, failed)
	sent := oe.taken()
	if len(sent) != 1 {
		t.Fatalf("handed out %q, want one failure", sent)
	}
	return sent
}

// TestOutboxTakenOverByTheNewOwner: two instances on one PostgreSQL
// database. A steps feed's 08:00 slot to FAILURE and dies before its
// sender delivers (nothing reports the delivery finished). B, stepping
// beside A, leaves the delivery alone while A owns the workflow; at its
// first step after taking feed over it hands the delivery out under the
// same id; A, if still alive, no longer counts itself the sender (Mine:
// its sender releases the delivery instead of attempting it), so two live
// instances do not send it at once. Once B's sender finishes it, the
// record is gone.
func TestOutboxTakenOverByTheNewOwner(t *testing.T) {
	p := newPGPair(t, OutboxOptions{}, OutboxOptions{})
	a, b, svc, owner := p.a, p.b, p.svc, p.owner
	sent := failOn(t, a, svc, "2026-11-24T08:10Z", "2026-11-24T08:11Z", "2026-11-24T08:20Z")
	b.step(t, "2026-11-24T08:21Z")
	if got := b.taken(); len(got) != 0 {
		t.Fatalf("B handed out %q while A owns the workflow", got)
	}
	if !a.e.Mine("feed") || b.e.Mine("feed") {
		t.Fatalf("before the take-over: A's Mine %v, B's %v", a.e.Mine("feed"), b.e.Mine("feed"))
	}
	owner.Store("B")
	b.step(t, "2026-11-24T08:22Z")
	if diff := cmp.Diff(sent, b.taken()); diff != "" {
		t.Fatalf("B's first step after the take-over handed out (-A's +B's):\n%s", diff)
	}
	if a.e.Mine("feed") {
		t.Error("A, which lost the workflow, still counts itself its sender")
	}
	b.step(t, "2026-11-24T08:23Z")
	if got := b.taken(); len(got) != 0 {
		t.Fatalf("B handed out %q again while its sender holds it", got)
	}
	regs := b.db.(Registers)
	if keys := outboxKeys(t, regs); len(keys) != 1 {
		t.Fatalf("outbox %q, want the one delivery", keys)
	}
	b.e.Finished("feed", strings.TrimPrefix(sent[0], "failure "))
	if keys := outboxKeys(t, regs); len(keys) != 0 {
		t.Fatalf("outbox %q after the delivery finished", keys)
	}
}

// TestOutboxBounds: on the file store, deliveries nothing finishes (a
// target down for good, the sender released them) are dropped beyond
// MaxEntries (the oldest) and when older than MaxAge, counted by OnDrop
// per event and removed from the store; a released delivery within the
// bounds is handed out again at the next scan.
func TestOutboxBounds(t *testing.T) {
	wdir := feedOnFailure(t)
	db := openDB(t, t.TempDir())
	var mu sync.Mutex
	dropped := map[string]int{}
	svc := newFake()
	var clock atomic.Value
	clock.Store(ts("2026-11-24T08:00Z"))
	oe := &outboxEngine{db: db}
	e, err := New(Options{WorkflowsDir: wdir, Store: db, Logger: discard, Clock: func() time.Time { return clock.Load().(time.Time) },
		Services: map[string]external.Service{workflow.ServiceCommand: svc},
		OnEvent: func(ev scheduler.Event) {
			oe.mu.Lock()
			oe.got = append(oe.got, ev.Deliveries...)
			oe.mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	oe.e = e
	e.EnableOutbox(OutboxOptions{MaxEntries: 2, MaxAge: 3 * time.Hour, OnDrop: func(ev string) {
		mu.Lock()
		dropped[ev]++
		mu.Unlock()
	}})
	// Three slots fail, an hour apart; their deliveries are released.
	var ids []string
	for h := 8; h <= 10; h++ {
		at := func(m int) string { return time.Date(2026, 11, 24, h, m, 0, 0, time.UTC).Format(time.RFC3339) }
		clock.Store(ts(at(10)))
		oe.step(t, at(10))
		oe.step(t, at(11))
		svc.finishAll(false)
		oe.step(t, at(20))
		// (A scan a minute on hands the earlier ones out again.)
		var fresh []string
		for _, id := range oe.taken() {
			if !slices.Contains(ids, id) {
				fresh = append(fresh, id)
			}
			e.Released(id)
		}
		if len(fresh) != 1 {
			t.Fatalf("%s: new deliveries %q, want one failure", at(20), fresh)
		}
		ids = append(ids, fresh[0])
	}
	// The next scan (a minute on): the oldest of the three goes (two
	// kept); the other two are handed out again.
	clock.Store(ts("2026-11-24T10:22Z"))
	oe.step(t, "2026-11-24T10:22Z")
	if diff := cmp.Diff(map[string]int{workflow.EventFailure: 1}, dropped); diff != "" {
		t.Errorf("dropped (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{ids[2], ids[1]}, oe.taken()); diff != "" {
		t.Errorf("handed out again (-want +got):\n%s", diff)
	}
	e.Released(ids[1])
	e.Released(ids[2])
	// At 12:25 the one of 09:20 is older than 3 hours: dropped.
	clock.Store(ts("2026-11-24T12:25Z"))
	oe.step(t, "2026-11-24T12:25Z")
	if diff := cmp.Diff(map[string]int{workflow.EventFailure: 2}, dropped); diff != "" {
		t.Errorf("dropped (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{ids[2]}, oe.taken()); diff != "" {
		t.Errorf("handed out again (-want +got):\n%s", diff)
	}
	if keys := outboxKeys(t, db); len(keys) != 1 {
		t.Errorf("outbox %q, want the delivery of 10:20", keys)
	}
}

// TestSLAMissSentAgainUnderTheSameID: a kill between the outbox's record
// of an SLA miss's delivery and the record of the miss sent (both written
// before the step's states) leaves the delivery and no record: after the
// restart the outbox sends the delivery and the step, finding no record,
// sends the miss again. Both carry the same delivery id, so the receiver
// deduplicates (before, the second had a new id).
func TestSLAMissSentAgainUnderTheSameID(t *testing.T) {
	wdir := t.TempDir()
	w := slaWorkflow()
	w.Notify[0].Events = []string{workflow.EventSLAMissed}
	fixture.WriteProject(t, wdir, "p", w)
	db := openDB(t, t.TempDir())
	svc := newFake()
	a := startOutboxEngine(t, wdir, "2026-11-24T08:00Z", svc, db, nil, OutboxOptions{})
	a.step(t, "2026-11-24T08:10Z") // READY
	a.step(t, "2026-11-24T08:11Z") // RUNNING
	svc.finishAll(false)
	a.step(t, "2026-11-24T08:20Z")    // FAILURE
	a.step(t, "2026-11-24T11:00:30Z") // the miss of 08:00
	sent := a.taken()
	if len(sent) != 1 || !strings.HasPrefix(sent[0], workflow.EventSLAMissed) {
		t.Fatalf("handed out %q, want the miss of 08:00", sent)
	}
	// The kill: the record of the miss sent was not written.
	keys, err := db.RegisterKeys(slaBucket, slaPrefix("feed"))
	if err != nil || len(keys) != 1 {
		t.Fatalf("records of the misses sent %q (%v), want one", keys, err)
	}
	if err := db.DeleteRegister(slaBucket, keys[0]); err != nil {
		t.Fatal(err)
	}
	b := startOutboxEngine(t, wdir, "2026-11-24T11:01Z", svc, db, nil, OutboxOptions{})
	b.step(t, "2026-11-24T11:01Z")
	again := b.taken()
	if len(again) != 2 {
		t.Fatalf("after the restart: handed out %q, want the outbox's delivery and the miss sent again", again)
	}
	for _, s := range again {
		if s != sent[0] {
			t.Errorf("after the restart: %q, want %q (the same delivery id)", s, sent[0])
		}
	}
}

// TestOutboxReleasedDeliverySurvivesARerun: a failure's delivery the
// sender released at a stop (its target was down) is sent after the
// restart even though the operator reran the slot meanwhile: the release
// marked its record recorded, so it is not mistaken for the record of a
// state a kill left unwritten (whose slot's state is not the event's).
func TestOutboxReleasedDeliverySurvivesARerun(t *testing.T) {
	wdir := feedOnFailure(t)
	db := openDB(t, t.TempDir())
	svc := newFake()
	a := startOutboxEngine(t, wdir, "2026-11-24T08:00Z", svc, db, nil, OutboxOptions{})
	sent := failOn(t, a, svc, "2026-11-24T08:10Z", "2026-11-24T08:11Z", "2026-11-24T08:20Z")
	a.e.Released(strings.TrimPrefix(sent[0], "failure "))
	if err := a.e.Rerun(context.Background(), slot.ID{Workflow: "feed", Time: ts("2026-11-24T08:00Z")}, ts("2026-11-24T08:25Z")); err != nil {
		t.Fatal(err)
	}
	b := startOutboxEngine(t, wdir, "2026-11-24T08:30Z", svc, db, nil, OutboxOptions{})
	b.step(t, "2026-11-24T08:30Z")
	if diff := cmp.Diff(sent, b.taken()); diff != "" {
		t.Errorf("after the rerun and the restart, handed out (-want +got):\n%s", diff)
	}
}

// slowDeleteDB is the file store whose first removal of an outbox record
// waits for release, after saying so on deleting.
type slowDeleteDB struct {
	*statedb.DB
	once     sync.Once
	deleting chan struct{}
	release  chan struct{}
}

func (d *slowDeleteDB) DeleteRegister(bucket, key string) error {
	if bucket == outboxBucket {
		d.once.Do(func() {
			close(d.deleting)
			<-d.release
		})
	}
	return d.DB.DeleteRegister(bucket, key)
}

// TestOutboxFinishedIsNotOfferedAgainWhileItsRecordGoes: Finished forgot
// the delivery before it removed its record, so a scan of the outbox in
// between (the once-a-minute one, in the step) found a record that no
// delivery held and handed it out again: delivered twice by one instance.
func TestOutboxFinishedIsNotOfferedAgainWhileItsRecordGoes(t *testing.T) {
	wdir := feedOnFailure(t)
	db := &slowDeleteDB{DB: openDB(t, t.TempDir()), deleting: make(chan struct{}), release: make(chan struct{})}
	svc := newFake()
	a := startOutboxEngine(t, wdir, "2026-11-24T08:00Z", svc, db, nil, OutboxOptions{})
	sent := failOn(t, a, svc, "2026-11-24T08:10Z", "2026-11-24T08:11Z", "2026-11-24T08:20Z")
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.e.Finished("feed", strings.TrimPrefix(sent[0], "failure "))
	}()
	<-db.deleting
	a.step(t, "2026-11-24T08:25Z") // the outbox is scanned again (5 minutes on)
	close(db.release)
	<-done
	if got := a.taken(); len(got) != 0 {
		t.Errorf("a delivery being finished was handed out again: %q", got)
	}
	if keys := outboxKeys(t, db); len(keys) != 0 {
		t.Errorf("outbox after Finished: %q", keys)
	}
}
