// Package sandbox runs a project's test cases (`celos test`, Celos CI's
// TEST mode): each case in a sandbox of its own — a private slot engine
// over a temporary state database and a command service of its own, the
// project's workflows with every HDFS path rewritten under the case's
// prefix (RewritePath), the project's hdfs/ directory and the case's
// inputs written there — stepped from the case's start to its end, then
// compared with what is expected (package compare) and cleaned up, also
// when the run is interrupted. Cases run in parallel; two runs never
// share a sandbox (each has a fresh random directory), and each run
// first removes the sandboxes of runs that were killed (removeStale).
//
// The package is fed compiled workflows and compiled test cases; it
// depends on no CUE package.
package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/trigger"
	"github.com/celos-go/celos/schema/workflow"
	"github.com/celos-go/celos/schema/workflow/testcase"
	"github.com/celos-go/celos/targets"
)

// DefaultHDFSRoot is where a project's hdfs/ directory goes (under the
// prefix) when Options.HDFSRoot is empty, as for `celos deploy`.
const DefaultHDFSRoot = "/user/celos/app"

// DefaultPoll is how long the driver waits between steps while a slot is
// READY or RUNNING.
const DefaultPoll = 100 * time.Millisecond

// DefaultParallel is how many cases run at once by default: four per
// CPU, since a case mostly waits (for its jobs' processes, for fsync):
// on two CPUs, 8 at once run 20 cases five times as fast as one at a time
// (docs/benchmarks.md).
func DefaultParallel() int { return 4 * runtime.GOMAXPROCS(0) }

// ErrSetup is wrapped by Run's errors about the run as a whole (found
// before any case starts).
var ErrSetup = errors.New("celos test cannot start")

// Env is where the sandboxes live and what runs their slots besides the
// command service (which every case gets, its own).
type Env struct {
	// FS holds the prefixes, inputs and outputs; nil means the local
	// disk.
	FS targets.FS
	// FSURI names FS for commands ($CELOS_TEST_FS): "file:///" (the
	// default) or "hdfs://host:port".
	FSURI string
	// Base is the directory on FS under which the run makes its own
	// directory (a random name) holding one prefix per case. Empty
	// means the run's local temporary directory (the local disk only).
	Base string
	// Triggers answers hdfsCheck triggers; nil means the local disk.
	Triggers trigger.FileSystems
	// Services run the slots of other types ("oozie"), by type.
	Services map[string]external.Service
}

// have are the external service types a run has: its own command
// service and Services.
func (e Env) have() map[string]bool {
	have := map[string]bool{workflow.ServiceCommand: true}
	for t := range e.Services {
		have[t] = true
	}
	return have
}

func (e Env) local() bool { return e.FS == nil || e.FS.String() == (targets.Local{}).String() }

// Options configure Run.
type Options struct {
	// Project is the compiled project under test.
	Project *workflow.Project
	// Dir is the project's directory: symbolic links in hdfs/ and in
	// fixtures are followed only to regular files inside it ("": never).
	Dir string
	// HDFSDir is the project's local hdfs/ directory, deployed under
	// each prefix at HDFSRoot/<project> ("" or missing: nothing).
	HDFSDir  string
	HDFSRoot string
	Env      Env
	// TempDir is the local directory of the run's state databases, jobs
	// and workflows files ("" means os.TempDir()).
	TempDir string
	// Parallel is how many cases run at once (default DefaultParallel).
	Parallel int
	// Keep leaves every sandbox in place (Result.Prefix, Result.Local).
	Keep bool
	// Poll is the pause between steps while something runs (default
	// DefaultPoll).
	Poll time.Duration
	// Logger receives the engines' logs (default: discarded).
	Logger *slog.Logger
	// Orphans, if set, is told how many processes the commands left
	// running were killed when their cases ended (and an error if some
	// outlived the kill).
	Orphans func(killed int, err error)
	// PoolsFile is the installation's pools file (celos server --pools):
	// its limits hold in every sandbox as on the server. Empty: every pool
	// the workflows name is unlimited in the sandbox (a case checks what
	// the workflows write, not the installation's concurrency).
	PoolsFile string
	// Stale, if set, is told which sandboxes of runs that were killed
	// (kill -9, a crash) in TempDir were removed before this run started,
	// and what could not be removed.
	Stale func(removed []Stale, err error)
}

