package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/schema/workflow"
)

// TestOutboxReleaseAfterTheNewOwnerDelivered: two live instances on one
// PostgreSQL database. A steps feed's slot to FAILURE; its sender holds
// the delivery (its first attempt failed, the retry waits). The workflow
// goes to B, whose first step hands the delivery out; B's sender delivers
// it and the record goes. Then A's retry comes: the workflow is not A's,
// its sender releases the delivery. The release must not write the
// record back (before, it did: B's next scan sent the delivered event
// again, a minute later).
func TestOutboxReleaseAfterTheNewOwnerDelivered(t *testing.T) {
	p := newPGPair(t, OutboxOptions{}, OutboxOptions{})
	a, b, svc, owner := p.a, p.b, p.svc, p.owner
	sent := failOn(t, a, svc, "2026-11-24T08:10Z", "2026-11-24T08:11Z", "2026-11-24T08:20Z")
	id := strings.TrimPrefix(sent[0], "failure ")
	owner.Store("B")
	b.step(t, "2026-11-24T08:21Z")
	if got := b.taken(); len(got) != 1 || got[0] != sent[0] {
		t.Fatalf("B's first step after the take-over handed out %q, want %q", got, sent)
	}
	b.e.Finished("feed", id) // delivered by B
	a.e.Released(id)         // A's retry: not A's any more
	regs := b.db.(Registers)
	if keys := outboxKeys(t, regs); len(keys) != 0 {
		t.Errorf("outbox %q after B delivered and A released, want empty", keys)
	}
	b.step(t, "2026-11-24T08:23Z") // (a scan: a minute on)
	if got := b.taken(); len(got) != 0 {
		t.Errorf("B handed out %q again after delivering it", got)
	}
}

