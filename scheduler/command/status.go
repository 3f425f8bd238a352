package command

// A job's status, read from its records and its supervisor's liveness, and
// the recovery of a job submitted before a crash.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/celos-go/celos/scheduler/external"
	"github.com/celos-go/celos/scheduler/slot"
	"github.com/celos-go/celos/schema/workflow"
)

func exitStatus(rec ExitRecord) external.Status {
	// Killed is set by Kill only (an operator's kill).
	return external.Status{Success: rec.success(), Detail: rec.detail(), Killed: rec.Killed}
}

// Status reports on a job: running while its supervisor lives and has not
// recorded an end, then success iff the command exited 0 (not killed, not
// timed out).
func (s *Service) Status(ctx context.Context, w *workflow.Workflow, externalID string) (external.Status, error) {
	dir, err := s.jobDir(externalID)
	if err != nil {
		return external.Status{}, err
	}
	if rec, ok, err := readExit(dir); err != nil {
		return external.Status{}, fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
	} else if ok {
		return s.ended(externalID, rec), nil
	}
	job, err := readJob(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(dir); serr != nil {
			return external.Status{}, fmt.Errorf("command service: %w %s", ErrNoJob, externalID)
		}
		// Created but nothing written: the server stopped in between.
		return external.Status{NeverStarted: true, Detail: "never started: celos stopped while creating the job"}, nil
	}
	if err != nil {
		return external.Status{}, fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
	}
	if !job.Supervised {
		return s.legacyStatus(dir, job, externalID)
	}
	c, claimed, err := readClaim(dir)
	if err != nil {
		return external.Status{}, fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
	}
	s.mu.Lock()
	_, mine := s.procs[externalID]
	s.mu.Unlock()
	if !claimed {
		if mine {
			return external.Status{Running: true, Detail: "starting"}, nil
		}
		// No supervisor of this process, none claimed it: the server that
		// started it stopped first (Recover abandons such jobs; a slot is
		// RUNNING with one only if something else went wrong). It must
		// not start now.
		var won bool
		c, won, err = claim(dir, claimRecord{Run: false, Reason: "celos stopped before the job's supervisor started it", Time: s.now().UTC()})
		if err != nil {
			return external.Status{}, fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
		}
		if won {
			s.log.Warn("command job never started; abandoned", "job", externalID, "reason", c.Reason)
		}
	}
	if !c.Run {
		// Abandoned: nothing ran, and nothing will; unless an operator's
		// kill abandoned it, which fails the slot.
		killed := c.Reason == killedBeforeStart
		return external.Status{NeverStarted: !killed, Killed: killed, Detail: "never started: " + c.Reason}, nil
	}
	if mine || alive(jobRecord{PID: c.PID, Boot: c.Boot}, "") {
		if rec, ok, _ := readExit(dir); ok {
			return s.ended(externalID, rec), nil
		}
		if mine {
			return external.Status{Running: true, Detail: "running"}, nil
		}
		return external.Status{Running: true, Detail: fmt.Sprintf("running (supervisor pid %d, started before celos restarted)", c.PID)}, nil
	}
	// Re-check exit.json: the supervisor writes it just before it exits.
	if rec, ok, err := readExit(dir); err != nil {
		return external.Status{}, fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
	} else if ok {
		return s.ended(externalID, rec), nil
	}
	detail := fmt.Sprintf("exit status unknown: the job's supervisor (pid %d) ended without recording how the command ended (it was killed, or the machine restarted)", c.PID)
	if left := findByExternalID(externalID); len(left) > 0 {
		// So that a retry or rerun does not run beside them.
		killByExternalID(externalID)
		detail += fmt.Sprintf("; %d process(es) it left behind were killed", len(left))
		s.log.Warn("killed processes a job left behind", "job", externalID, "pids", left)
	}
	s.log.Warn("command job lost", "job", externalID, "reason", detail)
	return external.Status{Detail: detail}, nil
}

// legacyStatus reports on a job an older celos ran without a supervisor.
func (s *Service) legacyStatus(dir string, job jobRecord, externalID string) (external.Status, error) {
	if alive(job, externalID) {
		// Its supervisor (and timer) died with the old server: enforce the
		// timeout here, or the job would run, and its slot stay RUNNING,
		// forever.
		if job.Timeout > 0 && !job.Started.IsZero() && s.now().After(job.Started.Add(time.Duration(job.Timeout)*time.Second)) {
			killJob(job, externalID)
			rec := ExitRecord{ExitCode: -1, TimedOut: true, Finished: s.now().UTC()}
			if err := writeJSON(dir, "exit.json", rec); err != nil {
				return external.Status{}, fmt.Errorf("%w: command service: record timeout of %s: %v", external.ErrUnavailable, externalID, err)
			}
			return s.ended(externalID, rec), nil
		}
		return external.Status{Running: true, Detail: fmt.Sprintf("running (pid %d, started before celos restarted)", job.PID)}, nil
	}
	// Re-check exit.json: it may have been written since.
	if rec, ok, _ := readExit(dir); ok {
		return s.ended(externalID, rec), nil
	}
	if job.PID == 0 {
		return external.Status{Detail: "exit status unknown: celos stopped while starting the process (it may or may not have run)"}, nil
	}
	detail := "exit status unknown: the process ended while celos was not running"
	// Its children may outlive it (a shell's background jobs, found by
	// CELOS_EXTERNAL_ID): stop them, so that the retry or rerun that may
	// follow this failure does not run beside them.
	if left := findByExternalID(externalID); len(left) > 0 {
		killJob(job, externalID)
		detail += fmt.Sprintf("; %d process(es) it left behind were killed", len(left))
		s.log.Warn("killed processes a job left behind", "job", externalID, "pids", left)
	}
	return external.Status{Detail: detail}, nil
}

// Recover finds the newest job of slot id started at or after since that
// runs or ran (see external.Recoverer). A job whose supervisor never
// claimed it (the server stopped between writing job.json and the start)
// is abandoned here, logged, and not returned: the engine then submits the
// slot once more, and the abandoned job can no longer start.
func (s *Service) Recover(ctx context.Context, w *workflow.Workflow, id slot.ID, since time.Time) (string, bool, error) {
	jobs, err := s.slotJobs(id)
	if err != nil {
		return "", false, fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
	}
	var cands []slotJob // newest first
	for i := len(jobs) - 1; i >= 0; i-- {
		if jobs[i].started >= since.UnixNano() {
			cands = append(cands, jobs[i])
		}
	}
	for _, c := range cands {
		extID := id.Workflow + "@" + c.name
		dir := filepath.Join(s.dir, id.Workflow, c.name)
		job, err := readJob(dir)
		if errors.Is(err, fs.ErrNotExist) {
			// Never got as far as job.json: nothing can start it.
			s.log.Warn("command job never started; the slot is submitted once more", "slot", id.String(), "job", extID,
				"reason", "celos stopped while creating the job (no job.json)")
			continue
		}
		if err != nil {
			return "", false, fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
		}
		if !job.Supervised {
			return extID, true, nil
		}
		cl, won, err := claim(dir, claimRecord{Run: false, Reason: "celos stopped before the job's supervisor started it", Time: s.now().UTC()})
		if err != nil {
			return "", false, fmt.Errorf("%w: command service: %v", external.ErrUnavailable, err)
		}
		if cl.Run {
			return extID, true, nil
		}
		if won {
			appendLog(dir, "celos: not started: "+cl.Reason+"\n")
			s.log.Warn("command job never started; abandoned, the slot is submitted once more", "slot", id.String(), "job", extID, "reason", cl.Reason)
		}
	}
	return "", false, nil
}
