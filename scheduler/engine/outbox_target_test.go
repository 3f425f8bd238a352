package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

// handed is a delivery an engine handed to OnEvent, with its target.
type handed struct {
	Kind, ID, URL, Secret string
}

// targetEngine is an engine with its outbox on that keeps the targets
// of the deliveries it hands out, and counts the outbox's drops.
type targetEngine struct {
	e       *Engine
	db      Store
	mu      sync.Mutex
	now     time.Time
	got     []handed
	dropped map[string]int
}

// failedOnce starts an engine on the workflows of wdir and db, runs the
// 08:00 slot of feed to FAILURE, and returns the engine, its service and
// the failure's deliveries handed out: n of them (one per target), or the
// test fails.
func failedOnce(t *testing.T, wdir string, db Store, n int) (*targetEngine, *fakeService, []handed) {
	t.Helper()
	svc := newFake()
	x := startTargetEngine(t, wdir, "2026-11-24T08:00Z", svc, db)
	x.step(t, "2026-11-24T08:10Z")
	x.step(t, "2026-11-24T08:11Z")
	svc.finishAll(false)
	x.step(t, "2026-11-24T08:20Z")
	sent := x.taken()
	if len(sent) != n {
		t.Fatalf("handed out %+v, want %d failures, one for each target", sent, n)
	}
	return x, svc, sent
}

