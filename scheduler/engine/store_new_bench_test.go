package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/schema/workflow"
)

// BenchmarkFirstStart10000New: a server starts over 10,000 new hourly
// workflows (deployed just before; each starts two hours before now) on an
// empty store: New loads them and records their 10,000 owners, then the
// first step writes their first slots and submits. new-ms is New (the
// owner records), first-step-ms the step; ns/op is both. Each iteration
// opens a fresh store: a new database on the benchmark's PostgreSQL
// server, or a new directory on the disk under the test's temporary
// directory (real fsyncs, as a server makes):
//
//	go test ./scheduler/engine -run '^$' -bench 'FirstStart10000New' -benchmem -benchtime 1x
//
// It uses only what main has too (docs/benchmarks.md runs it side by side
// with main through go test -overlay).
func BenchmarkFirstStart10000New(b *testing.B) {
	pgServer(b)
	ctx := context.Background()
	ws := make([]workflow.Workflow, 10000)
	for i := range ws {
		ws[i] = fixture.Hourly(fmt.Sprintf("wf-%05d", i))
		ws[i].StartTime = benchNow.Add(-2 * time.Hour)
	}
	wdir := b.TempDir()
	fixture.WriteProject(b, wdir, "bench", ws...)
	for _, kind := range []string{"file", "pg"} {
		b.Run("store="+kind, func(b *testing.B) {
			var newDur, stepDur time.Duration
			var queries int64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				var st Store
				var pg *statepg.DB
				if kind == "pg" {
					pgBench.n++
					name := fmt.Sprintf("benchnew%d", pgBench.n)
					if err := pgBench.srv.Exec(ctx, "postgres", "CREATE DATABASE "+name); err != nil {
						b.Fatal(err)
					}
					var err error
					if pg, err = statepg.Open(ctx, pgBench.srv.DSN(name), statepg.Options{}); err != nil {
						b.Fatal(err)
					}
					st = pg
				} else {
					fdb, err := statedb.Open(b.TempDir())
					if err != nil {
						b.Fatal(err)
					}
					st = fdb
				}
				var q0 int64
				if pg != nil {
					q0 = pg.Queries()
				}
				b.StartTimer()
				t0 := time.Now()
				e, err := New(Options{WorkflowsDir: wdir, Store: st, Services: map[string]external.Service{workflow.ServiceCommand: newFake()}, Logger: discard})
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := e.Step(ctx, benchNow, nil); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				b.StopTimer()
				newDur += t1.Sub(t0)
				stepDur += t2.Sub(t1)
				owners, err := st.Owners()
				if err != nil || len(owners) != len(ws) {
					b.Fatalf("%d owner records after the start, %v", len(owners), err)
				}
				if pg != nil {
					queries += pg.Queries() - q0
					pg.Close()
				} else {
					st.(*statedb.DB).Close()
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(newDur.Milliseconds())/float64(b.N), "new-ms")
			b.ReportMetric(float64(stepDur.Milliseconds())/float64(b.N), "first-step-ms")
			if kind == "pg" {
				b.ReportMetric(float64(queries)/float64(b.N), "queries/op")
			}
		})
	}
}
