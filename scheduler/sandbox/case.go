package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/celos-go/celos/scheduler/command"
	"github.com/celos-go/celos/scheduler/engine"
	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/sandbox/compare"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/scheduler/statedb"
	"github.com/celos-go/celos/schema/workflow"
	"github.com/celos-go/celos/schema/workflow/testcase"
	"github.com/celos-go/celos/targets"
)

// cleanupTimeout bounds a case's cleanup (killing its jobs, removing its
// prefix), which runs on a context of its own: an interrupted run still
// cleans up.
const cleanupTimeout = time.Minute

// sandboxCase is one case's sandbox while it runs.
type sandboxCase struct {
	r      *runner
	c      *testcase.Case
	res    *Result
	prefix string // on Env.FS
	local  string // local directory: db/, jobs/, workflows/
	db     *statedb.DB
	cmd    *command.Service
	eng    *engine.Engine
	ids    []string          // the workflows under test, sorted
	types  map[string]string // workflow id → its external service type, as run
}

// runCase runs one case and always cleans up after it.
func (r *runner) runCase(ctx context.Context, c *testcase.Case) Result {
	res := Result{Name: c.Name}
	started := time.Now()
	// The cases' local directories are apart from the run's file system
	// (r.root, in r.tmp when it is the local disk): a case named "fs"
	// would otherwise have its state in the directory of every case's
	// prefix, where a case named "db" or "jobs" has its files.
	s := &sandboxCase{r: r, c: c, res: &res,
		prefix: path.Join(r.root, c.Name), local: filepath.Join(r.tmp, "cases", c.Name)}
	res.Prefix, res.Local = s.prefix, s.local
	cctx, cancel := context.WithTimeout(ctx, c.Timeout)
	err := s.run(cctx)
	timedOut := errors.Is(cctx.Err(), context.DeadlineExceeded) // before cancel, which sets Err
	cancel()
	switch {
	case err == nil:
	case ctx.Err() != nil:
		res.Interrupted = true
		res.Failures = append(res.Failures, "interrupted")
	case timedOut:
		res.Failures = append(res.Failures, fmt.Sprintf("timed out after %s (timeoutSeconds)%s", c.Timeout, s.pending()))
	default:
		res.Failures = append(res.Failures, err.Error())
	}
	s.cleanup()
	res.Elapsed = time.Since(started)
	res.Passed = len(res.Failures) == 0
	return res
}

// run prepares the sandbox, steps the case through its range and compares
// the outputs.
func (s *sandboxCase) run(ctx context.Context) error {
	if err := s.prepare(ctx); err != nil {
		return err
	}
	if err := s.drive(ctx); err != nil {
		return err
	}
	diffs, err := s.compare()
	if err != nil {
		return err
	}
	s.res.Failures = append(s.res.Failures, diffs...)
	if len(diffs) > 0 {
		if st := s.notSuccessful(); st != "" {
			s.res.Failures = append(s.res.Failures, st)
		}
	}
	return nil
}

