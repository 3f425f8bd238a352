package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
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
// 100 workflows with a webhook target fail, on the file store with its
// syncs: without the outbox (as before it) and with it (two register
// writes per delivery: before the states, and marked recorded after).
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
	for _, outbox := range []bool{false, true} {
		b.Run(fmt.Sprintf("outbox=%v", outbox), func(b *testing.B) {
			events := 0
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				ddir := filepath.Join(b.TempDir(), "db")
				for _, w := range ws {
					day := filepath.Join(ddir, "state", w.ID, slotAt.Format("2006-01-02"))
					os.MkdirAll(day, 0o755)
					st := slot.State{ID: slot.ID{Workflow: w.ID, Time: slotAt}, Status: slot.Running, ExternalID: "job-" + w.ID}
					if err := os.WriteFile(filepath.Join(day, slotAt.Format("15:04:05.000Z")), statedb.EncodeState(st), 0o644); err != nil {
						b.Fatal(err)
					}
				}
				db, err := statedb.Open(ddir)
				if err != nil {
					b.Fatal(err)
				}
				e, err := New(Options{WorkflowsDir: wdir, Store: plainStore{db, db}, Logger: discard,
					Services: map[string]external.Service{workflow.ServiceCommand: failedJobs{}},
					OnEvent:  func(ev scheduler.Event) { events++ }})
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
				db.Close()
				b.StartTimer()
			}
			if events != n*b.N {
				b.Fatalf("%d events in %d steps, want %d each", events, b.N, n)
			}
		})
	}
}
