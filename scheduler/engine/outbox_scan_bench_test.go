package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/schema/workflow"
)

// BenchmarkOutboxScan measures one scan of a full outbox (n deliveries of
// a workflow, recorded, nothing holding them: a target down, the sender's
// queue full, each released at once as a full queue releases it), as
// the once-a-minute rescan pays it in its step, on the file store and on
// PostgreSQL.
func BenchmarkOutboxScan(b *testing.B) {
	for _, st := range []string{"file", "postgres"} {
		for _, n := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("store=%s/deliveries=%d", st, n), func(b *testing.B) { benchOutboxScan(b, st, n) })
		}
	}
}

func benchOutboxScan(b *testing.B, st string, n int) {
	wdir := b.TempDir()
	w := fixture.Hourly("feed")
	w.StartTime = benchNow.Add(-time.Hour)
	w.Notify = []workflow.Notification{{Type: workflow.NotifyWebhook, URL: "http://127.0.0.1:1/hook", Events: []string{workflow.EventFailure}}}
	fixture.WriteProject(b, wdir, "p", w)
	var db interface {
		Store
		Registers
		Close() error
	}
	var err error
	if st == "file" {
		db, err = statedb.OpenWith(filepath.Join(b.TempDir(), "db"), statedb.Options{NoSync: true})
	} else {
		db, err = statepg.Open(context.Background(), pgtest.Shared(b).CreateDB(b), statepg.Options{})
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	for i := range n {
		id := fmt.Sprintf("%024x", i)
		rec := outboxRecord{Event: workflow.EventFailure, Workflow: "feed", Slot: w.StartTime, Status: "FAILURE", At: benchNow,
			Target: w.Notify[0], Delivery: id, Created: benchNow, Recorded: true}
		raw, _ := json.Marshal(rec)
		if err := db.PutRegister(outboxBucket, outboxKey("feed", benchNow, id), raw); err != nil {
			b.Fatal(err)
		}
	}
	var e *Engine
	offered := 0
	e, err = New(Options{WorkflowsDir: wdir, Store: db, Logger: discard, Clock: func() time.Time { return benchNow },
		Services: map[string]external.Service{workflow.ServiceCommand: failedJobs{}},
		OnEvent: func(ev scheduler.Event) {
			offered++
			e.Released(ev.Deliveries[0])
		}})
	if err != nil {
		b.Fatal(err)
	}
	e.EnableOutbox(OutboxOptions{})
	c := e.reload()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.out.scanned = time.Time{}
		e.offerOutbox(c, nil)
	}
	b.StopTimer()
	if offered != n*b.N {
		b.Fatalf("offered %d, want %d", offered, n*b.N)
	}
}
