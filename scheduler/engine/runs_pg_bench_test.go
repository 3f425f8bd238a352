package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/scheduler/store"
	"github.com/celos-go/celos/schema/workflow"
)

// BenchmarkTakeOverRuns1000PG: the first step of an engine that takes over
// 1,000 hourly workflows with a run constraint (minInterval 1h) on a real
// PostgreSQL, each with a record of three submissions. Each op forgets what
// the engine knew of the submissions (as a take-over or a restart does) and
// steps once: the records are read again. batch=off reads them with one
// query per workflow (Runs), batch=on with one query per step (RunsOf).
//
//	go test ./scheduler/engine -run '^$' -bench 'TakeOverRuns' -benchmem -benchtime 20x
func BenchmarkTakeOverRuns1000PG(b *testing.B) {
	const n = 1000
	pgServer(b)
	ctx := context.Background()
	if err := pgBench.srv.Exec(ctx, "postgres", "CREATE DATABASE takeoverruns"); err != nil {
		b.Fatal(err)
	}
	pg, err := statepg.Open(ctx, pgBench.srv.DSN("takeoverruns"), statepg.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pg.Close() })
	wdir := b.TempDir()
	ws := make([]workflow.Workflow, n)
	set := make(map[string][]store.Run, n)
	for i := range ws {
		ws[i] = fixture.Hourly(fmt.Sprintf("wf-%04d", i))
		ws[i].StartTime = benchNow.Add(-3 * time.Hour)
		ws[i].Constraints = &workflow.Constraints{MinIntervalSeconds: 3600, TimeoutSeconds: workflow.NeverTimeout, OnTimeout: workflow.OnTimeoutGiveUp}
		for h := 3; h >= 1; h-- {
			t := benchNow.Add(-time.Duration(h) * time.Hour)
			set[ws[i].ID] = append(set[ws[i].ID], store.Run{Slot: t, At: t.Add(10 * time.Minute)})
		}
	}
	fixture.WriteProject(b, wdir, "bench", ws...)
	if failed := pg.PutRuns(set); len(failed) > 0 {
		b.Fatalf("PutRuns: %v", failed)
	}
	e, err := New(Options{WorkflowsDir: wdir, Store: pg, Services: map[string]external.Service{workflow.ServiceCommand: newFake()}, Logger: discard})
	if err != nil {
		b.Fatal(err)
	}
	now := benchNow.Add(30 * time.Minute)         // within minInterval of the last run: nothing submitted
	if err := e.Step(ctx, now, nil); err != nil { // the slots READY, written once
		b.Fatal(err)
	}
	for _, batch := range []bool{false, true} {
		b.Run(fmt.Sprintf("batch=%s", map[bool]string{false: "off", true: "on"}[batch]), func(b *testing.B) {
			defer func(old bool) { batchRunReads = old }(batchRunReads)
			batchRunReads = batch
			q0, ops := pg.Queries(), 0
			for b.Loop() {
				e.stepMu.Lock()
				clear(e.runs)
				e.stepMu.Unlock()
				if err := e.Step(ctx, now, nil); err != nil {
					b.Fatal(err)
				}
				if got := len(e.runs); got != n {
					b.Fatalf("%d workflows' submissions known after the step, want %d", got, n)
				}
				ops++
			}
			b.ReportMetric(float64(pg.Queries()-q0)/float64(ops), "queries/op")
		})
	}
}