// prepare writes the sandbox: the prefix with hdfs/ and the inputs, the
// rewritten workflows, and opens the state database, the command service
// and the engine.
func (s *sandboxCase) prepare(ctx context.Context) error {
	o := s.r.opts
	fsys := o.Env.FS
	if err := fsys.MkdirAll(s.prefix); err != nil {
		return fmt.Errorf("create the prefix %s%s: %w", fsys, s.prefix, err)
	}
	if o.HDFSDir != "" {
		if _, err := os.Stat(o.HDFSDir); err == nil {
			dst := Join(s.prefix, path.Join(o.HDFSRoot, o.Project.Project))
			if err := copyLocal(ctx, fsys, o.HDFSDir, dst, o.Dir); err != nil {
				return fmt.Errorf("deploy hdfs/ to %s%s: %w", fsys, dst, err)
			}
		}
	}
	for i, in := range s.c.Inputs {
		dst := Join(s.prefix, in.Path)
		var err error
		if in.Fixture != "" {
			err = copyLocal(ctx, fsys, in.Fixture, dst, o.Dir)
		} else {
			err = writeFiles(ctx, fsys, in.Files, dst)
		}
		if err != nil {
			return fmt.Errorf("write inputs[%d] to %s: %w", i, in.Path, err)
		}
	}
	// Commands run in the sandbox: in the prefix on the local disk, in a
	// local directory of the case's otherwise.
	work := filepath.FromSlash(s.prefix)
	if !o.Env.local() {
		work = filepath.Join(s.local, "work")
		if err := os.MkdirAll(work, 0o755); err != nil {
			return err
		}
	}
	rw := Rewrite{Prefix: s.prefix, FS: o.Env.FSURI, Local: o.Env.local(), Have: o.Env.have(), WorkDir: work}
	p, err := rw.Workflows(o.Project, s.c)
	if err != nil {
		return err
	}
	data, err := p.Marshal()
	if err != nil {
		return err
	}
	wdir := filepath.Join(s.local, "workflows")
	if err := os.MkdirAll(wdir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(wdir, p.Project+".json"), data, 0o644); err != nil {
		return err
	}
	if s.db, err = statedb.OpenWith(filepath.Join(s.local, "db"), statedb.Options{NoSync: true}); err != nil {
		return err
	}
	if s.cmd, err = command.New(filepath.Join(s.local, "jobs"), command.Options{Logger: o.Logger, Tied: true}); err != nil {
		return err
	}
	services := map[string]external.Service{workflow.ServiceCommand: s.cmd}
	for t, svc := range o.Env.Services {
		services[t] = svc
	}
	pools, err := sandboxPools(o, s.local)
	if err != nil {
		return err
	}
	s.eng, err = engine.New(engine.Options{WorkflowsDir: wdir, Store: s.db, Services: services, FS: o.Env.Triggers, Logger: o.Logger, PoolsFile: pools})
	if err != nil {
		return err
	}
	if errs := s.eng.LoadErrors(); len(errs) > 0 {
		return fmt.Errorf("the sandbox's workflows did not load: %s", errs[0].Error)
	}
	s.ids = sortedIDs(s.c, p)
	s.types = make(map[string]string, len(p.Workflows))
	for _, w := range p.Workflows {
		s.types[w.ID] = w.ExternalService.Type
	}
	return nil
}

// compare reads every output and compares it with what is expected.
func (s *sandboxCase) compare() ([]string, error) {
	var diffs []string
	for i, out := range s.c.Outputs {
		var want compare.Tree
		var err error
		if out.Expected != "" {
			if want, err = compare.ReadLocal(out.Expected); err != nil {
				return nil, fmt.Errorf("read the expected outputs[%d]: %w", i, err)
			}
		} else {
			want = compare.Files(out.Files)
		}
		got, err := compare.ReadFS(s.r.opts.Env.FS, Join(s.prefix, out.Path))
		if compare.IsNotExist(err) {
			diffs = append(diffs, fmt.Sprintf("%s: missing (the workflows wrote nothing there)", out.Path))
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read the output %s: %w", out.Path, err)
		}
		d, err := compare.Compare(out.Comparer, want, got)
		if err != nil {
			diffs = append(diffs, fmt.Sprintf("%s (%s): %v", out.Path, out.Comparer.Type, err))
			continue
		}
		for _, x := range d {
			diffs = append(diffs, out.Path+": "+x)
		}
	}
	return diffs, nil
}

// slotsOf lists the slots of the workflows ids in the case's range. A
// listing that fails (its state database cannot be read) is an error: a
// slot left out would look finished.
func (s *sandboxCase) slotsOf(ctx context.Context, ids []string) ([]slot.State, error) {
	var all []slot.State
	for _, id := range ids {
		sts, err := s.eng.Slots(ctx, id, s.c.Start, s.c.End.Add(time.Second))
		if err != nil {
			return nil, err
		}
		for _, s := range sts {
			all = append(all, s.State) // an unreadable slot: no status, a difference
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].ID.Time.Equal(all[j].ID.Time) {
			return all[i].ID.Time.Before(all[j].ID.Time)
		}
		return all[i].ID.Workflow < all[j].ID.Workflow
	})
	return all, nil
}

