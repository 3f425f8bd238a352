package engine

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/celos-go/celos/internal/testenv/fixture"
	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/cluster"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/statepg"
	"github.com/celos-go/celos/schema/workflow"
)

// 10,000 hourly workflows over 3 instances on one PostgreSQL database
// (docs/benchmarks.md, "10,000 workflows over 3 instances"):
//
//	go test ./scheduler/engine -run '^$' -bench 'HA10000' -benchtime 20x -timeout 20m
//
// The three instances live in one process, each with what `celos server
// --db postgres://…` builds (scheduler/server): a cluster member on its
// own small pool, a statepg store fenced by it, an engine that steps only
// what the member owns, and the server's step (BeginStep, Refresh, Step).

// haLease is the lease of the benchmark's members: cluster.DefaultLease,
// the production default.
const haLease = cluster.DefaultLease

// haInstance is one instance of the benchmark.
type haInstance struct {
	c       *cluster.Cluster
	cpool   *pgxpool.Pool
	cq      *atomic.Int64 // round trips on cpool
	st      *statepg.DB
	e       *Engine
	steps   int
	stepDur time.Duration
	prepDur time.Duration // of stepDur: BeginStep and Refresh
	queries int64
}

// allQueries is the round trips of both pools of the instance so far.
func (in *haInstance) allQueries() int64 { return in.cq.Load() + in.st.Queries() }

// step is what the server's clustered.Step does: adopt the leases'
// tokens, refresh the index with other instances' writes, step.
func (in *haInstance) step(ctx context.Context, now time.Time) error {
	t0 := time.Now()
	if err := in.c.BeginStep(ctx); err != nil {
		return err
	}
	if _, err := in.st.Refresh(ctx); err != nil {
		return err
	}
	in.prepDur += time.Since(t0)
	return in.e.Step(ctx, now, nil)
}

// timedStep steps and adds the step's wall time and round trips to the
// instance's totals.
func (in *haInstance) timedStep(b *testing.B, ctx context.Context, now time.Time) time.Duration {
	b.Helper()
	q0, t0 := in.allQueries(), time.Now()
	if err := in.step(ctx, now); err != nil {
		b.Fatalf("step of %s: %v", in.c.ID(), err)
	}
	d := time.Since(t0)
	in.steps++
	in.stepDur += d
	in.queries += in.allQueries() - q0
	return d
}

// pgFillHourly creates database name on the benchmark's server and writes
// n settled hourly workflows × 7 days straight into it (COPY, then VACUUM
// ANALYZE): the workflows directory, the ids, the rows and the time.
func pgFillHourly(b *testing.B, name string, n int) (string, []string, int64, time.Duration) {
	b.Helper()
	ctx := context.Background()
	if err := pgBench.srv.Exec(ctx, "postgres", "CREATE DATABASE "+name); err != nil {
		b.Fatal(err)
	}
	pg, err := statepg.Open(ctx, pgBench.srv.DSN(name), statepg.Options{}) // migrates
	if err != nil {
		b.Fatal(err)
	}
	defer pg.Close()
	ws := make([]workflow.Workflow, n)
	ids := make([]string, len(ws))
	for i := range ws {
		ws[i] = fixture.Hourly(fmt.Sprintf("wf-%05d", i))
		ids[i] = ws[i].ID
	}
	wdir := b.TempDir()
	fixture.WriteProject(b, wdir, "bench", ws...)
	sched, err := newCron(fixture.HourlyCron)
	if err != nil {
		b.Fatal(err)
	}
	times := sched.Times(benchNow.Add(-scheduler.Window), benchNow)
	t0 := time.Now()
	rows, err := pg.Pool().CopyFrom(ctx, pgx.Identifier{"celos_slots"}, []string{"workflow", "slot_time", "status", "external_id", "retry_count"},
		pgx.CopyFromSlice(len(ids)*len(times), func(i int) ([]any, error) {
			return []any{ids[i/len(times)], times[i%len(times)], "SUCCESS", "job", int32(0)}, nil
		}))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pg.Pool().Exec(ctx, "INSERT INTO celos_workflows (workflow) SELECT unnest($1::text[])", ids); err != nil {
		b.Fatal(err)
	}
	if _, err := pg.Pool().Exec(ctx, "VACUUM ANALYZE"); err != nil {
		b.Fatal(err)
	}
	return wdir, ids, rows, time.Since(t0)
}

