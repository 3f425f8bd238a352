// Command celos-soak (built as soak by scripts/soak.sh) is the load and soak harness of `make soak` (scripts/soak.sh,
// docs/reliability.md). It is not part of `make test`.
//
//	soak gen   -dir D [-workflows 1000] [-days 7]
//	    writes D/wf/soak.json (hourly workflows, command service) and fills
//	    D/db with the last -days of SUCCESS slots, so that a `celos server`
//	    on them serves full 7-day windows (for wrk against /workflow-slots
//	    and /ui).
//	soak steps -dir D [-workflows 1000] [-steps 10000] [-interval 5m]
//	           [-cron '0 0 */6 * * ?'] [-retention 8d] [-prune-every 288]
//	    runs the real engine on a real state database with a fake clock and
//	    an in-memory external service whose jobs succeed at the first poll:
//	    -steps steps, -interval of simulated time apart, pruning slots older
//	    than -retention (statedb.Prune, what `celos db prune` runs) every
//	    -prune-every steps. It prints the live heap (after a GC), the state
//	    database's files and bytes, and step times as it goes, and fails if
//	    the heap or the database keeps growing once the retention is reached.
//	soak fill, soak restart
//	    the scale measurements of `make bench-scale` (see scale.go).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/schema/workflow"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: soak gen|steps|fill|restart [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "gen":
		err = gen(os.Args[2:])
	case "steps":
		err = steps(os.Args[2:])
	case "fill":
		err = fill(os.Args[2:])
	case "restart":
		err = restart(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// project returns n workflows on the cron schedule, starting at start.
func project(n int, cronExpr string, start time.Time) *workflow.Project {
	p := &workflow.Project{Format: workflow.FormatVersion, Project: "soak"}
	for i := 0; i < n; i++ {
		p.Workflows = append(p.Workflows, workflow.Workflow{
			ID:                 fmt.Sprintf("wf-%04d", i),
			Schedule:           workflow.Schedule{Type: workflow.ScheduleCron, Cron: cronExpr, TimeZone: "UTC"},
			Trigger:            workflow.Trigger{Type: workflow.TriggerAlways},
			SchedulingStrategy: workflow.Strategy{Type: workflow.StrategySerial, Concurrency: 2},
			ExternalService:    workflow.ExternalService{Type: workflow.ServiceCommand, Command: []string{"true"}},
			StartTime:          start,
			WaitTimeoutSeconds: workflow.NeverTimeout,
			URL:                "https://wiki.example.com/soak",
			Contacts:           []workflow.Contact{{Name: "Soak", Email: "soak@example.com"}},
		})
	}
	return p
}

func writeProject(dir string, p *workflow.Project) error {
	if err := os.MkdirAll(filepath.Join(dir, "wf"), 0o755); err != nil {
		return err
	}
	data, err := p.Marshal()
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "wf", "soak.json"), data, 0o644)
}

func gen(args []string) error {
	fl := flag.NewFlagSet("gen", flag.ExitOnError)
	dir := fl.String("dir", "", "output directory")
	n := fl.Int("workflows", 1000, "number of workflows")
	days := fl.Int("days", 7, "days of SUCCESS slots to write")
	fl.Parse(args)
	if *dir == "" {
		return errors.New("-dir is required")
	}
	now := time.Now().UTC().Truncate(time.Hour)
	start := now.Add(-time.Duration(*days) * 24 * time.Hour)
	if err := writeProject(*dir, project(*n, "0 0 * * * ?", start)); err != nil {
		return err
	}
	db, err := statedb.OpenWith(filepath.Join(*dir, "db"), statedb.Options{NoSync: true})
	if err != nil {
		return err
	}
	defer db.Close()
	t0 := time.Now()
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	sem := make(chan struct{}, 8)
	for i := 0; i < *n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			wf := fmt.Sprintf("wf-%04d", i)
			for t := start; t.Before(now); t = t.Add(time.Hour) {
				st := slot.State{ID: slot.ID{Workflow: wf, Time: t}, Status: slot.Success, ExternalID: wf + "@" + t.Format("20060102T150405Z") + ".1"}
				if err := db.Put(st); err != nil {
					select {
					case errc <- err:
					default:
					}
					return
				}
			}
		}(i)
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
	}
	files, bytes := usage(filepath.Join(*dir, "db"))
	fmt.Printf("gen: %d workflows, %d days of hourly SUCCESS slots: %d files, %.1f MiB in %v\n",
		*n, *days, files, float64(bytes)/(1<<20), time.Since(t0).Round(time.Millisecond))
	return nil
}

