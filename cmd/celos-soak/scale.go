package main

// The scale measurements of `make bench-scale` (scripts/bench-scale.sh,
// docs/benchmarks.md):
//
//	soak fill    -dir D [-workflows 1000] [-fsync]
//	    writes D/wf/soak.json (hourly workflows starting 7 days ago) and
//	    runs the engine's first step on an empty state database D/db: the
//	    whole 7-day window is filled (every slot READY, two per workflow
//	    RUNNING). Prints the slots written, the wall and CPU time, slots/s
//	    and the process's peak RSS.
//	soak restart -dir D [-workflows 1000] [-steady 5]
//	    opens the state database D/db a fill (or gen) left and steps as
//	    a restarted server does: the first step (which waits at most a
//	    second for the background read of the state), the step at which
//	    every workflow's state had been read, then -steady steady steps
//	    (median). Prints the figures and the peak RSS.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/schema/workflow"
)

// scaleNow is the step time of fill and restart: a whole hour, so that
// the window holds exactly 168 slots of an hourly workflow.
func scaleNow() time.Time { return time.Now().UTC().Truncate(time.Hour) }

func newScaleEngine(dir string, db *statedb.DB, now *time.Time) (*engine.Engine, error) {
	return engine.New(engine.Options{
		WorkflowsDir: filepath.Join(dir, "wf"), Store: db,
		Services: map[string]external.Service{workflow.ServiceCommand: &fakeService{}},
		Clock:    func() time.Time { return *now },
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}

func fill(args []string) error {
	fl := flag.NewFlagSet("fill", flag.ExitOnError)
	dir := fl.String("dir", "", "working directory (workflows, state database)")
	n := fl.Int("workflows", 1000, "number of hourly workflows")
	fsync := fl.Bool("fsync", false, "make the writes durable as the server does")
	profile := fl.String("cpuprofile", "", "write a CPU profile of the step to this file")
	memProfile := fl.String("memprofile", "", "write a heap profile (allocations) of the step to this file")
	fl.Parse(args)
	if *dir == "" {
		return errors.New("-dir is required")
	}
	now := scaleNow()
	if err := writeProject(*dir, project(*n, "0 0 * * * ?", now.Add(-7*24*time.Hour))); err != nil {
		return err
	}
	dbDir := filepath.Join(*dir, "db")
	if _, err := os.Stat(dbDir); err == nil {
		return fmt.Errorf("%s exists: fill measures an empty state database", dbDir)
	}
	db, err := statedb.OpenWith(dbDir, statedb.Options{NoSync: !*fsync})
	if err != nil {
		return err
	}
	defer db.Close()
	eng, err := newScaleEngine(*dir, db, &now)
	if err != nil {
		return err
	}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	cpu0, t0 := cpuTime(), time.Now()
	if err := eng.Step(context.Background(), now, nil); err != nil {
		return fmt.Errorf("first step: %w", err)
	}
	wall, cpu := time.Since(t0), cpuTime()-cpu0
	if *memProfile != "" {
		if err := writeHeapProfile(*memProfile); err != nil {
			return err
		}
	}
	rep := eng.LastStep()
	if rep.Loading != 0 || rep.Workflows != *n {
		return fmt.Errorf("first step stepped %d workflows (%d still loading), want %d", rep.Workflows, rep.Loading, *n)
	}
	fmt.Printf("fill: %d workflows, fsync %v: %d slots, %d files written in %.2f s (cpu %.2f s): %.0f slots/s; peak RSS %s\n",
		*n, *fsync, rep.Slots, rep.Writes, wall.Seconds(), cpu.Seconds(), float64(rep.Slots)/wall.Seconds(), peakRSS())
	fmt.Printf("result: secs=%.2f cpu=%.2f rate=%.0f rss=%s\n", wall.Seconds(), cpu.Seconds(), float64(rep.Slots)/wall.Seconds(), strings.ReplaceAll(peakRSS(), " ", ""))
	return nil
}

func restart(args []string) error {
	fl := flag.NewFlagSet("restart", flag.ExitOnError)
	dir := fl.String("dir", "", "working directory a fill or gen left")
	n := fl.Int("workflows", 1000, "number of workflows (to check the steps)")
	steady := fl.Int("steady", 5, "steady steps to time after every state was read")
	fl.Parse(args)
	if *dir == "" {
		return errors.New("-dir is required")
	}
	now := scaleNow()
	t0 := time.Now()
	db, err := statedb.Open(filepath.Join(*dir, "db"))
	if err != nil {
		return err
	}
	defer db.Close()
	eng, err := newScaleEngine(*dir, db, &now)
	if err != nil {
		return err
	}
	ctx := context.Background()
	var first, all time.Duration
	stepped := 0
	for first == 0 || all == 0 {
		if err := eng.Step(ctx, now, nil); err != nil {
			return err
		}
		rep := eng.LastStep()
		stepped += rep.Workflows
		if first == 0 {
			first = time.Since(t0)
			fmt.Printf("restart: first step after %.2f s: %d workflows stepped, %d still being read\n", first.Seconds(), rep.Workflows, rep.Loading)
		}
		if rep.Loading == 0 {
			all = time.Since(t0)
		}
	}
	if stepped < *n {
		return fmt.Errorf("the steps until every state was read stepped %d workflows, want %d", stepped, *n)
	}
	var durs []time.Duration
	for i := 0; i < *steady; i++ {
		s0 := time.Now()
		if err := eng.Step(ctx, now, nil); err != nil {
			return err
		}
		durs = append(durs, time.Since(s0))
	}
	sort.Slice(durs, func(a, b int) bool { return durs[a] < durs[b] })
	med := time.Duration(0)
	if len(durs) > 0 {
		med = durs[len(durs)/2]
	}
	fmt.Printf("restart: %d workflows: first step %.2f s, all states read %.2f s, steady step %.1f ms (median of %d); peak RSS %s\n",
		*n, first.Seconds(), all.Seconds(), ms(med), len(durs), peakRSS())
	fmt.Printf("result: first=%.2f all=%.2f steady=%.1f rss=%s\n", first.Seconds(), all.Seconds(), ms(med), strings.ReplaceAll(peakRSS(), " ", ""))
	return nil
}

// cpuTime is the CPU time (user + system) the process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSS is the process's peak resident set (VmHWM), e.g. "243 MiB".
func peakRSS() string {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			if err == nil {
				return fmt.Sprintf("%d MiB", kb/1024)
			}
		}
	}
	return "unknown"
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
