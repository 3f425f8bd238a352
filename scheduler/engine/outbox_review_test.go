package engine

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/statepg"
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
	srv := pgtest.Shared(t)
	dsn := srv.CreateDB(t)
	wdir := t.TempDir()
	w := fixture.Hourly("feed")
	w.StartTime = ts("2026-11-24T08:00Z")
	w.Notify = []workflow.Notification{{Type: workflow.NotifyWebhook, URL: "http://127.0.0.1:1/hook", Events: []string{workflow.EventFailure}}}
	fixture.WriteProject(t, wdir, "p", w)
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
	svc := newFake()
	a := startOutboxEngine(t, wdir, "2026-11-24T08:00Z", svc, open("A"), func(string) bool { return owner.Load() == "A" }, OutboxOptions{})
	b := startOutboxEngine(t, wdir, "2026-11-24T08:00Z", svc, open("B"), func(string) bool { return owner.Load() == "B" }, OutboxOptions{})
	a.step(t, "2026-11-24T08:10Z") // READY
	a.step(t, "2026-11-24T08:11Z") // RUNNING
	svc.finishAll(false)
	a.step(t, "2026-11-24T08:20Z") // FAILURE
	sent := a.taken()
	if len(sent) != 1 {
		t.Fatalf("A handed out %q, want one failure", sent)
	}
	id := strings.TrimPrefix(sent[0], "failure ")
	owner.Store("B")
	b.step(t, "2026-11-24T08:21Z")
	if got := b.taken(); len(got) != 1 || got[0] != sent[0] {
		t.Fatalf("B's first step after the take-over handed out %q, want %q", got, sent)
	}
	b.e.Finished("feed", id) // delivered by B
	a.e.Released("feed", id) // A's retry: not A's any more
	regs := b.db.(Registers)
	if keys := outboxKeys(t, regs); len(keys) != 0 {
		t.Errorf("outbox %q after B delivered and A released, want empty", keys)
	}
	b.step(t, "2026-11-24T08:23Z") // (a scan: a minute on)
	if got := b.taken(); len(got) != 0 {
		t.Errorf("B handed out %q again after delivering it", got)
	}
}
