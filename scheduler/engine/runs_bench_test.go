package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/schema/workflow"
)

// BenchmarkSubmitHour1000: 1,000 hourly workflows on a synced file store;
// each op is an hour of their life: a step at the new hour (the last
// hour's jobs SUCCESS, the new slots READY) and one a minute later that
// submits the 1,000 new slots. With a run constraint (minInterval 1h) the
// submitting step writes the record of submissions (recordRuns); without
// one it writes none.
func BenchmarkSubmitHour1000(b *testing.B) {
	b.Run("minInterval", func(b *testing.B) { benchSubmitHour(b, true) })
	b.Run("none", func(b *testing.B) { benchSubmitHour(b, false) })
}

func benchSubmitHour(b *testing.B, constrained bool) {
	const n = 1000
	wdir, ddir := b.TempDir(), b.TempDir()
	ws := make([]workflow.Workflow, n)
	for i := range ws {
		ws[i] = fixture.Hourly(fmt.Sprintf("wf-%04d", i))
		ws[i].StartTime = benchNow
		if constrained {
			ws[i].Constraints = &workflow.Constraints{MinIntervalSeconds: 3600, TimeoutSeconds: workflow.NeverTimeout, OnTimeout: workflow.OnTimeoutGiveUp}
		}
	}
	fixture.WriteProject(b, wdir, "bench", ws...)
	db, err := statedb.Open(ddir)
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
	now := benchNow
	hour := func() {
		now = now.Add(time.Hour)
		svc.finishAll(true)
		if err := e.Step(ctx, now, nil); err != nil {
			b.Fatal(err)
		}
		if err := e.Step(ctx, now.Add(time.Minute), nil); err != nil {
			b.Fatal(err)
		}
	}
	hour() // start-up: the state read
	s0, w0 := len(svc.submitted()), db.Stats().Writes
	cpu0 := cpuTime(b)
	ops := 0
	for b.Loop() {
		hour()
		ops++
	}
	if got := len(svc.submitted()) - s0; got != ops*n {
		b.Fatalf("%d submissions in %d hours, want %d", got, ops, ops*n)
	}
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(ops), "cpu-ns/op")
	b.ReportMetric(float64(db.Stats().Writes-w0)/float64(ops), "file-writes/op")
}
