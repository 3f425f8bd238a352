package engine

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/celos-go/celos/internal/testenv/pgtest"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/schema/workflow"
)

// The PostgreSQL store beside the file store, in one run (docs/benchmarks.md):
//
//	go test ./scheduler/engine -run '^$' -bench 'Stores' -benchmem -benchtime 20x
//
// Each benchmark has a store=file and a store=pg variant on the same
// workflows and slots; the pg one copies the file store's state into a
// fresh database of a real server (celos db migrate's Migrate) and runs a
// new engine over it.

var pgBench struct {
	srv *pgtest.Server // the server of the running benchmark
	n   int
}

// pgServer starts a server for the sub-benchmarks of b (stopped at b's end).
func pgServer(b *testing.B) {
	pgBench.srv = pgtest.StartT(b, pgtest.Options{})
}

// pgEngine copies db's directory into a new database and returns an
// engine over the PostgreSQL store, with the time the copy took.
func pgEngine(b *testing.B, e *Engine, fdb *statedb.DB) (*Engine, *statepg.DB, time.Duration, []float64) {
	b.Helper()
	ctx := context.Background()
	pgBench.n++
	name := fmt.Sprintf("bench%d", pgBench.n)
	if err := pgBench.srv.Exec(ctx, "postgres", "CREATE DATABASE "+name); err != nil {
		b.Fatal(err)
	}
	pg, err := statepg.Open(ctx, pgBench.srv.DSN(name), statepg.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pg.Close() })
	fdb.Close() // its lock: Migrate opens the directory again
	t0 := time.Now()
	if err := migrateDir(ctx, fdb.Dir(), pg); err != nil {
		b.Fatal(err)
	}
	took := time.Since(t0)
	pg.Close()
	pg, err = statepg.Open(ctx, pgBench.srv.DSN(name), statepg.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pg.Close() })
	pe, err := New(Options{WorkflowsDir: e.opts.WorkflowsDir, Store: pg, Services: map[string]external.Service{workflow.ServiceCommand: newFake()}, Logger: discard})
	if err != nil {
		b.Fatal(err)
	}
	// The rows and the bytes of every celos table with its indexes (the
	// database's own catalogue, some 7 MiB, left out).
	var rows, bytes int64
	if err := pg.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM celos_slots),
(SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c WHERE c.relname LIKE 'celos\_%' AND c.relkind = 'r')::bigint`).Scan(&rows, &bytes); err != nil {
		b.Fatal(err)
	}
	return pe, pg, took, []float64{float64(rows), float64(bytes) / (1 << 20)}
}

// BenchmarkStoresSteadyStep1000Hourly: the steady step of 1,000 settled
// hourly workflows (168,000 final slots) on each store; queries/op is the
// round trips to PostgreSQL per step (0: nothing to do, nothing asked).
func BenchmarkStoresSteadyStep1000Hourly(b *testing.B) {
	pgServer(b)
	for _, store := range []string{"file", "pg"} {
		b.Run("store="+store, func(b *testing.B) {
			e, fdb, slots := benchSetup(b, 1000, "0 0 * * * ?")
			var (
				pg   *statepg.DB
				took time.Duration
				size []float64
			)
			if store == "pg" {
				e, pg, took, size = pgEngine(b, e, fdb)
			}
			ctx := context.Background()
			// The file store reads its state in the background after a
			// restart: "first step" is until every state was read.
			_, first, seen := stepUntilRead(b, e)
			if seen != slots {
				b.Fatalf("first steps: %d slots, want %d", seen, slots)
			}
			var q0 int64
			if pg != nil {
				q0 = pg.Queries()
			}
			steps := 0
			for b.Loop() {
				if err := e.Step(ctx, benchNow, nil); err != nil {
					b.Fatal(err)
				}
				steps++
			}
			// (Reported after the loop: b.Loop's start resets the metrics.)
			b.ReportMetric(float64(first.Milliseconds()), "first-step-ms")
			if pg != nil {
				b.ReportMetric(float64(pg.Queries()-q0)/float64(steps), "queries/op")
				b.ReportMetric(took.Seconds(), "migrate-s")
				b.ReportMetric(size[0], "rows")
				b.ReportMetric(size[1], "db-MiB")
			} else {
				b.ReportMetric(dirMiB(fdb.Dir()), "db-MiB")
			}
		})
	}
}

// BenchmarkStoresNewHour1000Hourly: every step an hour later, so each of
// the 1,000 workflows gets a new slot that moves WAITING → READY: 1,000
// transitions written per step (one transaction on PostgreSQL).
func BenchmarkStoresNewHour1000Hourly(b *testing.B) {
	pgServer(b)
	for _, store := range []string{"file", "pg"} {
		b.Run("store="+store, func(b *testing.B) {
			e, fdb, _ := benchSetup(b, 1000, "0 0 * * * ?")
			var pg *statepg.DB
			if store == "pg" {
				e, pg, _, _ = pgEngine(b, e, fdb)
			}
			ctx := context.Background()
			stepUntilRead(b, e)
			var q0 int64
			if pg != nil {
				q0 = pg.Queries()
			}
			now, steps := benchNow, 0
			for b.Loop() {
				now = now.Add(time.Hour)
				if err := e.Step(ctx, now, nil); err != nil {
					b.Fatal(err)
				}
				steps++
			}
			if pg != nil {
				b.ReportMetric(float64(pg.Queries()-q0)/float64(steps), "queries/op")
			}
		})
	}
}

// BenchmarkStoresSlotsMinutely7Days: GET /workflow-slots of a minutely
// workflow over 7 days (10,080 slots), from each store's index.
func BenchmarkStoresSlotsMinutely7Days(b *testing.B) {
	pgServer(b)
	for _, store := range []string{"file", "pg"} {
		b.Run("store="+store, func(b *testing.B) {
			e, fdb, _ := benchSetup(b, 1, "0 * * * * ?")
			if store == "pg" {
				e, _, _, _ = pgEngine(b, e, fdb)
			}
			ctx := context.Background()
			if _, err := e.Slots(ctx, "wf-0000", benchNow.Add(-scheduler.Window), benchNow); err != nil {
				b.Fatal(err) // the index is loaded: what follows reads memory
			}
			for b.Loop() {
				s, err := e.Slots(ctx, "wf-0000", benchNow.Add(-scheduler.Window), benchNow)
				if err != nil || len(s) != 10080 {
					b.Fatal(len(s), err)
				}
			}
		})
	}
}

// dirMiB is the bytes of the files under dir in MiB (the disk's blocks:
// what the file store costs).
func dirMiB(dir string) float64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil {
			if fi, err := d.Info(); err == nil {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok {
					n += st.Blocks * 512
				}
			}
		}
		return nil
	})
	return float64(n) / (1 << 20)
}

// BenchmarkPGSteadyStep10000Hourly: 10,000 settled hourly workflows
// (1,680,000 final slots, written straight into the tables with COPY) on
// the PostgreSQL store alone (the file store's 1.68 M files take too long
// to create on a shared machine): the first step (loading the index) and
// the steady step, with its round trips.
func BenchmarkPGSteadyStep10000Hourly(b *testing.B) {
	pgServer(b)
	ctx := context.Background()
	wdir, _, n, fill := pgFillHourly(b, "bench10k", 10000)
	pg, err := statepg.Open(ctx, pgBench.srv.DSN("bench10k"), statepg.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer pg.Close()
	e, err := New(Options{WorkflowsDir: wdir, Store: pg, Services: map[string]external.Service{workflow.ServiceCommand: newFake()}, Logger: discard})
	if err != nil {
		b.Fatal(err)
	}
	t1 := time.Now()
	if err := e.Step(ctx, benchNow, nil); err != nil {
		b.Fatal(err)
	}
	first := time.Since(t1)
	if rep := e.LastStep(); rep.Slots != int(n) || rep.Writes != 0 {
		b.Fatalf("first step: %d slots, %d writes; want %d, 0", rep.Slots, rep.Writes, n)
	}
	q0, steps := pg.Queries(), 0
	for b.Loop() {
		if err := e.Step(ctx, benchNow, nil); err != nil {
			b.Fatal(err)
		}
		steps++
	}
	var bytes int64
	if err := pg.Pool().QueryRow(ctx, `SELECT sum(pg_total_relation_size(c.oid))::bigint FROM pg_class c WHERE c.relname LIKE 'celos\_%' AND c.relkind = 'r'`).Scan(&bytes); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(pg.Queries()-q0)/float64(steps), "queries/op")
	b.ReportMetric(float64(first.Milliseconds()), "first-step-ms")
	b.ReportMetric(fill.Seconds(), "copy-s")
	b.ReportMetric(float64(n), "rows")
	b.ReportMetric(float64(bytes)/(1<<20), "db-MiB")
}