func startTargetEngine(t *testing.T, wdir, at string, svc external.Service, db Store) *targetEngine {
	t.Helper()
	te := &targetEngine{db: db, now: ts(at), dropped: map[string]int{}}
	clock := func() time.Time { te.mu.Lock(); defer te.mu.Unlock(); return te.now }
	e, err := New(Options{WorkflowsDir: wdir, Store: db, Logger: discard, Clock: clock,
		Services: map[string]external.Service{workflow.ServiceCommand: svc},
		OnEvent: func(ev scheduler.Event) {
			te.mu.Lock()
			defer te.mu.Unlock()
			for i, id := range ev.Deliveries {
				te.got = append(te.got, handed{ev.Kind, id, ev.Targets[i].URL, ev.Targets[i].SecretFile})
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	e.EnableOutbox(OutboxOptions{OnDrop: func(ev string) {
		te.mu.Lock()
		te.dropped[ev]++
		te.mu.Unlock()
	}})
	te.e = e
	return te
}

func (te *targetEngine) step(t *testing.T, at string) {
	t.Helper()
	te.mu.Lock()
	te.now = ts(at)
	te.mu.Unlock()
	if err := te.e.Step(t.Context(), ts(at), nil); err != nil {
		t.Fatal(err)
	}
}

// taken returns and forgets the deliveries handed out so far, sorted.
func (te *targetEngine) taken() []handed {
	te.mu.Lock()
	defer te.mu.Unlock()
	got := te.got
	te.got = nil
	sort.Slice(got, func(i, j int) bool { return got[i].ID < got[j].ID })
	return got
}

func (te *targetEngine) drops() map[string]int {
	te.mu.Lock()
	defer te.mu.Unlock()
	return te.dropped
}

func hook(url, secret string, events ...string) workflow.Notification {
	return workflow.Notification{Type: workflow.NotifyWebhook, URL: url, SecretFile: secret, Events: events}
}

// feedNotifying writes feed (hourly from 08:00, a 3-hour SLA) with the
// targets given, and other workflows, as the project of wdir.
func feedNotifying(t *testing.T, wdir string, targets []workflow.Notification, others ...workflow.Workflow) {
	t.Helper()
	var wfs []workflow.Workflow
	if targets != nil {
		w := slaWorkflow()
		w.Notify = targets
		wfs = append(wfs, w)
	}
	fixture.WriteProject(t, wdir, "p", append(wfs, others...)...)
}

// TestSLAMissToTwoTargetsWithOneURL: two targets of one URL (another
// secret, other events) each get the SLA miss under its own delivery id
// and its own outbox record, and each gets it again after a restart
// (before: both had the id of the URL, one record was written, the last,
// and the other target's delivery was lost to a stop).
func TestSLAMissToTwoTargetsWithOneURL(t *testing.T) {
	const u = "http://127.0.0.1:1/hook"
	wdir := t.TempDir()
	feedNotifying(t, wdir, []workflow.Notification{
		hook(u, "/etc/celos/a.secret", workflow.EventSLAMissed),
		hook(u, "/etc/celos/b.secret", workflow.EventSLAMissed, workflow.EventFailure)})
	db := openDB(t, t.TempDir())
	svc := newFake()
	a := startTargetEngine(t, wdir, "2026-11-24T08:00Z", svc, db)
	a.step(t, "2026-11-24T08:10Z")
	a.step(t, "2026-11-24T08:11Z")
	svc.finishAll(false)
	a.step(t, "2026-11-24T08:20Z")
	for _, h := range a.taken() { // the failure, delivered
		a.e.Finished("feed", h.ID)
	}
	a.step(t, "2026-11-24T11:00:30Z")
	sent := a.taken()
	if len(sent) != 2 || sent[0].ID == sent[1].ID {
		t.Fatalf("the miss handed out as %+v, want two deliveries under two ids", sent)
	}
	if keys := outboxKeys(t, db); len(keys) != 2 {
		t.Fatalf("outbox %q, want a record for each target", keys)
	}
	for _, h := range sent {
		a.e.Released(h.ID)
	}
	b := startTargetEngine(t, wdir, "2026-11-24T11:02Z", svc, db)
	b.step(t, "2026-11-24T11:02Z")
	if diff := cmp.Diff(sent, b.taken()); diff != "" {
		t.Errorf("after the restart, handed out (-want +got):\n%s", diff)
	}
}

// oldSLAID is the delivery id the previous version gave slot feed@08:00's
// SLA miss to url (written out, so that a change of slaDeliveryID shows).
func oldSLAID(url string) string {
	h := sha256.Sum256([]byte("slaMissed\x00feed@2026-11-24T08:00:00.000Z\x00" + url))
	return hex.EncodeToString(h[:12])
}

// putOldSLARecord writes the outbox record of feed@08:00's miss as the
// previous version wrote it (no targetIndex, no notifyURLs) for target,
// created at 11:00:30, and returns its delivery id.
func putOldSLARecord(t *testing.T, db Registers, target workflow.Notification, recorded bool) string {
	t.Helper()
	id := oldSLAID(target.URL)
	tj, _ := json.Marshal(target)
	raw := `{"event":"slaMissed","workflow":"feed","slot":"2026-11-24T08:00:00Z","status":"FAILURE","retryCount":0,` +
		`"at":"2026-11-24T11:00:30Z","detail":"SLA missed","target":` + string(tj) + `,"delivery":"` + id +
		`","created":"2026-11-24T11:00:30Z","recorded":` + map[bool]string{true: "true", false: "false"}[recorded] + `}`
	if err := db.PutRegister(outboxBucket, outboxKey("feed", ts("2026-11-24T11:00:30Z"), id), json.RawMessage(raw)); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestSLARecordOfThePreviousVersionSentOnce: an SLA miss's outbox record
// written by the previous version (the id of the URL, no target index)
// is sent once after the upgrade, under its id, to its target: when the
// miss's record says it was sent (a stop while the target was down), the
// outbox's delivery alone; when a kill came between the two records, the
// step sends the miss again under the same id (the first target of a URL
// keeps the id of the URL), so that the receiver deduplicates. A
// failure's record of the previous version goes to its target (by URL)
// as it is defined now.
func TestSLARecordOfThePreviousVersionSentOnce(t *testing.T) {
	const u = "http://127.0.0.1:1/hook"
	a1, b1 := hook(u, "/etc/celos/a.secret", workflow.EventSLAMissed), hook(u, "/etc/celos/b.secret", workflow.EventSLAMissed)
	t.Run("the miss recorded, two targets of one URL", func(t *testing.T) {
		wdir := t.TempDir()
		feedNotifying(t, wdir, []workflow.Notification{a1, b1})
		r := &slaRig{t: t, wdir: wdir, svc: newFake()}
		db := openDB(t, t.TempDir())
		r.failThenStop("old", db)
		// What the old version left at its stop: the miss recorded, the
		// delivery kept (one record for both targets: the last one's).
		since, _ := json.Marshal(map[string]time.Time{"since": ts("2026-11-24T08:00Z")})
		if err := db.PutRegister(slaBucket, slaSinceKey, since); err != nil {
			t.Fatal(err)
		}
		if err := db.PutRegister(slaBucket, slaKey(slot.ID{Workflow: "feed", Time: ts("2026-11-24T08:00Z")}), json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		id := putOldSLARecord(t, db, b1, true)
		n := startTargetEngine(t, wdir, "2026-11-24T11:05Z", r.svc, db)
		n.step(t, "2026-11-24T11:05Z")
		want := []handed{{workflow.EventSLAMissed, id, u, b1.SecretFile}}
		if diff := cmp.Diff(want, n.taken()); diff != "" {
			t.Errorf("after the upgrade, handed out (-want +got):\n%s", diff)
		}
	})
	t.Run("a failure's record, its target's secret changed since", func(t *testing.T) {
		wdir := t.TempDir()
		fail := func(secret string) workflow.Notification { return hook(u, secret, workflow.EventFailure) }
		feedNotifying(t, wdir, []workflow.Notification{fail("/etc/celos/new.secret")})
		db := openDB(t, t.TempDir())
		const id = "0123456789abcdef01234567"
		tj, _ := json.Marshal(fail("/etc/celos/old.secret"))
		raw := `{"event":"failure","workflow":"feed","slot":"2026-11-24T08:00:00Z","status":"FAILURE","retryCount":0,` +
			`"at":"2026-11-24T08:20:00Z","target":` + string(tj) + `,"delivery":"` + id + `","created":"2026-11-24T08:20:00Z","recorded":true}`
		if err := db.PutRegister(outboxBucket, outboxKey("feed", ts("2026-11-24T08:20Z"), id), json.RawMessage(raw)); err != nil {
			t.Fatal(err)
		}
		n := startTargetEngine(t, wdir, "2026-11-24T08:25Z", newFake(), db)
		n.step(t, "2026-11-24T08:25Z")
		want := []handed{{workflow.EventFailure, id, u, "/etc/celos/new.secret"}}
		if diff := cmp.Diff(want, n.taken()); diff != "" {
			t.Errorf("after the upgrade, handed out (-want +got):\n%s", diff)
		}
	})
	t.Run("a kill between the delivery's record and the miss's", func(t *testing.T) {
		wdir := t.TempDir()
		feedNotifying(t, wdir, []workflow.Notification{a1})
		r := &slaRig{t: t, wdir: wdir, svc: newFake()}
		db := openDB(t, t.TempDir())
		r.failThenStop("old", db)
		id := putOldSLARecord(t, db, a1, false)
		n := startTargetEngine(t, wdir, "2026-11-24T11:05Z", r.svc, db)
		n.step(t, "2026-11-24T11:05Z")
		got := n.taken()
		if len(got) == 0 {
			t.Fatal("the miss was not sent after the upgrade")
		}
		for _, h := range got {
			if h.Kind != workflow.EventSLAMissed || h.ID != id {
				t.Errorf("handed out %+v, want only the miss under the old id %s", h, id)
			}
		}
	})
}
