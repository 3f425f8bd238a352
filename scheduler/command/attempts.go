package command

// Every attempt of a slot, read from the job records (scheduler.AttemptLister).

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/celos-go/celos/scheduler"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

var _ scheduler.AttemptLister = (*Service)(nil)

// maxAttempts bounds the attempts listed for one slot (a slot rerun all
// day long keeps a job directory per run until they are pruned).
const maxAttempts = 200

// Attempts lists the jobs of slot id, oldest first: one per submission
// (the first, each retry, each rerun), from their job directories. It only
// reads: a job whose supervisor is gone without an exit record is shown as
// "exit status unknown" here, and Status (the engine's) decides about it.
func (s *Service) Attempts(ctx context.Context, w *workflow.Workflow, id slot.ID) ([]scheduler.Attempt, error) {
	if !workflow.IDPattern.MatchString(id.Workflow) || id.Workflow == "." || id.Workflow == ".." {
		return nil, fmt.Errorf("command service: %q is not a workflow id", id.Workflow)
	}
	jobs, err := s.slotJobs(id)
	if err != nil {
		return nil, fmt.Errorf("command service: attempts of %s: %w", id, err)
	}
	if len(jobs) > maxAttempts {
		jobs = jobs[len(jobs)-maxAttempts:]
	}
	out := make([]scheduler.Attempt, 0, len(jobs))
	for _, j := range jobs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		extID := id.Workflow + "@" + j.name
		out = append(out, s.attempt(filepath.Join(s.dir, id.Workflow, j.name), extID))
	}
	return out, nil
}

// attempt reads one job's records into an Attempt.
func (s *Service) attempt(dir, extID string) scheduler.Attempt {
	a := scheduler.Attempt{ExternalID: extID}
	if fi, err := os.Stat(filepath.Join(dir, "output.log")); err == nil && fi.Mode().IsRegular() {
		a.HasLog = true
	}
	job, err := readJob(dir)
	if err != nil {
		a.Status = "never started: celos stopped while creating the job"
		if !errors.Is(err, fs.ErrNotExist) {
			a.Status = "unreadable job record: " + err.Error()
		}
		return a
	}
	a.Submitted = job.Started
	if rec, ok, err := readExit(dir); err != nil {
		a.Status = "unreadable exit record: " + err.Error()
		return a
	} else if ok {
		return withExit(a, job, dir, rec)
	}
	if !job.Supervised {
		a.Started = job.Started
		if alive(job, extID) {
			a.Running, a.Status = true, "running"
		} else {
			a.Status = "exit status unknown"
		}
		return a
	}
	c, claimed, err := readClaim(dir)
	switch {
	case err != nil:
		a.Status = "unreadable claim record: " + err.Error()
	case !claimed:
		a.Running, a.Status = true, "starting"
	case !c.Run:
		a.Status = "never started: " + c.Reason
	default:
		a.Started = c.Time
		s.mu.Lock()
		_, mine := s.procs[extID]
		s.mu.Unlock()
		if mine || alive(jobRecord{PID: c.PID, Boot: c.Boot}, "") {
			a.Running, a.Status = true, "running"
		} else if rec, ok, _ := readExit(dir); ok {
			return withExit(a, job, dir, rec)
		} else {
			a.Status = "exit status unknown"
		}
	}
	return a
}

// withExit completes an attempt from its exit record.
func withExit(a scheduler.Attempt, job jobRecord, dir string, rec ExitRecord) scheduler.Attempt {
	if a.Started.IsZero() {
		a.Started = job.Started
		if c, ok, err := readClaim(dir); err == nil && ok && c.Run {
			a.Started = c.Time
		}
	}
	a.Ended, a.Success, a.Status = rec.Finished, rec.success(), rec.detail()
	if !rec.Killed && !rec.TimedOut && rec.Signal == "" && rec.Error == "" {
		code := rec.ExitCode
		a.ExitCode = &code
	}
	return a
}

// slotJob is a job record directory of a slot: its name and start (ns).
type slotJob struct {
	name    string
	started int64
}

// slotJobs lists the job records of slot id, oldest first; none when the
// workflow has no directory.
func (s *Service) slotJobs(id slot.ID) ([]slotJob, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, id.Workflow))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var jobs []slotJob
	want := id.Time.UTC().Format(slotLayout)
	for _, e := range entries {
		t, started, err := parseJobName(e.Name())
		if err != nil || !e.IsDir() || t.Format(slotLayout) != want {
			continue
		}
		jobs = append(jobs, slotJob{e.Name(), started})
	}
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].started < jobs[j].started })
	return jobs, nil
}
