package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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

// failedJobs reports every job failed.
type failedJobs struct{}

func (failedJobs) Submit(context.Context, *workflow.Workflow, slot.ID) (string, error) {
	return "", fmt.Errorf("not submitted")
}
func (failedJobs) Status(context.Context, *workflow.Workflow, string) (external.Status, error) {
	return external.Status{Detail: "exit 1"}, nil
}
func (failedJobs) Kill(context.Context, *workflow.Workflow, string) error { return nil }

// plainStore hides the file store's optional interfaces (background
// load): the step reads what it needs itself.
type plainStore struct {
	Store
	Registers
}

// BenchmarkFailureStep measures the step in which the RUNNING slots of
// 100 workflows with a webhook target fail, without the outbox (as
// before it) and with it (one record per delivery, written before the
// states: docs/benchmarks.md, "The webhook outbox" and "in one batch"):
// on the file store with its syncs (a new database each iteration) and
// on PostgreSQL (one database, its 100 slots set back to RUNNING and its
// outbox emptied between iterations, untimed). The registers are passed
// as Options.Registers, the store itself, so that the engine sees what
// the store offers for them.
//
//	go test -run '^$' -bench BenchmarkFailureStep -benchmem -count 3 ./scheduler/engine
func BenchmarkFailureStep(b *testing.B) {
	const n = 100
	slotAt := benchNow.Add(-time.Hour)
	ws := make([]workflow.Workflow, n)
	for i := range ws {
		ws[i] = fixture.Hourly(fmt.Sprintf("wf-%03d", i))
		ws[i].StartTime = slotAt
		ws[i].Notify = []workflow.Notification{{Type: workflow.NotifyWebhook, URL: "http://127.0.0.1:1/hook", Events: []string{workflow.EventFailure}}}
	}
	wdir := b.TempDir()
	fixture.WriteProject(b, wdir, "bench", ws...)
	running := func(w workflow.Workflow) slot.State {
		return slot.State{ID: slot.ID{Workflow: w.ID, Time: slotAt}, Status: slot.Running, ExternalID: "job-" + w.ID}
	}
	// step runs one timed step on db (its states set up, the timer
	// stopped) and counts its events.
	step := func(b *testing.B, db Store, regs Registers, outbox bool, events *int) {
		e, err := New(Options{WorkflowsDir: wdir, Store: plainStore{db, regs}, Registers: regs, Logger: discard,
			Services: map[string]external.Service{workflow.ServiceCommand: failedJobs{}},
			OnEvent:  func(ev scheduler.Event) { *events++ }})
		if err != nil {
			b.Fatal(err)
		}
		if outbox {
			e.EnableOutbox(OutboxOptions{})
		}
		b.StartTimer()
		if err := e.Step(context.Background(), benchNow, nil); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
	}
	for _, outbox := range []bool{false, true} {
		b.Run(fmt.Sprintf("store=file/outbox=%v", outbox), func(b *testing.B) {
			events := 0
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				ddir := filepath.Join(b.TempDir(), "db")
				for _, w := range ws {
					day := filepath.Join(ddir, "state", w.ID, slotAt.Format("2006-01-02"))
					os.MkdirAll(day, 0o755)
					if err := os.WriteFile(filepath.Join(day, slotAt.Format("15:04:05.000Z")), statedb.EncodeState(running(w)), 0o644); err != nil {
						b.Fatal(err)
					}
				}
				db, err := statedb.Open(ddir)
				if err != nil {
					b.Fatal(err)
				}
				step(b, db, db, outbox, &events)
				db.Close()
				b.StartTimer()
			}
			if events != n*b.N {
				b.Fatalf("%d events in %d steps, want %d each", events, b.N, n)
			}
		})
	}
	for _, outbox := range []bool{false, true} {
		b.Run(fmt.Sprintf("store=pg/outbox=%v", outbox), func(b *testing.B) {
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
			events := 0
			b.StartTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if failed := db.PutStates(sts); failed != nil {
					b.Fatal(failed)
				}
				if err := db.DeleteRegistersWithPrefix(outboxBucket, ""); err != nil {
					b.Fatal(err)
				}
				step(b, db, db, outbox, &events)
				b.StartTimer()
			}
			if events != n*b.N {
				b.Fatalf("%d events in %d steps, want %d each", events, b.N, n)
			}
		})
	}
}
