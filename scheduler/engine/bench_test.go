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
	"github.com/celos-go/celos/schema/workflow"
)

// benchNow is the step time of the benchmarks: a whole hour, so that the
// window holds exactly 168 hourly or 10,080 minutely slots.
var benchNow = time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)

// benchSetup writes n workflows with the cron schedule expr and, for each,
// a SUCCESS state file for every slot of the 7-day window (written
// directly, as a Celos installation would have them), opens the database
// and makes an engine. It returns the engine, the database and the number
// of slots.
func benchSetup(b *testing.B, n int, expr string) (*Engine, *statedb.DB, int) {
	b.Helper()
	wdir, ddir := b.TempDir(), b.TempDir()
	if expr == fixture.MinutelyCron && os.Getenv("TMPDIR") == "" { // minutely
		// A million small files take many minutes to create on a loaded
		// disk; the steady step measured reads none of them, so put them
		// in memory when the machine has a tmpfs (set TMPDIR to choose).
		if d, err := os.MkdirTemp("/dev/shm", "celos-bench-*"); err == nil {
			b.Cleanup(func() { os.RemoveAll(d) })
			ddir = d
			b.Logf("state database in %s (tmpfs)", d)
		}
	}
	ws := make([]workflow.Workflow, n)
	for i := range ws {
		ws[i] = fixture.Hourly(fmt.Sprintf("wf-%04d", i))
		ws[i].Schedule.Cron = expr
	}
	fixture.WriteProject(b, wdir, "bench", ws...)
	sched, err := newCron(expr)
	if err != nil {
		b.Fatal(err)
	}
	times := sched.Times(benchNow.Add(-scheduler.Window), benchNow)
	// Write the files from a few goroutines (the file system is the limit).
	errs := make(chan error, len(ws))
	sem := make(chan struct{}, 8)
	for i := range ws {
		sem <- struct{}{}
		go func(id string) {
			defer func() { <-sem }()
			made := map[string]bool{}
			for _, t := range times {
				day := filepath.Join(ddir, "state", id, t.Format("2006-01-02"))
				if !made[day] {
					if err := os.MkdirAll(day, 0o755); err != nil {
						errs <- err
						return
					}
					made[day] = true
				}
				st := slot.State{ID: slot.ID{Workflow: id, Time: t}, Status: slot.Success, ExternalID: "job"}
				if err := os.WriteFile(filepath.Join(day, t.Format("15:04:05.000Z")), statedb.EncodeState(st), 0o644); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(ws[i].ID)
	}
	for range ws {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	slots := len(ws) * len(times)
	syscall.Sync() // no write-back of the set-up behind the measurements
	db, err := statedb.Open(ddir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	e, err := New(Options{WorkflowsDir: wdir, Store: db, Services: map[string]external.Service{workflow.ServiceCommand: newFake()}, Logger: discard})
	if err != nil {
		b.Fatal(err)
	}
	return e, db, slots
}

// benchSteady measures a steady-state step (nothing changes). The first
// step after start-up (index load and a full enumeration of the window)
// is reported as first-step-ms.
func benchSteady(b *testing.B, n int, expr string) {
	e, db, slots := benchSetup(b, n, expr)
	ctx := context.Background()
	// After a restart a step steps the workflows whose state is read and
	// leaves the others to later steps (loadState): first-step-ms is the
	// first step, all-read-ms the end of the first step that had every
	// workflow's state; together those steps considered every slot once.
	first, all, seen := stepUntilRead(b, e)
	if seen != slots {
		b.Fatalf("the steps until every state was read considered %d slots, want %d", seen, slots)
	}
	w0 := db.Stats()
	cpu0 := cpuTime(b)
	steps := 0
	for b.Loop() {
		if err := e.Step(ctx, benchNow, nil); err != nil {
			b.Fatal(err)
		}
		steps++
	}
	w1 := db.Stats()
	// CPU time (user + system, this process) per step: on a machine shared
	// with other jobs it varies far less than the wall time of ns/op.
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(steps), "cpu-ns/op")
	b.ReportMetric(float64(slots), "slots")
	b.ReportMetric(float64(first.Milliseconds()), "first-step-ms")
	b.ReportMetric(float64(all.Milliseconds()), "all-read-ms")
	b.ReportMetric(float64(w1.Writes-w0.Writes)/float64(steps), "file-writes/op")
	b.ReportMetric(float64(w1.Reads-w0.Reads)/float64(steps), "file-reads/op")
}

// BenchmarkSteadyStep1000Hourly: 1,000 hourly workflows × 7 days = 168,000
// slots, all final. Target: under 50 ms and no file writes.
func BenchmarkSteadyStep1000Hourly(b *testing.B) { benchSteady(b, 1000, fixture.HourlyCron) }

// BenchmarkSteadyStep100Minutely: 100 minutely workflows × 7 days =
// 1,008,000 slots, all final.
func BenchmarkSteadyStep100Minutely(b *testing.B) { benchSteady(b, 100, fixture.MinutelyCron) }

// BenchmarkStepNewHour1000Hourly: each step is an hour later than the last,
// so each of the 1,000 workflows gets one new slot (WAITING → READY, one
// write each): the cost follows the slots that change.
func BenchmarkStepNewHour1000Hourly(b *testing.B) {
	e, db, _ := benchSetup(b, 1000, fixture.HourlyCron)
	ctx := context.Background()
	stepUntilRead(b, e)
	now := benchNow
	w0 := db.Stats().Writes
	steps := 0
	for b.Loop() {
		now = now.Add(time.Hour)
		if err := e.Step(ctx, now, nil); err != nil {
			b.Fatal(err)
		}
		steps++
	}
	b.ReportMetric(float64(db.Stats().Writes-w0)/float64(steps), "file-writes/op")
}

// BenchmarkSlotsMinutely7Days: Engine.Slots (what GET /workflow-slots
// serves) for one minutely workflow over 7 days: 10,080 slots.
func BenchmarkSlotsMinutely7Days(b *testing.B) {
	e, _, _ := benchSetup(b, 1, fixture.MinutelyCron)
	ctx := context.Background()
	for b.Loop() {
		s, err := e.Slots(ctx, "wf-0000", benchNow.Add(-scheduler.Window), benchNow)
		if err != nil || len(s) != 10080 {
			b.Fatal(len(s), err)
		}
	}
}

// stepUntilRead steps at benchNow until a step had every workflow's state
// (StepReport.Loading 0: after a restart the file store reads it in the
// background and a step steps what is read). It returns the time of the
// first step, the time until the end of the first step that had every
// state, and the slots those steps considered together (each slot once:
// a workflow's first step enumerates its window). A step that writes
// fails the benchmark.
func stepUntilRead(b *testing.B, e *Engine) (first, all time.Duration, slots int) {
	b.Helper()
	t0 := time.Now()
	for {
		if err := e.Step(context.Background(), benchNow, nil); err != nil {
			b.Fatal(err)
		}
		if first == 0 {
			first = time.Since(t0)
		}
		rep := e.LastStep()
		if rep.Writes != 0 {
			b.Fatalf("a first step wrote %d files, want 0", rep.Writes)
		}
		slots += rep.Slots
		if rep.Loading == 0 {
			return first, time.Since(t0), slots
		}
	}
}

// BenchmarkFullWindowStep1000Hourly is the steady step without the done
// marks (forgotten before each step, as after a restart with the index
// already loaded): every one of the 168,000 slots is enumerated and looked
// up. It shows what the done marks save.
func BenchmarkFullWindowStep1000Hourly(b *testing.B) {
	e, db, slots := benchSetup(b, 1000, fixture.HourlyCron)
	ctx := context.Background()
	stepUntilRead(b, e)
	w0 := db.Stats().Writes
	for b.Loop() {
		e.mu.Lock()
		e.done = make(map[string]doneMark)
		e.mu.Unlock()
		if err := e.Step(ctx, benchNow, nil); err != nil {
			b.Fatal(err)
		}
		if rep := e.LastStep(); rep.Slots != slots {
			b.Fatalf("%d slots stepped, want %d", rep.Slots, slots)
		}
	}
	if db.Stats().Writes != w0 {
		b.Fatal("files written")
	}
}

// cpuTime is the CPU time (user + system) the process used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