// haStart starts instance id over the database dsn, as `celos server`
// does: the member's pool (4 connections, round trips counted), Join,
// the fenced store, the engine.
func haStart(b *testing.B, dsn, wdir, id string, ids []string) *haInstance {
	b.Helper()
	ctx := context.Background()
	in := &haInstance{cq: new(atomic.Int64)}
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	pc.MaxConns = 4
	pc.ConnConfig.Tracer = countTracer{in.cq}
	if in.cpool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(in.cpool.Close)
	if in.c, err = cluster.New(in.cpool, cluster.Options{ID: id, Host: id, Lease: haLease, Logger: discard, Workflows: func() []string { return ids }}); err != nil {
		b.Fatal(err)
	}
	if err := in.c.Join(ctx); err != nil {
		b.Fatal(err)
	}
	if in.st, err = statepg.Open(ctx, dsn, statepg.Options{Fence: in.c}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { in.st.Close() })
	in.e, err = New(Options{WorkflowsDir: wdir, Store: in.st, Services: map[string]external.Service{workflow.ServiceCommand: newFake()},
		Logger: discard, Owns: in.c.OwnsFunc()})
	if err != nil {
		b.Fatal(err)
	}
	return in
}

// BenchmarkHA10000Hourly3Instances: 10,000 settled hourly workflows
// (1,680,000 final slots) shared by 3 instances on one database. Reports
// per instance the first step (loading its share) and the steady step
// (wall, CPU of the process, round trips of both pools), the take-over
// after one instance stops without releasing anything (kill -9: its
// pools dropped, no Leave), and the rows and bytes of the database.
func BenchmarkHA10000Hourly3Instances(b *testing.B) {
	pgServer(b)
	ctx := context.Background()
	wdir, ids, rows, fill := pgFillHourly(b, "ha10k", 10000)
	dsn := pgBench.srv.DSN("ha10k")
	ins := make([]*haInstance, 3)
	for i := range ins {
		ins[i] = haStart(b, dsn, wdir, fmt.Sprintf("celos-%d", i+1), ids)
	}
	for range 2 { // the first round sees the others join; the second settles
		for _, in := range ins {
			if err := in.c.Tick(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	lastTick := time.Now()
	total, firsts := 0, make([]time.Duration, len(ins))
	for i, in := range ins {
		firsts[i] = in.timedStep(b, ctx, benchNow)
		rep := in.e.LastStep()
		owned := len(in.c.Owned())
		if rep.Slots != owned*168 || rep.Writes != 0 || rep.Loading != 0 {
			b.Fatalf("first step of %s: %d slots, %d writes, %d loading; owns %d workflows", in.c.ID(), rep.Slots, rep.Writes, rep.Loading, owned)
		}
		total += owned
		in.steps, in.stepDur, in.prepDur, in.queries = 0, 0, 0, 0
	}
	if total != len(ids) {
		b.Fatalf("the instances own %d workflows, want %d", total, len(ids))
	}

	// The steady step: every round steps each instance once (in turn: on
	// 2 cores three concurrent steps would measure the scheduler); the
	// membership ticks every lease/3 as Run would, outside the timings.
	var cpu time.Duration
	for b.Loop() {
		if time.Since(lastTick) > haLease/3 {
			b.StopTimer()
			for _, in := range ins {
				if err := in.c.Tick(ctx); err != nil {
					b.Fatal(err)
				}
			}
			lastTick = time.Now()
			b.StartTimer()
		}
		c0 := cpuTime(b)
		for _, in := range ins {
			in.timedStep(b, ctx, benchNow)
		}
		cpu += cpuTime(b) - c0
	}
	steps := 0
	for i, in := range ins {
		steps += in.steps
		b.ReportMetric(float64(in.stepDur.Nanoseconds())/float64(in.steps), fmt.Sprintf("step-ns-%d", i+1))
		b.ReportMetric(float64(in.queries)/float64(in.steps), fmt.Sprintf("queries/step-%d", i+1))
		b.ReportMetric(float64(in.prepDur.Nanoseconds())/float64(in.steps), fmt.Sprintf("begin+refresh-ns-%d", i+1))
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(steps), "cpu-ns/step")
	// (Reported after the loop: b.Loop's start resets the metrics.)
	for i, in := range ins {
		b.ReportMetric(float64(firsts[i].Milliseconds()), fmt.Sprintf("first-step-ms-%d", i+1))
		b.ReportMetric(float64(len(in.c.Owned())), fmt.Sprintf("owned-%d", i+1))
	}

	haSize(b, ins[0].st.Pool(), rows, fill)
	haTakeOver(b, ins, len(ids))
}

// haTakeOver "kills" the third instance (no more renewals, its pools
// closed without Leave or release), runs the others' membership as Run
// does (a tick every lease/3) and reports the time from its last renewal
// until the two own all workflows, and until each has also stepped its
// new share (the step that reads the taken workflows' state).
func haTakeOver(b *testing.B, ins []*haInstance, n int) {
	b.Helper()
	ctx := context.Background()
	dead := ins[2]
	if err := dead.c.Tick(ctx); err != nil { // its last renewal
		b.Fatal(err)
	}
	killed := time.Now()
	before := []int{len(ins[0].c.Owned()), len(ins[1].c.Owned())}
	dead.st.Close()
	dead.cpool.Close()
	live := ins[:2]
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }() // Run leaves at its end
	for _, in := range live {
		wg.Go(func() { in.c.Run(runCtx) })
	}
	deadline := killed.Add(10 * haLease)
	for len(live[0].c.Owned())+len(live[1].c.Owned()) != n {
		if time.Now().After(deadline) {
			b.Fatalf("after %v the two live instances own %d + %d of %d workflows", 10*haLease,
				len(live[0].c.Owned()), len(live[1].c.Owned()), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	owned := time.Since(killed)
	b.ReportMetric(owned.Seconds(), "takeover-owned-s")
	var slowest time.Duration
	for i, in := range live {
		d := in.timedStep(b, ctx, benchNow)
		rep := in.e.LastStep()
		// The step considers the slots of the workflows it took over (read
		// now), not the final slots of those it had (skipped, as before).
		if want := (len(in.c.Owned()) - before[i]) * 168; rep.Slots != want || rep.Writes != 0 {
			b.Fatalf("step of %s after the take-over: %d slots, %d writes; want %d, 0", in.c.ID(), rep.Slots, rep.Writes, want)
		}
		b.ReportMetric(float64(d.Milliseconds()), fmt.Sprintf("takeover-step-ms-%d", i+1))
		b.ReportMetric(float64(len(in.c.Owned())-before[i]), fmt.Sprintf("taken-%d", i+1))
		slowest = max(slowest, d)
	}
	b.ReportMetric((owned + slowest).Seconds(), "takeover-stepped-s")
	b.ReportMetric(haLease.Seconds(), "lease-s")
}

// haSize reports the rows of the slots table and the bytes of every celos
// table with its indexes (pg_total_relation_size; the cluster's leases
// and instances included), and the fill's time.
func haSize(b *testing.B, pool *pgxpool.Pool, rows int64, fill time.Duration) {
	b.Helper()
	var slots, leases, bytes int64
	if err := pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM celos_slots), (SELECT count(*) FROM cluster_leases),
(SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c WHERE (c.relname LIKE 'celos\_%' OR c.relname LIKE 'cluster\_%') AND c.relkind = 'r')::bigint`).Scan(&slots, &leases, &bytes); err != nil {
		b.Fatal(err)
	}
	if slots != rows {
		b.Fatalf("%d slot rows, want %d", slots, rows)
	}
	b.ReportMetric(float64(slots), "rows")
	b.ReportMetric(float64(leases), "lease-rows")
	b.ReportMetric(float64(bytes)/(1<<20), "db-MiB")
	b.ReportMetric(fill.Seconds(), "copy-s")
}

// countTracer counts the round trips of a pool (as statepg's own counter).
type countTracer struct{ n *atomic.Int64 }

func (c countTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c countTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c countTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c countTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c countTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// BenchmarkHA10000HourlyFileStore: the file store's side of
// BenchmarkHA10000Hourly3Instances, on one instance (the file store has no
// other): 10,000 settled hourly workflows, 1,680,000 files, all on tmpfs
// (/dev/shm: creating them on this machine's disk takes most of an hour),
// so its first step reads memory, not a disk.
func BenchmarkHA10000HourlyFileStore(b *testing.B) {
	shm, err := os.MkdirTemp("/dev/shm", "celos-ha-bench-*")
	if err != nil {
		b.Skipf("no tmpfs at /dev/shm: %v", err)
	}
	b.Cleanup(func() { os.RemoveAll(shm) })
	b.Setenv("TMPDIR", shm) // benchSetup's directories
	t0 := time.Now()
	e, fdb, slots := benchSetup(b, 10000, fixture.HourlyCron)
	fill := time.Since(t0)
	ctx := context.Background()
	first, all, seen := stepUntilRead(b, e) // the file store reads the states in the background
	if seen != slots {
		b.Fatalf("the steps until every state was read considered %d slots, want %d", seen, slots)
	}
	w0 := fdb.Stats()
	cpu0, steps := cpuTime(b), 0
	for b.Loop() {
		if err := e.Step(ctx, benchNow, nil); err != nil {
			b.Fatal(err)
		}
		steps++
	}
	w1 := fdb.Stats()
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(steps), "cpu-ns/op")
	b.ReportMetric(float64(first.Milliseconds()), "first-step-ms")
	b.ReportMetric(float64(all.Milliseconds()), "all-read-ms")
	b.ReportMetric(float64(w1.Reads-w0.Reads+w1.Writes-w0.Writes)/float64(steps), "file-ops/op")
	b.ReportMetric(float64(slots), "files")
	b.ReportMetric(dirMiB(fdb.Dir()), "db-MiB")
	b.ReportMetric(fill.Seconds(), "fill-s")
}
