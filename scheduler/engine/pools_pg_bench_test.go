package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/schema/workflow"
)

// BenchmarkPoolStepPG: the step of instance B of two on one PostgreSQL
// database, pool "etl" of 10 hourly workflows (5 owned by each instance),
// beside 100 workflows of no pool (B's), with one slot READY in every pool
// workflow. With limit=1 instance A runs one slot of the pool and B's five
// are held: a step where B's own view holds slots of a pool with workflows
// of another instance. With limit=100 every slot runs and nothing waits.
// The step is repeated at the same time (nothing changes); queries/op are
// B's round trips per step:
//
//	go test ./scheduler/engine -run '^$' -bench 'PoolStepPG' -benchmem
func BenchmarkPoolStepPG(b *testing.B) {
	srv := pgtest.Shared(b)
	for _, limit := range []int{1, 100} {
		b.Run(fmt.Sprintf("limit=%d", limit), func(b *testing.B) {
			dsn := srv.CreateDB(b)
			ctx := context.Background()
			wdir := b.TempDir()
			start := ts("2026-11-24T09:00:00.000Z")
			owner := make(map[string]int)
			var ws []workflow.Workflow
			for i := range 10 {
				w := fixture.Hourly(fmt.Sprintf("etl-%d", i))
				w.StartTime, w.Pool = start, "etl"
				ws, owner[w.ID] = append(ws, w), i%2
			}
			for i := range 100 {
				w := fixture.Hourly(fmt.Sprintf("free-%03d", i))
				w.StartTime = start
				ws, owner[w.ID] = append(ws, w), 1
			}
			fixture.WriteProject(b, wdir, "p", ws...)
			poolsFile := filepath.Join(b.TempDir(), "pools.json")
			if err := os.WriteFile(poolsFile, []byte(fmt.Sprintf(`{"pools": {"etl": {"limit": %d}}}`, limit)), 0o644); err != nil {
				b.Fatal(err)
			}
			svc := &poolService{limit: limit, occupied: func() (int, error) { return 0, nil }, live: make(map[string]slot.ID), done: make(map[string]bool)}
			var dbs []*statepg.DB
			var es []*Engine
			for i := range 2 {
				db, err := statepg.Open(ctx, dsn, statepg.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { db.Close() })
				e, err := New(Options{WorkflowsDir: wdir, Store: db, Logger: discard, PoolsFile: poolsFile,
					Owns:     func(wf string) bool { return owner[wf] == i },
					Services: map[string]external.Service{workflow.ServiceCommand: svc}})
				if err != nil {
					b.Fatal(err)
				}
				dbs, es = append(dbs, db), append(es, e)
			}
			now := ts("2026-11-24T09:30:00.000Z")
			step := func(i int) {
				b.Helper()
				if _, err := dbs[i].Refresh(ctx); err != nil {
					b.Fatal(err)
				}
				if err := es[i].Step(ctx, now, nil); err != nil {
					b.Fatal(err)
				}
			}
			step(0) // WAITING → READY
			step(1)
			step(0) // A submits: with limit 1 the pool is full
			step(1) // B submits what fits, holds the rest
			step(0)
			step(1)
			held := 0
			for _, p := range problemsOf(es[1], "", opPool) {
				if owner[p.Workflow] == 1 {
					held++
				}
			}
			if want := map[int]int{1: 5, 100: 0}[limit]; held != want {
				b.Fatalf("%d of B's slots held by the pool, want %d", held, want)
			}
			var queries int64
			for b.Loop() {
				q0 := dbs[1].Queries()
				if err := es[1].Step(ctx, now, nil); err != nil {
					b.Fatal(err)
				}
				queries += dbs[1].Queries() - q0
			}
			b.ReportMetric(float64(queries)/float64(b.N), "queries/op")
		})
	}
}
