package engine

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/notify"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/schema/workflow"
)

// BenchmarkReleaseAtStop measures the stop of a sender (notify.Sender.
// Close) whose 100 deliveries, recorded in the engine's outbox by a step
// in which 100 slots failed, all wait for their retry (the target answered
// 503): Close releases them to the outbox, which marks their records
// recorded — one write each before, one batch now (docs/benchmarks.md,
// "Releasing the outbox's deliveries at a stop"). On the file store with
// its syncs (a new database each iteration) and on PostgreSQL (one
// database, its slots set back to RUNNING and its outbox emptied between
// iterations). Only Close is timed; it uses only what main has too, so
// that the file can be run on both trees.
//
//	go test -run '^$' -bench BenchmarkReleaseAtStop -benchmem -count 5 ./scheduler/engine
func BenchmarkReleaseAtStop(b *testing.B) {
	const n = 100
	slotAt := benchNow.Add(-time.Hour)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	ws := make([]workflow.Workflow, n)
	for i := range ws {
		ws[i] = fixture.Hourly(fmt.Sprintf("wf-%03d", i))
		ws[i].StartTime = slotAt
		ws[i].Notify = []workflow.Notification{{Type: workflow.NotifyWebhook, URL: down.URL + "/hook", Events: []string{workflow.EventFailure}}}
	}
	wdir := b.TempDir()
	fixture.WriteProject(b, wdir, "bench", ws...)
	running := func(w workflow.Workflow) slot.State {
		return slot.State{ID: slot.ID{Workflow: w.ID, Time: slotAt}, Status: slot.Running, ExternalID: "job-" + w.ID}
	}
	// stop steps db (untimed) until its n deliveries wait for their
	// retry, then times the sender's Close.
	stop := func(b *testing.B, db Store, regs Registers) {
		var retried atomic.Int32
		sender := notify.New(notify.Options{Backoff: time.Hour, Logger: discard,
			OnResult: func(_, r string) {
				if r == notify.Retried {
					retried.Add(1)
				}
			}})
		e, err := New(Options{WorkflowsDir: wdir, Store: plainStore{db, regs}, Registers: regs, Logger: discard,
			Services: map[string]external.Service{workflow.ServiceCommand: failedJobs{}},
			OnEvent:  func(ev scheduler.Event) { sender.Send(ev) }})
		if err != nil {
			b.Fatal(err)
		}
		e.EnableOutbox(OutboxOptions{})
		sender.SetOutbox(e)
		if err := e.Step(context.Background(), benchNow, nil); err != nil {
			b.Fatal(err)
		}
		for deadline := time.Now().Add(time.Minute); retried.Load() < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d deliveries wait for their retry after a minute", retried.Load(), n)
			}
		}
		b.StartTimer()
		if err := sender.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		keys, err := regs.RegisterKeys(outboxBucket, "")
		if err != nil || len(keys) != n {
			b.Fatalf("outbox after the stop: %d records (%v), want %d", len(keys), err, n)
		}
	}
	b.Run("store=file", func(b *testing.B) {
		b.StopTimer()
		for i := 0; i < b.N; i++ {
			ddir := filepath.Join(b.TempDir(), "db")
			for _, w := range ws {
				day := filepath.Join(ddir, "state", w.ID, slotAt.Format("2006-01-02"))
				if err := os.MkdirAll(day, 0o755); err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(day, slotAt.Format("15:04:05.000Z")), statedb.EncodeState(running(w)), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			db, err := statedb.Open(ddir)
			if err != nil {
				b.Fatal(err)
			}
			stop(b, db, db)
			db.Close()
		}
	})
	b.Run("store=pg", func(b *testing.B) {
		b.StopTimer()
		db, err := statepg.Open(context.Background(), pgtest.Shared(b).CreateDB(b), statepg.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		sts := make([]slot.State, n)
		for i, w := range ws {
			sts[i] = running(w)
		}
		for i := 0; i < b.N; i++ {
			if failed := db.PutStates(sts); failed != nil {
				b.Fatal(failed)
			}
			if err := db.DeleteRegistersWithPrefix(outboxBucket, ""); err != nil {
				b.Fatal(err)
			}
			stop(b, db, db)
		}
	})
}