// notSuccessful describes the slots of a failed case that did not
// succeed, with the errors the engine kept for them (a trigger's file
// system that did not answer, a refused submission) and the end of a
// failed command's output.
func (s *sandboxCase) notSuccessful() string {
	if s.eng == nil {
		return ""
	}
	var b strings.Builder
	problems := map[slot.ID][]string{}
	for _, id := range s.ids {
		for _, p := range s.eng.Problems(id) {
			sid := slot.ID{Workflow: p.Workflow, Time: p.Slot}
			problems[sid] = append(problems[sid], p.Op+": "+p.Error)
		}
	}
	sts, err := s.slotsOf(context.Background(), s.ids)
	if err != nil {
		return "the slots cannot be listed: " + err.Error()
	}
	for _, st := range sts {
		if st.Status == slot.Success {
			continue
		}
		fmt.Fprintf(&b, "\n    %s %s", st.ID, st.Status)
		if ps := problems[slot.ID{Workflow: st.ID.Workflow, Time: st.ID.Time}]; len(ps) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(ps, "; "))
		}
		if st.Status == slot.Failure && st.ExternalID != "" && s.cmd != nil {
			if out, err := s.cmd.ReadLog(st.ExternalID, 400); err == nil && len(out) > 0 {
				for _, l := range strings.Split(strings.TrimRight(string(bytes.ToValidUTF8(out, []byte("?"))), "\n"), "\n") {
					fmt.Fprintf(&b, "\n        | %s", l)
				}
			}
		}
	}
	if b.Len() == 0 {
		return ""
	}
	return "slots that did not succeed:" + b.String()
}

// pending names the slots still READY or RUNNING, for a timeout.
func (s *sandboxCase) pending() string {
	if s.eng == nil {
		return ""
	}
	sts, err := s.slotsOf(context.Background(), s.ids)
	if err != nil {
		return " (the slots cannot be listed: " + err.Error() + ")"
	}
	var names []string
	for _, st := range sts {
		if st.Status == slot.Ready || st.Status == slot.Running {
			names = append(names, st.ID.String()+" "+string(st.Status))
		}
	}
	if len(names) == 0 {
		return ""
	}
	return ": " + strings.Join(names, ", ")
}

// cleanup kills the case's running jobs, closes its state database and
// removes its prefix and local directory (unless Keep), checking that
// nothing is left. Problems fail the case.
func (s *sandboxCase) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	fail := func(format string, args ...any) {
		s.res.Failures = append(s.res.Failures, "cleanup: "+fmt.Sprintf(format, args...))
	}
	if s.eng != nil {
		all := make([]string, 0, len(s.r.opts.Project.Workflows))
		for _, w := range s.r.opts.Project.Workflows {
			all = append(all, w.ID)
		}
		sts, err := s.slotsOf(ctx, all)
		if err != nil {
			fail("list the slots to kill those that run: %v", err)
		}
		for _, st := range sts {
			if st.Status == slot.Running || st.Status == slot.Ready {
				if err := s.eng.Kill(ctx, st.ID); err != nil {
					fail("kill %s: %v", st.ID, err)
				}
			}
		}
	}
	if s.cmd != nil {
		// Every process the jobs left running is killed, however it
		// detached (tied jobs: command.Options.Tied).
		n, err := s.cmd.Release(ctx)
		s.r.left.Add(int64(n))
		if err != nil {
			fail("wait for the jobs to end: %v", err)
		}
	}
	if s.db != nil {
		s.db.Close()
	}
	if s.r.opts.Keep {
		s.res.Kept = true
		return
	}
	fsys := s.r.opts.Env.FS
	if err := fsys.RemoveAll(s.prefix); err != nil {
		fail("remove %s%s: %v", fsys, s.prefix, err)
	} else if ok, err := targets.Exists(fsys, s.prefix); ok || err != nil {
		fail("%s%s is still there after its removal (%v)", fsys, s.prefix, err)
	}
	if err := os.RemoveAll(s.local); err != nil {
		fail("remove %s: %v", s.local, err)
	} else if _, err := os.Lstat(s.local); !os.IsNotExist(err) {
		fail("%s is still there after its removal", s.local)
	}
}