// Result is how one case went.
type Result struct {
	Name string
	// Passed: every output as expected, within the timeout, cleaned up.
	Passed bool
	// Interrupted: the run's context ended before the case did.
	Interrupted bool
	Elapsed     time.Duration
	// Failures are the reasons it failed, one paragraph each (a diff, a
	// timeout, a cleanup that left something behind).
	Failures []string
	// Log lists the slot transitions in simulated time, for -v.
	Log []string
	// Prefix is the case's prefix on the run's file system; Local its
	// local directory (state database, jobs). Both are gone unless Kept.
	Prefix, Local string
	Kept          bool
}

// Run runs cases in parallel, each in its own sandbox, and returns their
// results in the order of cases. It returns an error wrapping ErrSetup,
// before anything runs, when a case cannot run here (a path that cannot
// be rewritten, an Oozie workflow with no Oozie and no stand-in).
// Cancelling ctx interrupts every case; each still cleans up.
func Run(ctx context.Context, opts Options, cases []testcase.Case) ([]Result, error) {
	if err := Check(opts, cases); err != nil {
		return nil, err
	}
	if opts.HDFSRoot == "" {
		opts.HDFSRoot = DefaultHDFSRoot
	}
	if opts.Parallel <= 0 {
		opts.Parallel = DefaultParallel()
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Env.FS == nil {
		opts.Env.FS = targets.Local{}
	}
	if opts.Env.FSURI == "" {
		opts.Env.FSURI = "file:///"
	}
	if opts.Env.Triggers == nil {
		opts.Env.Triggers = trigger.NewMux("file:///")
	}
	r, err := newRunner(opts)
	if err != nil {
		return nil, err
	}
	defer r.lock.Close()
	results := make([]Result, len(cases))
	sem := make(chan struct{}, opts.Parallel)
	var wg sync.WaitGroup
	for i := range cases {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				results[i] = Result{Name: cases[i].Name, Interrupted: true, Failures: []string{"interrupted before it started"}}
				return
			}
			results[i] = r.runCase(ctx, &cases[i])
			<-sem
		}(i)
	}
	wg.Wait()
	n, err := killOrphans(r.root, orphansTimeout)
	if n += int(r.left.Load()); (n > 0 || err != nil) && opts.Orphans != nil {
		opts.Orphans(n, err)
	}
	if !opts.Keep {
		r.removeRun(results)
	} else if err := unmark(r.tmp); err != nil && len(results) > 0 {
		last := &results[len(results)-1]
		last.Failures = append(last.Failures, err.Error())
	}
	return results, nil
}

// newRunner makes the run's directories, after removing those of runs
// that were killed (removeStale): a local one (celos-test-PROJECT-*),
// marked as a live run's for as long as r.lock is open, and the run's
// directory on Env.FS (inside it on the local disk).
func newRunner(opts Options) (*runner, error) {
	tempDir := opts.TempDir
	if tempDir == "" {
		tempDir = os.TempDir()
	}
	stale, err := removeStale(tempDir, opts.Env)
	if (len(stale) > 0 || err != nil) && opts.Stale != nil {
		opts.Stale(stale, err)
	}
	tmp, err := os.MkdirTemp(tempDir, runDirPrefix+opts.Project.Project+"-")
	if err != nil {
		return nil, fmt.Errorf("%w: local temporary directory: %w", ErrSetup, err)
	}
	tmp, _ = filepath.Abs(tmp)
	root := path.Join(filepath.ToSlash(tmp), "fs")
	var rec runRecord
	if !opts.Env.local() || opts.Env.Base != "" {
		root = path.Join(opts.Env.Base, filepath.Base(tmp)+"-"+randomHex(4))
		rec = runRecord{FS: opts.Env.FS.String(), Root: root}
	}
	rec.PID = os.Getpid()
	lock, err := claimRun(tmp, rec)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("%w: %w", ErrSetup, err)
	}
	if err := opts.Env.FS.MkdirAll(root); err != nil {
		os.RemoveAll(tmp)
		lock.Close()
		return nil, fmt.Errorf("%w: create %s%s: %w", ErrSetup, opts.Env.FS, root, err)
	}
	return &runner{opts: opts, root: root, tmp: tmp, lock: lock}, nil
}