// TestOutboxUnreadableRecords: records in the file store's outbox that
// are not outbox records — not JSON, JSON of another shape, JSON without
// a workflow, an event or a target — can never be sent: the first scan
// removes them, logs each once and counts them dropped (event
// "unknown"), instead of warning at every scan for the 7 days until the
// bounds remove them (before: left, "left for the next scan"). A FIFO and
// a symbolic link under a record's name neither hang the step nor are
// followed; they are left to the bounds (the store does not tell a file
// that is not regular from a read that failed).
func TestOutboxUnreadableRecords(t *testing.T) {
	wdir := feedOnFailure(t)
	dir := t.TempDir()
	db := openDB(t, dir)
	created := ts("2026-11-24T08:00Z")
	key := func(id string) string { return outboxKey("feed", created, id) }
	if err := db.PutRegister(outboxBucket, key("shape"), json.RawMessage(`{"target": 5, "recorded": true}`)); err != nil {
		t.Fatal(err)
	}
	if err := db.PutRegister(outboxBucket, key("empty"), json.RawMessage(`{"recorded": true}`)); err != nil {
		t.Fatal(err)
	}
	if err := db.PutRegister(outboxBucket, key("nofields"), json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	bdir := filepath.Join(dir, "register", outboxBucket)
	if err := os.WriteFile(filepath.Join(bdir, key("garbage")), []byte("not json \x00\xff"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(bdir, key("fifo")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(bdir, key("link"))); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var mu sync.Mutex
	dropped := map[string]int{}
	var clock atomic.Value
	clock.Store(ts("2026-11-24T08:10Z"))
	var events []scheduler.Event
	e, err := New(Options{WorkflowsDir: wdir, Store: db, Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil)),
		Clock: func() time.Time { return clock.Load().(time.Time) }, Services: map[string]external.Service{workflow.ServiceCommand: newFake()},
		OnEvent: func(ev scheduler.Event) { events = append(events, ev) }})
	if err != nil {
		t.Fatal(err)
	}
	e.EnableOutbox(OutboxOptions{OnDrop: func(ev string) { mu.Lock(); dropped[ev]++; mu.Unlock() }})
	for _, at := range []string{"2026-11-24T08:10Z", "2026-11-24T08:12Z", "2026-11-24T08:14Z"} {
		clock.Store(ts(at))
		if err := e.Step(context.Background(), ts(at), nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(events) != 0 {
		t.Errorf("handed out %+v, want nothing", events)
	}
	if diff := cmp.Diff([]string{key("fifo"), key("link")}, outboxKeys(t, db)); diff != "" {
		t.Errorf("outbox after three scans (-want +got):\n%s", diff)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(map[string]int{"unknown": 4}, dropped); diff != "" {
		t.Errorf("dropped (-want +got):\n%s", diff)
	}
	if n := strings.Count(logs.String(), "dropped from the outbox"); n != 4 {
		t.Errorf("%d records dropped in the log, want 4:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), "root:") {
		t.Errorf("the log quotes the file a link points to:\n%s", logs.String())
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestOutboxUndeployedSentByOneInstance: two instances on PostgreSQL; a
// failure's delivery of feed is released (its target was down), then
// feed is removed from the workflows. The instance OutboxOptions.
// Undeployed names (B) hands it out at its next scan (its target is one
// a deployed workflow names) and counts itself its sender (Mine); the
// other (A, which stepped feed) neither.
func TestOutboxUndeployedSentByOneInstance(t *testing.T) {
	feedIsB := func(wf string) bool { return wf == "feed" }
	p := newPGPair(t, OutboxOptions{Undeployed: func(wf string) bool { return !feedIsB(wf) }}, OutboxOptions{Undeployed: feedIsB})
	a, b, svc := p.a, p.b, p.svc
	sent := failOn(t, a, svc, "2026-11-24T08:10Z", "2026-11-24T08:11Z", "2026-11-24T08:20Z")
	b.step(t, "2026-11-24T08:20Z")
	a.e.Released(strings.TrimPrefix(sent[0], "failure "))
	other := fixture.Hourly("other")
	other.StartTime = ts("2026-11-24T08:00Z")
	// (A deployed workflow names feed's target: a removed workflow's
	// deliveries go only to a URL the configuration names.)
	other.Notify = []workflow.Notification{{Type: workflow.NotifyWebhook, URL: "http://127.0.0.1:1/hook", Events: []string{workflow.EventSLAMissed}}}
	fixture.WriteProject(t, p.wdir, "p", other) // feed removed
	a.step(t, "2026-11-24T08:22Z")
	b.step(t, "2026-11-24T08:22Z")
	if got := a.taken(); len(got) != 0 {
		t.Errorf("A handed out %q, another instance's to send", got)
	}
	if diff := cmp.Diff(sent, b.taken()); diff != "" {
		t.Errorf("B handed out (-want +got):\n%s", diff)
	}
	if a.e.Mine("feed") || !b.e.Mine("feed") {
		t.Errorf("Mine(feed): A %v, B %v; want B only", a.e.Mine("feed"), b.e.Mine("feed"))
	}
}

// TestOutboxHandedBackIsATakeOver: two live instances on PostgreSQL; feed
// goes from A to B and back to A within a minute. B, leaving, released
// the delivery it had taken over (its target down); A's first step of
// feed after it came back hands the delivery out, as at any take-over
// (before: A had scanned with feed its own, so it waited for the
// once-a-minute scan).
func TestOutboxHandedBackIsATakeOver(t *testing.T) {
	p := newPGPair(t, OutboxOptions{}, OutboxOptions{})
	a, b, svc, owner := p.a, p.b, p.svc, p.owner
	sent := failOn(t, a, svc, "2026-11-24T08:10:00Z", "2026-11-24T08:10:10Z", "2026-11-24T08:10:20Z")
	id := strings.TrimPrefix(sent[0], "failure ")
	owner.Store("B")
	a.step(t, "2026-11-24T08:10:30Z") // A: not its own now
	a.e.Released(id)                  // (A's sender let it go)
	b.step(t, "2026-11-24T08:10:30Z")
	if diff := cmp.Diff(sent, b.taken()); diff != "" {
		t.Fatalf("B's first step after the take-over handed out (-want +got):\n%s", diff)
	}
	b.e.Released(id) // B leaves: its sender lets it go
	owner.Store("A")
	a.step(t, "2026-11-24T08:10:40Z")
	if diff := cmp.Diff(sent, a.taken()); diff != "" {
		t.Errorf("A's first step after feed came back handed out (-want +got):\n%s", diff)
	}
}