// fakeService runs every job instantly: Status says SUCCESS.
type fakeService struct {
	mu      sync.Mutex
	submits int
}

func (f *fakeService) Submit(_ context.Context, _ *workflow.Workflow, id slot.ID) (string, error) {
	f.mu.Lock()
	f.submits++
	f.mu.Unlock()
	return id.Workflow + "@" + id.Time.Format("20060102T150405Z") + ".1", nil
}

func (f *fakeService) Status(context.Context, *workflow.Workflow, string) (external.Status, error) {
	return external.Status{Success: true, Detail: "exit 0"}, nil
}

func (f *fakeService) Kill(context.Context, *workflow.Workflow, string) error { return nil }

// sample is one line of the report.
type sample struct {
	Step       int     `json:"step"`
	SimTime    string  `json:"simTime"`
	HeapMiB    float64 `json:"heapMiB"`
	DBFiles    int     `json:"dbFiles"`
	DBDirs     int     `json:"dbDirs"`
	DBMiB      float64 `json:"dbMiB"`
	StepP50ms  float64 `json:"stepP50ms"`
	StepP99ms  float64 `json:"stepP99ms"`
	Pruned     int     `json:"pruned"`
	Goroutines int     `json:"goroutines"`
}

func steps(args []string) error {
	fl := flag.NewFlagSet("steps", flag.ExitOnError)
	dir := fl.String("dir", "", "working directory (workflows, state database)")
	n := fl.Int("workflows", 1000, "number of workflows")
	count := fl.Int("steps", 10000, "number of steps")
	cronExpr := fl.String("cron", "0 0 */6 * * ?", "the workflows' schedule")
	interval := fl.Duration("interval", 5*time.Minute, "simulated time between steps")
	retention := fl.String("retention", "8d", "prune final slots older than this (d = 24h)")
	pruneEvery := fl.Int("prune-every", 288, "prune every N steps (0: never)")
	report := fl.Int("report", 1000, "print a sample every N steps")
	fsync := fl.Bool("fsync", false, "fsync state files as the server does (slower; the soak measures memory and size)")
	jsonOut := fl.String("json", "", "also write the samples as JSON to this file")
	fl.Parse(args)
	if *dir == "" {
		return errors.New("-dir is required")
	}
	keep, err := parseDays(*retention)
	if err != nil {
		return err
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := writeProject(*dir, project(*n, *cronExpr, t0)); err != nil {
		return err
	}
	dbDir := filepath.Join(*dir, "db")
	db, err := statedb.OpenWith(dbDir, statedb.Options{NoSync: !*fsync})
	if err != nil {
		return err
	}
	defer db.Close()
	now := t0.Add(30 * time.Second)
	svc := &fakeService{}
	eng, err := engine.New(engine.Options{
		WorkflowsDir: filepath.Join(*dir, "wf"), Store: db,
		Services: map[string]external.Service{workflow.ServiceCommand: svc},
		Clock:    func() time.Time { return now },
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return err
	}
	ctx := context.Background()
	var durs []time.Duration
	var samples []sample
	pruned := 0
	take := func(i int) sample {
		runtime.GC()
		var mstats runtime.MemStats
		runtime.ReadMemStats(&mstats)
		files, bytes := usage(dbDir)
		s := sample{Step: i, SimTime: now.Format(time.RFC3339), HeapMiB: mib(mstats.HeapAlloc), DBFiles: files, DBDirs: dirCount(dbDir), DBMiB: mib(uint64(bytes)),
			Pruned: pruned, Goroutines: runtime.NumGoroutine()}
		if len(durs) > 0 {
			sorted := append([]time.Duration(nil), durs...)
			sort.Slice(sorted, func(a, b int) bool { return sorted[a] < sorted[b] })
			s.StepP50ms = ms(sorted[len(sorted)/2])
			s.StepP99ms = ms(sorted[len(sorted)*99/100])
		}
		durs = durs[:0]
		fmt.Printf("%6d  %s  heap %6.1f MiB  db %7d files %6d dirs %6.1f MiB  step p50 %5.2f ms p99 %7.2f ms  pruned %7d  goroutines %d\n",
			s.Step, s.SimTime, s.HeapMiB, s.DBFiles, s.DBDirs, s.DBMiB, s.StepP50ms, s.StepP99ms, s.Pruned, s.Goroutines)
		return s
	}
	fmt.Printf("soak: %d workflows (cron %q), %d steps %v apart (%.1f simulated days), prune > %s every %d steps, fsync %v\n",
		*n, *cronExpr, *count, *interval, float64(*count)*interval.Hours()/24, *retention, *pruneEvery, *fsync)
	start := time.Now()
	for i := 1; i <= *count; i++ {
		s0 := time.Now()
		if err := eng.Step(ctx, now, nil); err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
		durs = append(durs, time.Since(s0))
		if *pruneEvery > 0 && i%*pruneEvery == 0 && now.Sub(t0) > keep {
			m, err := db.Prune(now.Add(-keep), now)
			if err != nil {
				return fmt.Errorf("prune at step %d: %w", i, err)
			}
			pruned += m
		}
		if i == 1 || i%*report == 0 || i == *count {
			samples = append(samples, take(i))
		}
		now = now.Add(*interval)
	}
	fmt.Printf("soak: %d steps in %v, %d submissions\n", *count, time.Since(start).Round(time.Millisecond), svc.submits)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(samples, "", "  ")
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	return judge(samples, *count, *interval, keep, *pruneEvery)
}

// judge fails the soak if, once the retention period has passed (the state
// database's size can stop growing), the heap or the database still grows:
// the last sample may exceed the first sample past that point by at most
// 10% + 1 MiB of heap, and 10% of files and directories (the slack of the
// prune period).
func judge(samples []sample, count int, interval, keep time.Duration, pruneEvery int) error {
	steadyStep := int((keep+24*time.Hour)/interval) + pruneEvery
	var first *sample
	for i := range samples {
		if samples[i].Step >= steadyStep {
			first = &samples[i]
			break
		}
	}
	last := samples[len(samples)-1]
	if first == nil || first.Step == last.Step {
		fmt.Printf("soak: the run (%d steps) is too short to reach steady state (step %d): nothing judged\n", count, steadyStep)
		return nil
	}
	var errs []error
	if last.HeapMiB > first.HeapMiB*1.10+1 {
		errs = append(errs, fmt.Errorf("heap grew from %.1f MiB (step %d) to %.1f MiB (step %d)", first.HeapMiB, first.Step, last.HeapMiB, last.Step))
	}
	if pruneEvery > 0 && float64(last.DBFiles) > float64(first.DBFiles)*1.10 {
		errs = append(errs, fmt.Errorf("state database grew from %d files (step %d) to %d (step %d) despite pruning", first.DBFiles, first.Step, last.DBFiles, last.Step))
	}
	if pruneEvery > 0 && float64(last.DBDirs) > float64(first.DBDirs)*1.10 {
		errs = append(errs, fmt.Errorf("state database grew from %d directories (step %d) to %d (step %d) despite pruning", first.DBDirs, first.Step, last.DBDirs, last.Step))
	}
	if len(errs) == 0 {
		fmt.Printf("soak: steady from step %d to %d: heap %.1f → %.1f MiB, db %d → %d files, %d → %d directories: flat\n",
			first.Step, last.Step, first.HeapMiB, last.HeapMiB, first.DBFiles, last.DBFiles, first.DBDirs, last.DBDirs)
	}
	return errors.Join(errs...)
}

func parseDays(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil {
			return 0, fmt.Errorf("bad -retention %q", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

func usage(dir string) (files int, bytes int64) {
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			files++
			bytes += fi.Size()
		}
		return nil
	})
	return
}

func dirCount(dir string) (n int) {
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