// removeRun removes the run's own directories once every case cleaned up
// its own, failing the last case's result when something is left.
func (r *runner) removeRun(results []Result) {
	var problems []string
	if err := r.opts.Env.FS.RemoveAll(r.root); err != nil {
		problems = append(problems, fmt.Sprintf("remove %s%s: %v", r.opts.Env.FS, r.root, err))
	} else if ok, err := targets.Exists(r.opts.Env.FS, r.root); ok || err != nil {
		problems = append(problems, fmt.Sprintf("%s%s is still there after its removal (%v)", r.opts.Env.FS, r.root, err))
	}
	if err := os.RemoveAll(r.tmp); err != nil {
		problems = append(problems, fmt.Sprintf("remove %s: %v", r.tmp, err))
	}
	if len(problems) > 0 && len(results) > 0 {
		last := &results[len(results)-1]
		last.Passed = false
		last.Failures = append(last.Failures, problems...)
	}
}

type runner struct {
	opts Options
	root string // the run's directory on Env.FS
	tmp  string // the run's local directory
	// lock holds the run's marker locked while it runs (claimRun).
	lock *os.File
	// left counts the processes the cases' jobs left running, killed
	// when their cases ended.
	left atomic.Int64
}

// Check finds, before anything runs, the cases that cannot run with opts:
// paths the prefix cannot be put in front of, and workflows whose
// external service is missing here (Oozie without --target and without a
// stand-in in the case's services).
func Check(opts Options, cases []testcase.Case) error {
	if opts.Project == nil {
		return fmt.Errorf("%w: no project", ErrSetup)
	}
	have := opts.Env.have()
	ids := map[string]bool{}
	for _, w := range opts.Project.Workflows {
		ids[w.ID] = true
	}
	var errs []error
	if err := checkPools(opts); err != nil {
		errs = append(errs, err)
	}
	for i := range cases {
		c := &cases[i]
		if probs := append(c.Problems(ids), c.SlotProblems(opts.Project)...); len(probs) > 0 {
			for _, p := range probs {
				errs = append(errs, fmt.Errorf("case %s: %s", c.Name, p))
			}
			continue
		}
		rw := Rewrite{Prefix: "/p", Local: opts.Env.local(), Have: have}
		p, err := rw.Workflows(opts.Project, c)
		if err != nil {
			errs = append(errs, fmt.Errorf("case %s: %w", c.Name, err))
			continue
		}
		for _, w := range p.Workflows {
			if !underTest(c, w.ID) {
				continue
			}
			if !have[w.ExternalService.Type] {
				errs = append(errs, fmt.Errorf("case %s: workflow %s runs on %s, which this run does not have: give the case a stand-in (services: %q: celos.#Command & {...}) or run against an installation (--target)", c.Name, w.ID, w.ExternalService.Type, w.ID))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrSetup, errors.Join(errs...))
	}
	return nil
}

// underTest reports whether workflow id is stepped in case c.
func underTest(c *testcase.Case, id string) bool {
	if len(c.Workflows) == 0 {
		return true
	}
	for _, w := range c.Workflows {
		if w == id {
			return true
		}
	}
	return false
}

// Select returns the cases whose names match re (all with a nil re).
func Select(cases []testcase.Case, re *regexp.Regexp) []testcase.Case {
	if re == nil {
		return cases
	}
	var out []testcase.Case
	for _, c := range cases {
		if re.MatchString(c.Name) {
			out = append(out, c)
		}
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func sortedIDs(c *testcase.Case, p *workflow.Project) []string {
	var ids []string
	for _, w := range p.Workflows {
		if underTest(c, w.ID) {
			ids = append(ids, w.ID)
		}
	}
	sort.Strings(ids)
	return ids
}
