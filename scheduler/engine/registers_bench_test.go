package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/schema/workflow"
)

// The step of event-triggered workflows over a large register bucket, on
// both stores (docs/benchmarks.md, "Event triggers over a large bucket"):
//
//	go test ./scheduler/engine -run '^$' -bench 'EventBucket' -benchmem -benchtime 20x
//
// The file uses only what main's engine offers, so that the same file
// runs on main's code.

// eventBenchSetup writes n hourly workflows, each with an event trigger on
// its own keys of the bucket "ingest" ("wf-0007-20240531T22"), SUCCESS
// states for every slot of the window but the newest (23:00 the day
// before benchNow; a step at benchNow steps the slots before it), and keys
// registers in the bucket: the hourly keys of the workflows in turn, going
// back in time from before the waiting slots (none of them makes a
// waiting slot ready: every step evaluates n event triggers, n distinct
// keys, and readies nothing).
func eventBenchSetup(b *testing.B, n, keys int) (*Engine, *statedb.DB) {
	b.Helper()
	wdir, ddir := b.TempDir(), b.TempDir()
	ws := make([]workflow.Workflow, n)
	for i := range ws {
		ws[i] = fixture.Hourly(fmt.Sprintf("wf-%04d", i))
		ws[i].Trigger = workflow.Trigger{Type: workflow.TriggerEvent, Bucket: "ingest",
			Key: fmt.Sprintf("wf-%04d-${year}${month}${day}T${hour}", i)}
	}
	fixture.WriteProject(b, wdir, "bench", ws...)
	sched, err := newCron(fixture.HourlyCron)
	if err != nil {
		b.Fatal(err)
	}
	times := sched.Times(benchNow.Add(-scheduler.Window), benchNow)
	final := times[:len(times)-1]
	for _, w := range ws {
		for _, t := range final {
			day := filepath.Join(ddir, "state", w.ID, t.Format("2006-01-02"))
			if err := os.MkdirAll(day, 0o755); err != nil {
				b.Fatal(err)
			}
			st := slot.State{ID: slot.ID{Workflow: w.ID, Time: t}, Status: slot.Success, ExternalID: "job"}
			if err := os.WriteFile(filepath.Join(day, t.Format("15:04:05.000Z")), statedb.EncodeState(st), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	bucket := filepath.Join(ddir, "register", "ingest")
	if err := os.MkdirAll(bucket, 0o755); err != nil {
		b.Fatal(err)
	}
	oldest := final[len(final)-1] // older than every waiting slot
	for k := 0; k < keys; k++ {
		at := oldest.Add(-time.Hour * time.Duration(k/n))
		key := fmt.Sprintf("wf-%04d-%s", k%n, at.Format("20060102T15"))
		if err := os.WriteFile(filepath.Join(bucket, key), []byte(`{"files":24}`), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	syscall.Sync()
	db, err := statedb.Open(ddir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	e, err := New(Options{WorkflowsDir: wdir, Store: db, Services: map[string]external.Service{workflow.ServiceCommand: newFake()}, Logger: discard})
	if err != nil {
		b.Fatal(err)
	}
	return e, db
}

// BenchmarkEventBucket: the steady step of 100 hourly event-triggered
// workflows with a waiting slot each (100 event triggers evaluated per
// step, none ready) over a bucket of 1,000 and of 50,000 keys (some 57
// years of one hourly workflow's keys), on the file store and on
// PostgreSQL. queries/op is the round trips to PostgreSQL per step.
func BenchmarkEventBucket(b *testing.B) {
	pgServer(b)
	for _, keys := range []int{1000, 50000} {
		for _, store := range []string{"file", "pg"} {
			b.Run(fmt.Sprintf("keys=%d/store=%s", keys, store), func(b *testing.B) {
				const n = 100
				e, fdb := eventBenchSetup(b, n, keys)
				var pg *statepg.DB
				if store == "pg" {
					e, pg, _, _ = pgEngine(b, e, fdb)
				}
				ctx := context.Background()
				stepUntilRead(b, e)
				if err := e.Step(ctx, benchNow, nil); err != nil {
					b.Fatal(err)
				}
				// The waiting slots wait: the step evaluated their triggers.
				for _, wf := range []string{"wf-0000", fmt.Sprintf("wf-%04d", n-1)} {
					got, err := e.Slots(ctx, wf, benchNow.Add(-2*time.Hour), benchNow)
					if err != nil {
						b.Fatal(err)
					}
					if len(got) != 2 || got[0].Status != slot.Waiting || got[1].Status != slot.Success {
						b.Fatalf("%s: newest slots %+v, want WAITING, then SUCCESS", wf, got)
					}
				}
				var q0 int64
				if pg != nil {
					q0 = pg.Queries()
				}
				cpu0 := cpuTime(b)
				steps := 0
				for b.Loop() {
					if err := e.Step(ctx, benchNow, nil); err != nil {
						b.Fatal(err)
					}
					steps++
				}
				b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(steps), "cpu-ns/op")
				if pg != nil {
					b.ReportMetric(float64(pg.Queries()-q0)/float64(steps), "queries/op")
				}
			})
		}
	}
}
