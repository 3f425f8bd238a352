package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/schema/workflow"
)

// defsBenchWorkflows are n hourly workflows starting at benchNow.
func defsBenchWorkflows(n int) []workflow.Workflow {
	ws := make([]workflow.Workflow, n)
	for i := range ws {
		ws[i] = fixture.Hourly(fmt.Sprintf("wf-%04d", i))
		ws[i].StartTime = benchNow
	}
	return ws
}

// BenchmarkFirstSubmit1000: the first submitting step of 1,000 hourly
// workflows on a new synced file store (their slots READY at the step
// before, not timed): the step that writes, since the definitions
// records, every workflow's definition before its first submission.
// (The code uses nothing of the branch: it runs on main as it is.)
func BenchmarkFirstSubmit1000(b *testing.B) {
	const n = 1000
	wdir := b.TempDir()
	fixture.WriteProject(b, wdir, "bench", defsBenchWorkflows(n)...)
	ctx := context.Background()
	var writes int64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		db, err := statedb.Open(filepath.Join(b.TempDir(), "db"))
		if err != nil {
			b.Fatal(err)
		}
		svc := newFake()
		e, err := New(Options{WorkflowsDir: wdir, Store: db, Services: map[string]external.Service{workflow.ServiceCommand: svc}, Logger: discard})
		if err != nil {
			b.Fatal(err)
		}
		if err := e.Step(ctx, benchNow.Add(30*time.Minute), nil); err != nil {
			b.Fatal(err)
		}
		w0 := db.Stats().Writes
		b.StartTimer()
		if err := e.Step(ctx, benchNow.Add(31*time.Minute), nil); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if got := len(svc.submitted()); got != n {
			b.Fatalf("%d submissions, want %d", got, n)
		}
		writes += db.Stats().Writes - w0
		db.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(writes)/float64(b.N), "file-writes/op")
}

// BenchmarkStepAfterChange1000: 1,000 hourly workflows that have each
// submitted a job; each op changes the configuration (a 1,001st workflow
// comes or goes) and steps: the reload, and on the branch the listing of
// the definition records that follows every change.
func BenchmarkStepAfterChange1000(b *testing.B) {
	const n = 1000
	wdir := b.TempDir()
	ws := defsBenchWorkflows(n)
	fixture.WriteProject(b, wdir, "bench", ws...)
	db, err := statedb.Open(filepath.Join(b.TempDir(), "db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	svc := newFake()
	e, err := New(Options{WorkflowsDir: wdir, Store: db, Services: map[string]external.Service{workflow.ServiceCommand: svc}, Logger: discard})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	now := benchNow.Add(30 * time.Minute)
	for range 2 { // READY, then RUNNING
		if err := e.Step(ctx, now, nil); err != nil {
			b.Fatal(err)
		}
	}
	if got := len(svc.submitted()); got != n {
		b.Fatalf("%d submissions, want %d", got, n)
	}
	extra := fixture.Hourly("extra")
	extra.StartTime = benchNow.Add(24 * time.Hour) // (no slot yet)
	r0 := db.Stats().Reads
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if i%2 == 0 {
			fixture.WriteProject(b, wdir, "bench", append(ws[:n:n], extra)...)
		} else {
			fixture.WriteProject(b, wdir, "bench", ws...)
		}
		b.StartTimer()
		if err := e.Step(ctx, now, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(db.Stats().Reads-r0)/float64(b.N), "file-reads/op")
}
