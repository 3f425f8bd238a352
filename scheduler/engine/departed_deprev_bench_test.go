package engine

import (
	"context"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/schema/workflow"
)

// BenchmarkClusterSubmitStep100: an instance of a cluster (Options.Owns)
// on PostgreSQL with 100 hourly workflows, each of which has submitted
// before under its definition; each op is the step that submits the
// next hour's slot of every one (the step that made it READY, and the
// end of the previous jobs, are not timed). Since the review of offline
// departures such a step writes the 100 definitions again, in one batch
// (docs/benchmarks.md). (The code uses nothing of the branch: it runs on
// main as it is.)
func BenchmarkClusterSubmitStep100(b *testing.B) {
	const n = 100
	wdir := b.TempDir()
	fixture.WriteProject(b, wdir, "bench", defsBenchWorkflows(n)...)
	ctx := context.Background()
	db, err := statepg.Open(ctx, pgtest.Shared(b).CreateDB(b), statepg.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	svc := newFake()
	e, err := New(Options{WorkflowsDir: wdir, Store: db, Logger: discard, Owns: func(string) bool { return true },
		Services: map[string]external.Service{workflow.ServiceCommand: svc}})
	if err != nil {
		b.Fatal(err)
	}
	hour := benchNow
	step := func(at time.Time) {
		if err := e.Step(ctx, at, nil); err != nil {
			b.Fatal(err)
		}
	}
	step(hour.Add(30 * time.Minute)) // READY
	step(hour.Add(31 * time.Minute)) // submitted: the definitions recorded
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		svc.finishAll(true)
		hour = hour.Add(time.Hour)
		step(hour.Add(30 * time.Minute)) // the ends recorded; the next slots READY
		before := len(svc.submitted())
		b.StartTimer()
		step(hour.Add(31 * time.Minute))
		b.StopTimer()
		if got := len(svc.submitted()) - before; got != n {
			b.Fatalf("%d submissions, want %d", got, n)
		}
		b.StartTimer()
	}
}
